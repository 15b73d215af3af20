"""One worker's life: read SPEC.json, train the scenario, write RESULT.json atomically. Called by
`python -m bench.worker` (a fresh interpreter) and by the fork server (forkserver.py) in each child."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from .. import cpus
from ..fsio import atomic_write_json, read_json


def die_with_parent() -> None:
    """Linux: be killed when the parent dies, even by SIGKILL, so no orphan keeps the GPU busy."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
        if os.getppid() == 1:  # the parent died before the call above
            os._exit(1)
    except Exception:
        pass


def _warm_cuda() -> None:
    """Create the CUDA context in a thread while the main thread imports transformers."""
    try:
        import torch

        torch.empty(1, device="cuda")
    except Exception:  # the main thread will meet the same error and report it
        pass


def classify(exc: BaseException) -> dict[str, Any]:
    """A failure as a result: out-of-memory apart from other errors."""
    import torch

    text = f"{type(exc).__name__}: {exc}".strip()
    first_line = text.splitlines()[0] if text else type(exc).__name__
    oom = isinstance(exc, torch.OutOfMemoryError) or "out of memory" in text.lower()
    return {"status": "oom" if oom else "error", "reason": first_line[:500], "figures": {}}


def run_worker(spec_file: str, result_file: str, marks: dict[str, float]) -> int:
    """Train the scenario of SPEC and write RESULT; `marks` are the start-up times so far."""
    spec_path, result_path = Path(spec_file), Path(result_file)
    spec = read_json(spec_path)
    # The log's first line, so a crash's stderr tail always says what was running.
    print(
        f"gpubench worker: pid {os.getpid()}, scenario '{spec['scenario'].get('name')}' "
        f"repeat {spec.get('repeat')} on {spec.get('device')}, model {spec.get('model')}",
        file=sys.stderr,
        flush=True,
    )
    marks = dict(marks)
    rank_file = _rank_file(spec, result_path)
    if rank_file is not None:  # one rank of a torchrun job: say it is alive, and its pid
        atomic_write_json(rank_file, {"status": "running", "pid": os.getpid(), "reason": ""})
    forked = "forked" in marks  # forked by the fork server: imports done, CUDA not started
    warm = None
    if str(spec.get("device", "")).startswith("cuda") and not forked:
        warm = threading.Thread(target=_warm_cuda, name="cuda-warm", daemon=True)
        warm.start()
    from ..families import family_of
    from .skips import Skip
    from .train_one import memory_figures, preload, run

    if not forked:
        with contextlib.suppress(Exception):  # an import error is reported where the import is needed
            preload(spec["scenario"].get("engine", "trainer"), family_of(str(spec.get("model", "auto"))))
        marks["imports"] = time.time()
    if warm is not None:
        warm.join()
        marks["cuda_context"] = time.time()
    try:
        result = run(spec, scratch=result_path.parent / "scratch", marks=marks)
    except Skip as exc:
        result = {"status": "skipped", "reason": str(exc), "figures": {}}
    except Exception as exc:  # recorded as a row; the parent's run goes on
        traceback.print_exc()
        result = classify(exc)
        try:
            import torch

            result["figures"] = memory_figures(torch.device(spec["device"]))
        except Exception:
            pass
    result.setdefault("figures", {})["cpu_affinity"] = cpus.current()  # where this worker ran
    if rank_file is None:
        atomic_write_json(result_path, result)
        return 0
    return _end_rank(rank_file, result_path, result)


def _rank_file(spec: dict[str, Any], result_path: Path) -> Path | None:
    """rank-N.json beside the result, for a rank of a multi-process scenario; None otherwise."""
    from .dist import from_env

    rank = from_env()
    if spec["scenario"].get("strategy", "none") == "none" or rank is None:
        return None
    return result_path.parent / f"rank-{rank.rank}.json"


def _end_rank(rank_file: Path, result_path: Path, result: dict[str, Any]) -> int:
    """A rank's end: its own outcome in rank-N.json; the node's result.json from local rank 0 once
    every rank has succeeded (the figures are gathered, so they are the whole job's). A failed rank
    exits 1, so that torchrun stops the others instead of leaving them waiting in a collective."""
    from . import dist

    ok = result["status"] in ("ok", "diverged", "skipped")
    atomic_write_json(rank_file, {"status": result["status"], "reason": result.get("reason", ""), "pid": os.getpid()})
    rank = dist.from_env()
    if ok and rank is not None and rank.leader:
        atomic_write_json(result_path, result)
    if ok:
        with contextlib.suppress(Exception):
            dist.close()
    return 0 if ok else 1
