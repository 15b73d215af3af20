"""`python -m bench.worker SPEC.json RESULT.json` trains one scenario; `--probe OUT.json` describes torch;
`--ceiling SPEC.json OUT.json` measures the matmul ceiling (ceiling.py); under torchrun,
`--interconnect cpu|cuda OUT.json` times the collectives (interconnect.py);
`--serve` is the fork server (forkserver.py) that forks such workers with the imports already done.

The child's only output to the parent is the JSON file it writes atomically at the end; stdout
and stderr are logs. A worker that dies without writing it is reported by the parent as crashed.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path

from .. import cpus
from ..fsio import atomic_write_json
from ..recipe.scenario import CUDA_AT_IMPORT, cuda_at_import
from .entry import die_with_parent, run_worker

PROCESS_START = time.time()


def keep_cuda_imports_out(spec_path: str | None, serving: tuple[str, ...] = ()) -> None:
    """Block the import of the packages that create a CUDA context on import (peft, torchao:
    scenario.CUDA_AT_IMPORT) unless this worker's scenario uses them. transformers imports them when
    it can: too early for the fork server, and seconds for every worker. A scenario that uses one is
    forked by the fork server that preloads it (`serving`: `--serve ... --with`) or spawned afresh."""
    used: tuple[str, ...] = serving
    if spec_path is not None:
        # the worker reports an unreadable spec itself
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
            used = cuda_at_import(json.loads(Path(spec_path).read_text(encoding="utf-8"))["scenario"])
    for name in CUDA_AT_IMPORT:
        if name not in used:
            sys.modules.setdefault(name, None)  # type: ignore[arg-type]


def served_extras(argv: list[str]) -> tuple[str, ...]:
    """The CUDA_AT_IMPORT packages a fork server's `--with` names (others are ignored)."""
    named = argv[3].split(",") if argv[:1] == ["--serve"] and argv[2:3] == ["--with"] and len(argv) == 4 else []
    return tuple(name for name in CUDA_AT_IMPORT if name in named)


def main(argv: list[str]) -> int:
    keep_cuda_imports_out(argv[0] if len(argv) == 2 and not argv[0].startswith("--") else None, served_extras(argv))
    cpus.pin_from_env()  # --cpu-affinity, before any thread starts; the fork server's children inherit it
    if argv[:1] == ["--probe"] and len(argv) == 2:
        from .torch_probe import probe

        atomic_write_json(Path(argv[1]), probe())
        return 0
    if argv[:1] == ["--ceiling"] and len(argv) == 3:
        from ..fsio import read_json
        from .ceiling import measure

        spec = read_json(Path(argv[1]))
        atomic_write_json(Path(argv[2]), measure(spec["device"], [tuple(s) for s in spec["shapes"]]))
        return 0
    if argv[:1] == ["--interconnect"] and len(argv) == 3 and argv[1] in ("cpu", "cuda"):
        from .collectives import run

        return run(argv[1], argv[2])
    if argv[:1] == ["--serve"] and len(argv) in (1, 2, 4) and argv[2:3] in ([], ["--with"]):
        from .forkserver import ENGINES, serve

        engines = [e for e in argv[1].split(",") if e] if len(argv) >= 2 else ENGINES
        return serve(engines=engines, extras=served_extras(argv))
    if len(argv) != 2:
        usage = (
            "usage: python -m bench.worker SPEC.json RESULT.json | --probe OUT.json "
            "| --ceiling SPEC.json OUT.json | --interconnect cpu|cuda OUT.json "
            "| --serve [ENGINE,... [--with PACKAGE,...]]"
        )
        print(usage, file=sys.stderr)
        return 2
    die_with_parent()
    return run_worker(argv[0], argv[1], {"interpreter": PROCESS_START})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
