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
CEILING_TIMEOUT_S = 180.0
MAX_SCENARIO_SHAPES = 3  # the scenarios' own GEMM shapes timed beside the squares


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


def gemm_shapes(scenarios: Any) -> list[tuple[int, int, int]]:
    """The scenarios' first MLP GEMM (tokens x hidden x intermediate), up to MAX_SCENARIO_SHAPES
    distinct ones in matrix order; a model whose config has no hidden size adds none."""
    from ..families import read_config
    from ..families.resolve import resolve_model

    shapes: list[tuple[int, int, int]] = []
    for sc in scenarios:
        try:
            cfg = read_config(resolve_model(sc.model, "cuda"))  # called for GPU runs only
            hidden = int(cfg.get("hidden_size") or cfg.get("n_embd") or 0)
            inner = int(cfg.get("intermediate_size") or cfg.get("n_inner") or 4 * hidden)
        except Exception:  # a model the plan could not read here: its row says why
            continue
        tokens = int(sc.batch_size) * int(sc.seq_len or 0)
        if hidden and tokens and (tokens, hidden, inner) not in shapes:
            shapes.append((min(tokens, 65536), hidden, inner))
        if len(shapes) >= MAX_SCENARIO_SHAPES:
            break
    return shapes


def measure_ceiling(device: str, shapes: list[tuple[int, int, int]], scratch: Path) -> dict[str, Any]:
    """The matmul ceiling of `device` (bench/worker/ceiling.py), measured in a child; on failure
    {"reason": why}: a run without a ceiling still runs, its rows' mfu_ceiling empty."""
    from ..fsio import atomic_write_json

    spec, out = scratch / "ceiling-spec.json", scratch / "ceiling.json"
    atomic_write_json(spec, {"device": device, "shapes": [list(s) for s in shapes]})
    result = run_subprocess(
        [sys.executable, "-m", "bench.worker", "--ceiling", str(spec), str(out)],
        timeout_s=CEILING_TIMEOUT_S,
        log_path=scratch / "ceiling.log",
        env=worker_env(None),
    )
    if result.interrupted:
        raise KeyboardInterrupt
    if result.returncode != 0 or not out.is_file():
        why = "timed out" if result.timed_out else f"exit {result.returncode}"
        return {"reason": f"the ceiling probe failed ({why}): {tail(scratch / 'ceiling.log', 300).strip()}"}
    data: dict[str, Any] = read_json(out)
    return data


def earlier_ceiling(
    first: dict[str, Any] | None, now: dict[str, Any], shapes: list[tuple[int, int, int]]
) -> dict[str, Any] | None:
    """A `--resume`'s matmul ceiling from an earlier command of the same run (the first env.json,
    then its `resumes`, the latest first) when that command measured one on this very GPU (uuid),
    driver and torch, for the same shapes: the 10-20 s probe is not repeated for a number it
    already has. None when no earlier command qualifies (another machine, a failed probe)."""
    if not first:
        return None
    gpu = now.get("gpu") or {}
    torch = (now.get("packages") or {}).get("torch")
    mine = {"gpu_uuid": gpu.get("uuid"), "driver": gpu.get("driver"), "torch": torch}
    if not all(mine.values()):
        return None
    first_gpu = first.get("gpu") or {}
    commands = [
        {
            "created_at": first.get("created_at"),
            "gpu_uuid": first_gpu.get("uuid"),
            "driver": first_gpu.get("driver"),
            "torch": (first.get("packages") or {}).get("torch"),
            "matmul_ceiling": first.get("matmul_ceiling"),
        }
    ]
    for entry in first.get("resumes") or []:
        if isinstance(entry, dict):
            commands.append({**entry, "torch": (entry.get("packages") or {}).get("torch")})
    wanted = {"x".join(map(str, s)) for s in shapes}
    for command in reversed(commands):
        ceiling = command.get("matmul_ceiling")
        if not (isinstance(ceiling, dict) and ceiling_tflops(ceiling)) or "reused_from" in ceiling:
            continue
        same = all(command.get(k) == v for k, v in mine.items())
        if same and wanted <= set(ceiling.get("shapes") or []):
            return {**ceiling, "reused_from": command.get("created_at")}
    return None


def ceiling_tflops(ceiling: dict[str, Any] | None) -> dict[str, float]:
    """{format: TFLOP/s} of a measured ceiling (env.json's matmul_ceiling); {} without one."""
    formats = (ceiling or {}).get("formats") or {}
    return {k: float(v["tflops"]) for k, v in formats.items() if isinstance(v, dict) and v.get("tflops")}
