"""What torch sees, asked of a child process so that the parent never creates a CUDA context."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..fsio import read_json
from .childenv import worker_env
from .proc import run_subprocess, tail
from .request import check_device_name

PROBE_TIMEOUT_S = 120.0


def probe_torch(scratch: Path) -> dict[str, Any]:
    """Ask a child what torch sees, so this process never creates a CUDA context."""
    out = scratch / "probe.json"
    result = run_subprocess(
        [sys.executable, "-m", "bench.worker", "--probe", str(out)],
        timeout_s=PROBE_TIMEOUT_S,
        log_path=scratch / "probe.log",
        env=worker_env(None),
    )
    if result.interrupted:  # Ctrl-C while torch was starting: stop, nothing ran
        raise KeyboardInterrupt
    if result.returncode != 0 or not out.is_file():
        raise BadInput(f"cannot start torch in a child process: {tail(scratch / 'probe.log', 400).strip()}")
    data: dict[str, Any] = read_json(out)
    return data


def no_gpu_driver() -> bool:
    """No NVIDIA driver (/dev/nvidiactl, nvidia-smi) and no ROCm (/dev/kfd): `--device auto` can
    only mean the CPU, so torch need not be started to find out."""
    import shutil

    return not (Path("/dev/nvidiactl").exists() or Path("/dev/kfd").exists() or shutil.which("nvidia-smi"))


def probe(device: str, scratch: Path) -> dict[str, Any]:
    """What torch sees: asked of a child, or for the CPU read without starting torch."""
    if device == "cpu" or (device == "auto" and no_gpu_driver()):
        return describe_cpu_torch()
    return probe_torch(scratch)


def describe_cpu_torch() -> dict[str, Any]:
    """What `--device cpu` needs to know of torch, without starting it (a child that imports torch
    costs 2-3 s of CPU): its version and CUDA build, read from torch/version.py as text. A torch
    that cannot start is then met by the first worker, whose row says why."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise BadInput("torch is not installed in this environment", hint="run `make install`")
    values: dict[str, Any] = {}
    try:
        tree = ast.parse((Path(spec.origin).parent / "version.py").read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Constant):
                target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                if isinstance(target, ast.Name):
                    values[target.id] = node.value.value
    except (OSError, SyntaxError, ValueError):
        pass
    return {
        "torch": values.get("__version__"),
        "cuda_runtime": values.get("cuda"),
        "cuda_available": None,
        "devices": [],
    }


def resolve_device(requested: str, probe: dict[str, Any]) -> tuple[str, str | None]:
    """(device, GPU UUID) from auto|cpu|cuda|cuda:N; asking for a GPU that is not there is bad input."""
    devices = probe.get("devices", [])
    given = requested  # for messages: what the user typed
    if requested == "cpu":
        return "cpu", None
    if requested == "auto":
        if not devices:
            return "cpu", None
        requested = "cuda:0"
    if requested == "cuda":
        requested = "cuda:0"
    check_device_name(requested)
    if not devices:
        raise BadInput(f"--device {given}: torch sees no CUDA GPU on this machine", hint="use --device cpu or auto")
    index = int(requested[5:])
    if index >= len(devices):
        raise BadInput(f"--device {given}: this machine has {len(devices)} CUDA GPU(s)")
    return requested, devices[index].get("uuid")
