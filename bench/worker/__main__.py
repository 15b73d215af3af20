"""`python -m bench.worker SPEC.json RESULT.json` trains one scenario; `--probe OUT.json` describes torch;
`--serve` is the fork server (forkserver.py) that forks such workers with the imports already done.

The child's only output to the parent is the JSON file it writes atomically at the end; stdout
and stderr are logs. A worker that dies without writing it is reported by the parent as crashed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from .. import cpus
from ..fsio import atomic_write_json
from .entry import die_with_parent, run_worker

PROCESS_START = time.time()
# peft is not used, and its import pulls in bitsandbytes, which creates a CUDA context on import
# (too early for the fork server, and 3-4 s for every worker): keep it out, in every launcher alike.
sys.modules.setdefault("peft", None)  # type: ignore[arg-type]


def main(argv: list[str]) -> int:
    cpus.pin_from_env()  # --cpu-affinity, before any thread starts; the fork server's children inherit it
    if argv[:1] == ["--probe"] and len(argv) == 2:
        from .probe import probe

        atomic_write_json(Path(argv[1]), probe())
        return 0
    if argv == ["--serve"]:
        from .forkserver import serve

        return serve()
    if len(argv) != 2:
        print("usage: python -m bench.worker SPEC.json RESULT.json | --probe OUT.json | --serve", file=sys.stderr)
        return 2
    die_with_parent()
    return run_worker(argv[0], argv[1], {"interpreter": PROCESS_START})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
