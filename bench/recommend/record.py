"""`gpubench recommend --record`: the chosen recipe into the history, so the nightly `history check`
gates it from the next night on.

The search's own directory holds every candidate's probes; the history is given only the answer:
DIR/record/, a result directory of the winner's probe rows and the plain recipe's (probed as many
times as the winner, at the same probe settings), with the search's env.json. It is stored like
`gpubench history import DIR/record` (bench.history.library.import_dirs). The certificate
(DIR/recommended.toml) holds the same settings, so `gpubench run --matrix DIR/recommended.toml
--record` each night adds to the same two series. A store failure only warns: the answer is on disk."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..redact import redact_url
from ..results import ENV_JSON, RESULTS_CSV, write_results

RECORD_DIR = "record"


def write_record_dir(out: Path, rows: Sequence[dict[str, Any]]) -> Path:
    """DIR/record/: `rows` (the winner's and the plain recipe's probes) and the search's env.json."""
    folder = out / RECORD_DIR
    folder.mkdir(exist_ok=True)
    shutil.copyfile(out / ENV_JSON, folder / ENV_JSON)
    write_results(folder / RESULTS_CSV, list(rows))
    return folder


def record(
    db: str, out: Path, rows: Sequence[dict[str, Any]], warn: Callable[[str], None], info: Callable[[str], None]
) -> int | None:
    """Store DIR/record/ in the history; the run's id there, or None (warned) when the store failed."""
    from ..history.library import import_dirs

    folder = write_record_dir(out, rows)
    try:
        stored = import_dirs(db, [folder])[0]
    except Exception as exc:  # noqa: BLE001 - any store failure is only a warning here
        warn(f"the answer was not recorded in the history ({exc}): add it with `gpubench history import {folder}`")
        return None
    info(f"history: {'recorded' if stored.created else 'already stored:'} run {stored.run_id} in {redact_url(db)}")
    return stored.run_id
