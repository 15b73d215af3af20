"""`gpubench recommend --resume`: finish a search in the result directory it was started in.

The first command stores what decides the search in env.json's `recommend.settings` (the model, the
device, the flags that shape the space, the probes and the verdicts, and the sha256 of the candidate
matrix it planned). A `--resume` plans the search again from its own flags and refuses (exit 2,
before any work) a directory whose stored settings differ, naming the first that does. Then every
probe and loss check already in results.csv with a final status is reused as it stands (the race
asks for the same probe, candidate and round, and gets the stored row): given the same
measurements, the race takes the same path and gives the same answer. `--budget` is this sitting's
time, not part of the settings."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..results import ENV_JSON, FINAL_STATUSES, RESULTS_CSV, read_env, read_results

SETTINGS_KEY = "settings"
FLAGS = {  # settings key -> the flag that sets it (how the refusal names it)
    "model": "--model",
    "device": "--device",
    "gpu_memory": "--gpu-memory",
    "objective": "--objective",
    "data": "--data",
    "allow": "--allow",
    "seq_len": "--seq-len",
    "global_batch": "--global-batch",
    "axes": "--axes",
    "engine": "--engine",
    "probe_steps": "--probe-steps",
    "warmup_steps": "warmup steps",
    "parity_steps": "--parity-steps",
    "finalists": "--finalists",
    "exhaustive": "--exhaustive",
    "exhaustive_rounds": "exhaustive rounds",
    "record": "--record",
    "candidates_sha256": "the candidates planned (the space)",
}


def search_settings(request: Any, matrix_text: str) -> dict[str, Any]:
    """What decides a search's measurements and answer (not --budget, --out or the output format)."""
    settings = {key: getattr(request, key) for key in FLAGS if hasattr(request, key)}
    settings["allow"] = list(settings.get("allow") or ())
    settings["axes"] = None if settings.get("axes") is None else list(settings["axes"])
    settings["record"] = bool(settings.get("record"))
    settings["candidates_sha256"] = hashlib.sha256(matrix_text.encode()).hexdigest()
    return settings


def check_same_search(out: Path, settings: Mapping[str, Any]) -> None:
    """BadInput, one line, unless `out` holds a recommend search made with these settings."""
    env = read_env(out)
    stored = ((env or {}).get("recommend") or {}).get(SETTINGS_KEY)
    if not isinstance(stored, dict):
        raise BadInput(
            f"--resume {out}: not a gpubench recommend directory (no recommend settings in its {ENV_JSON})",
            hint="give the --out of an earlier `gpubench recommend`",
        )
    for key, value in settings.items():
        if stored.get(key) != value:
            raise BadInput(
                f"--resume {out}: made with {FLAGS.get(key, key)} = {stored.get(key)!r}, not {value!r}",
                hint="resume with the flags it was made with, or start a new search with another --out",
            )


def earlier_rows(out: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """(scenario, repeat) -> its row, for the final rows of an earlier sitting (an interrupted one runs again)."""
    path = out / RESULTS_CSV
    if not path.is_file():
        return {}
    frame = read_results(path)
    keep = frame[frame["status"].isin(FINAL_STATUSES)]
    rows = [{k: (None if v != v else v) for k, v in row.items()} for row in keep.to_dict("records")]
    return {(str(r["scenario"]), int(r["repeat"] or 0)): r for r in rows}


def _instant(text: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(text)).timestamp()
    except ValueError:
        return None


def earlier_sittings_s(env: Mapping[str, Any], rows: Iterable[Mapping[str, Any]]) -> tuple[float, ...]:
    """The wall seconds of each earlier sitting of a resumed search: from its start (env.json's
    `created_at`, then each `resumes` entry's; the last entry is this sitting) to the end of the
    last row it started (`started_at` + `worker_wall_s`), so a sitting killed before it wrote its
    answer counts too; 0 for one that measured nothing."""
    found = env.get("resumes")
    resumes = found if isinstance(found, list) else []
    starts = [_instant(env.get("created_at")), *(_instant(r.get("created_at")) for r in resumes)][:-1]
    ends: list[float | None] = [None] * len(starts)
    for row in rows:
        began, wall = _instant(row.get("started_at")), row.get("worker_wall_s")
        if began is None or not isinstance(wall, int | float) or wall != wall:
            continue
        sitting = max((i for i, s in enumerate(starts) if s is not None and s <= began), default=None)
        if sitting is not None:
            ends[sitting] = max(ends[sitting] or 0.0, began + float(wall))
    return tuple(0.0 if s is None or e is None else max(0.0, e - s) for s, e in zip(starts, ends, strict=True))
