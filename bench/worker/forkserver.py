"""`python -m bench.worker --serve`: a fork server that imports torch and transformers once, then
forks one worker per scenario, so a scenario does not pay 10-15 s of imports.

Protocol, one JSON object per line. In on stdin: {"spec": PATH, "result": PATH, "log": PATH}.
Out on stdout: {"ready": true, "imports_s": S, "preloaded": [PACKAGE, ...]} once; then per request
{"pid": N} when the worker is forked and {"pid": N, "returncode": RC} when it has ended (RC
negative: killed by that signal).
A request while the server cannot fork safely gets {"error": WHY}.

The server never creates a CUDA context: torch's availability check goes through NVML
(PYTORCH_NVML_BASED_CUDA_CHECK), the packages that initialise CUDA on import (peft, torchao:
scenario.CUDA_AT_IMPORT) are kept out of every worker that does not use them, and the server
checks torch.cuda.is_initialized() before it forks. Another server (`--with PACKAGE,...`), one for each set, serves
the scenarios that use them: it preloads each one that imports without a CUDA context once
torch.cuda.get_device_capability answers from NVML (cudafree.py), and says which in `preloaded`.
Each worker runs under a reaper that leads its own session (bench/reaper.py): what the worker
starts ends with it, and the whole tree dies with the server, which dies with the runner.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any, TextIO

from ..recipe.engine_registry import ENGINES as REGISTRY


def _send(out: TextIO, message: dict[str, Any]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


ENGINES = tuple(REGISTRY)  # every engine of bench/recipe/engine_registry.py


def _preload(engines: Sequence[str], extras: Sequence[str] = ()) -> tuple[str | None, list[str]]:
    """Import what the workers of these engines need, and of `extras` (CUDA_AT_IMPORT) those that
    import without a CUDA context; (None or why forking is not safe, the extras imported). A worker
    of another engine imports the rest itself. With extras, the engines' imports too answer the
    capability from NVML: transformers imports peft itself where it can (transformers.trainer)."""
    from .cudafree import (
        capability_from_nvml,
        import_nvml_capable,
        imports_without_cuda,
        record_first_cuda_init,
        say_first_cuda_init,
    )
    from .train_one import preload

    with capability_from_nvml() if extras else contextlib.nullcontext():
        for engine in engines:
            if engine not in ENGINES:
                raise ValueError(f"unknown engine {engine!r}")
            preload(engine)
    import torch

    preloaded = []
    first = record_first_cuda_init(torch)
    for name in extras if not torch.cuda.is_initialized() else ():
        if imports_without_cuda(name):
            import_nvml_capable(name)
            preloaded.append(name)
    if torch.cuda.is_initialized():
        say_first_cuda_init("a CUDA context was created", first)
        return "an import created a CUDA context in the fork server; workers are started afresh instead", []
    return None, preloaded


def freeze_imports() -> None:
    """Move every object the imports made into the collector's permanent generation (gc.freeze), so
    a forked worker's full collections skip them: the Trainer's train() begins with accelerate's
    gc.collect(), which walked the millions of objects torch and transformers leave and took
    0.25-0.34 s of every forked row's start (on the H100 host and on a CPU VM alike). What the
    worker makes itself is collected as before; nothing the server imported is ever garbage."""
    gc.collect()
    gc.freeze()


def _child(request: dict[str, Any], started: float) -> int:
    """In the forked process: its own session and log, then the reaper (bench/reaper.py) of
    the worker it forks, so what the worker starts ends with it, and with the server."""
    os.setsid()
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.close(devnull)
    from .. import reaper
    from .entry import die_with_parent, run_worker

    server = os.getppid()
    if not reaper.become_reaper(server):
        return 1
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            die_with_parent()
            code = run_worker(request["spec"], request["result"], {"forked": started})
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    reaper.exit_as(reaper.supervise(pid, server))
    return 1  # not reached: exit_as ends this process


def serve(
    stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout, engines: Sequence[str] = ENGINES, extras: Sequence[str] = ()
) -> int:
    begin = time.time()
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"  # is_available() without initialising CUDA
    from .entry import die_with_parent

    die_with_parent()
    preloaded: list[str] = []
    try:
        unsafe, preloaded = _preload(engines, extras)
    except Exception as exc:  # an import that fails here fails in the worker too, with its traceback
        unsafe = f"the fork server could not import the worker's modules: {type(exc).__name__}: {exc}"
    if unsafe is None:
        freeze_imports()
    ready = {"ready": unsafe is None, "imports_s": round(time.time() - begin, 3), "error": unsafe}
    _send(stdout, {**ready, "preloaded": preloaded})
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
