"""`python -m bench.worker --serve`: a fork server that imports torch and transformers once, then
forks one worker per scenario, so a scenario does not pay 10-15 s of imports.

Protocol, one JSON object per line. In on stdin: {"spec": PATH, "result": PATH, "log": PATH}.
Out on stdout: {"ready": true, "imports_s": S} once; then per request {"pid": N} when the worker is
forked and {"pid": N, "returncode": RC} when it has ended (RC negative: killed by that signal).
A request while the server cannot fork safely gets {"error": WHY}.

The server never creates a CUDA context: torch's availability check goes through NVML
(PYTORCH_NVML_BASED_CUDA_CHECK), the packages that initialise CUDA on import (peft, torchao:
scenario.CUDA_AT_IMPORT) are kept out of every worker that does not use them, and the server
checks torch.cuda.is_initialized() before it forks.
Each worker leads its own process group and dies with the server, which dies with the runner.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any, TextIO

from ..engines import ENGINES as REGISTRY


def _send(out: TextIO, message: dict[str, Any]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


ENGINES = tuple(REGISTRY)  # every engine of bench/engines.py


def _preload(engines: Sequence[str]) -> str | None:
    """Import what the workers of these engines need; None, or why forking is not safe. A worker
    of another engine imports the rest itself."""
    from .run import preload

    for engine in engines:
        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}")
        preload(engine)
    import torch

    if torch.cuda.is_initialized():
        return "an import created a CUDA context in the fork server; workers are started afresh instead"
    return None


def _child(request: dict[str, Any], started: float) -> int:
    """In the forked worker: own process group, own log, then the usual worker."""
    os.setsid()
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.close(devnull)
    from .entry import die_with_parent, run_worker

    die_with_parent()
    return run_worker(request["spec"], request["result"], {"forked": started})


def serve(stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout, engines: Sequence[str] = ENGINES) -> int:
    begin = time.time()
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"  # is_available() without initialising CUDA
    from .entry import die_with_parent

    die_with_parent()
    try:
        unsafe = _preload(engines)
    except Exception as exc:  # an import that fails here fails in the worker too, with its traceback
        unsafe = f"the fork server could not import the worker's modules: {type(exc).__name__}: {exc}"
    _send(stdout, {"ready": unsafe is None, "imports_s": round(time.time() - begin, 3), "error": unsafe})
    for line in stdin:
        if not line.strip():
            continue
        if unsafe is not None:
            _send(stdout, {"error": unsafe})
            continue
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        started = time.time()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child(request, started)
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _send(stdout, {"pid": pid})
        _, status = os.waitpid(pid, 0)
        _send(stdout, {"pid": pid, "returncode": os.waitstatus_to_exitcode(status)})
    return 0
