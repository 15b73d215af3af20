"""Importing a package that asks for the GPU's compute capability at import, without a CUDA context.

bitsandbytes (which peft imports) calls torch.cuda.get_device_capability while it is imported, to
pick its native library; that creates a CUDA context, and a process with one cannot fork usable
workers. While such a package is imported here, the capability is answered from NVML instead (the
same figure, read without CUDA). Whether a package then imports without a context is tried in a
forked child first (`imports_without_cuda`): the fork server preloads only what passed, and a
package that still creates a context stays with workers started afresh (bench/run/launcher.py).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any

CLEAN, CONTEXT, FAILED = 0, 3, 4  # the probe child's exit codes


def _visible_handles(nv: Any) -> list[Any]:
    """NVML handles of the GPUs CUDA numbers 0, 1, ...: CUDA_VISIBLE_DEVICES's entries (indices or
    UUIDs), or every GPU; ValueError for an entry NVML cannot name (a MIG instance)."""
    if "CUDA_VISIBLE_DEVICES" not in os.environ:
        return [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
    handles = []
    for entry in (d.strip() for d in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()):
        if entry.isdigit():
            handles.append(nv.nvmlDeviceGetHandleByIndex(int(entry)))
        elif entry.startswith("GPU-"):
            handles.append(nv.nvmlDeviceGetHandleByUUID(entry))
        else:
            raise ValueError(f"CUDA_VISIBLE_DEVICES entry {entry!r}")
    return handles


def nvml_capability() -> Callable[..., tuple[int, int]] | None:
    """torch.cuda.get_device_capability's stand-in, answering from NVML; None without NVML or GPUs."""
    try:
        import pynvml

        pynvml.nvmlInit()
        capabilities = [tuple(pynvml.nvmlDeviceGetCudaComputeCapability(h)) for h in _visible_handles(pynvml)]
    except Exception:  # no NVML, no driver, an entry it cannot name: the import goes as it would
        return None
    if not capabilities:
        return None

    def capability(device: Any = None) -> tuple[int, int]:
        import torch

        index = torch.cuda._get_device_index(device, optional=True) if device is not None else 0
        major, minor = capabilities[max(index, 0)]
        return int(major), int(minor)

    return capability


def triton_answer(capability: Callable[..., tuple[int, int]]) -> functools._lru_cache_wrapper[bool]:
    """torch.utils._triton.has_triton's stand-in on a CUDA host, answering as it would (Triton
    installed, device detection on, compute capability 7.0 or more) with the capability from NVML:
    the real one asks CUDA for the device's properties, which makes a CUDA context (torchao's
    import calls it, and binds the name: its modules keep this stand-in, which gives the same answer)."""
    import torch.utils._triton as triton_utils
    from torch._inductor import config

    answer = triton_utils.has_triton_package() and not config.triton_disable_device_detection and capability(0)[0] >= 7

    @functools.cache
    def has_triton() -> bool:
        return bool(answer)

    return has_triton


@contextlib.contextmanager
def capability_from_nvml() -> Iterator[None]:
    """Within: torch.cuda.get_device_capability answers from NVML, and so does Triton's device check
    (torch.utils._triton.has_triton); both unchanged where NVML cannot answer."""
    import torch
    import torch.utils._triton as triton_utils

    stand_in = nvml_capability()
    if stand_in is None:
        yield
        return
    original, original_triton = torch.cuda.get_device_capability, triton_utils.has_triton
    torch.cuda.get_device_capability = stand_in
    triton_utils.has_triton = triton_answer(stand_in)
    try:
        yield
    finally:
        torch.cuda.get_device_capability = original
        triton_utils.has_triton = original_triton


def import_nvml_capable(name: str) -> None:
    """Import `name` with the capability from NVML."""
    with capability_from_nvml():
        importlib.import_module(name)


def record_first_cuda_init(torch: Any) -> list[str]:
    """Make torch._C._cuda_init (which every CUDA context torch creates goes through) record, in the
    list returned, the stack of its first call: the log of a package that cannot be preloaded says
    which call made the context (torchao: triton asking for the device's properties)."""
    first: list[str] = []
    original = getattr(torch._C, "_cuda_init", None)
    if original is None:  # a torch built without CUDA
        return first

    def recording() -> Any:
        if not first:
            first.extend(traceback.format_stack(limit=12)[:-1])
        return original()

    torch._C._cuda_init = recording
    return first


def say_first_cuda_init(what: str, first: list[str]) -> None:
    """Into the fork server's log: `what`, and the stack record_first_cuda_init kept."""
    where = "".join(first) or "  (not through torch._C._cuda_init)\n"
    print(f"gpubench fork server: {what}, first here:\n{where}", file=sys.stderr, flush=True)


def imports_without_cuda(name: str) -> bool:
    """Whether `name` imports (with the capability from NVML) without creating a CUDA context,
    tried in a forked child so that this process stays as it is. The child's output goes to stderr."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = FAILED
        try:
            os.dup2(2, 1)  # keep stdout (the fork server's protocol) clean
            import torch

            first = record_first_cuda_init(torch)
            import_nvml_capable(name)
            code = CONTEXT if torch.cuda.is_initialized() else CLEAN
            if code == CONTEXT:
                say_first_cuda_init(f"importing {name} created a CUDA context", first)
        except BaseException as exc:  # an import that fails: not preloaded; its worker says why
            print(f"gpubench fork server: importing {name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        finally:
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == CLEAN
