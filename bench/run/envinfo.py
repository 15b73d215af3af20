"""The environment of a run (env.json): GPU, driver, CUDA, package versions, host, command."""

from __future__ import annotations

import importlib.util
import platform
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from .. import __version__
from ..measure import cpuspeed
from ..measure.nvml import open_nvml
from ..results.columns import RESULTS_FORMAT

PACKAGES = (
    "torch",
    "transformers",
    "accelerate",
    "lightning-fabric",
    "bitsandbytes",
    "peft",
    "liger-kernel",
    "torchao",
    "deepspeed",
    "datasets",
    "nvidia-ml-py",
    "numpy",
    "pandas",
)


# the module gpubench imports for a package whose import name is not its name with "_" for "-"
IMPORT_NAMES = {"nvidia-ml-py": "pynvml"}


def package_versions() -> dict[str, str | None]:
    """Each package's version from its distribution's metadata; None when it is not installed. A
    module that imports without a distribution of the package's name (the Fabric rows of the H100
    sets ran on `lightning_fabric` while env.json said null) gets the version of the distribution
    that provides it ("2.6.0 (lightning)"), else of a `version.info` file in its folder (where
    Lightning's packages keep theirs), else "installed, version unknown". Nothing is imported."""
    out: dict[str, str | None] = {}
    providers: Mapping[str, list[str]] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
            continue
        except metadata.PackageNotFoundError:
            out[name] = None
        module = IMPORT_NAMES.get(name, name.replace("-", "_"))
        providers = providers or metadata.packages_distributions()
        for dist in providers.get(module, []):
            try:
                out[name] = f"{metadata.version(dist)} ({dist})"
                break
            except metadata.PackageNotFoundError:
                continue
        if out[name] is None:
            out[name] = module_version(module)
    return out


def module_version(module: str) -> str | None:
    """The version of a top-level module that no distribution names, without importing it: its
    folder's `version.info`, else "installed, version unknown"; None when it cannot be found."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    for folder in spec.submodule_search_locations or []:
        try:
            return (Path(folder) / "version.info").read_text(encoding="utf-8").split()[0] + " (version.info)"
        except (OSError, IndexError):
            continue
    return "installed, version unknown"


def git_info(cwd: Path) -> dict[str, str | bool | None]:
    """The checkout gpubench runs from: commit, branch, and whether tracked files differ from the
    commit (`dirty`), so a run made from an edited tree does not pass for the commit."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {
        "commit": git("rev-parse", "HEAD"),
        "branch": git("rev-parse", "--abbrev-ref", "HEAD"),
        "dirty": None if status is None else bool(status),
    }


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def collect(
    *,
    device: str,
    probe: dict[str, Any],
    gpu: dict[str, Any] | None,
    gpu_processes: list[dict[str, Any]],
    command: list[str],
    matrix: str,
    cpu_affinity: tuple[int, ...] | None = None,
) -> dict[str, Any]:
    """The environment; `cpu_speed` times the CPUs the workers may use (`cpu_affinity`, else all)."""
    import os

    return {
        "gpubench": __version__,
        "results_format": RESULTS_FORMAT,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(command),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "device": device,
        "gpu": gpu,
        "cuda_runtime": probe.get("cuda_runtime"),
        "torch_build": probe.get("torch"),
        "packages": package_versions(),
        "git": git_info(Path(__file__).resolve().parents[2]),
        "matrix": matrix,
        "gpu_processes_at_start": gpu_processes,
        "cpu_speed": cpuspeed.probe(cpu_affinity),  # before any worker: how steady the CPUs are (~1 s)
    }


def multi_gpu(uuids: tuple[str, ...], probe: dict[str, Any]) -> dict[str, Any]:
    """For a run with multi-GPU scenarios: each GPU it may use (by UUID), NCCL's version, and how the
    GPUs are linked (`nvidia-smi topo -m`; NVLink or PCIe sets what all-reduce costs)."""
    from ..measure.nvml import open_nvml

    gpus = []
    for uuid in uuids:
        handle, why = open_nvml(uuid)
        gpus.append(handle.describe() if handle is not None else {"uuid": uuid, "nvml": f"unavailable: {why}"})
    return {"gpus": gpus, "nccl": probe.get("nccl"), "topology": _topology()}


def _topology() -> str | None:
    import shutil
    import subprocess

    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        done = subprocess.run([smi, "topo", "-m"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def gpu_in_use(
    uuid: str | None, probe: dict[str, Any], warn: Callable[[str], None] = lambda _msg: None
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The GPU's description and the processes already on it (NVML; no CUDA context here).
    Without a working NVML, what torch reported, and a warning: memory then comes from torch."""
    if not uuid:
        return None, []
    nvml, why = open_nvml(uuid)
    if nvml is None:
        warn(f"NVML is not usable ({why}); peak memory will come from torch's allocator only")
        device: dict[str, Any] = next((d for d in probe.get("devices", []) if d.get("uuid") == uuid), {})
        return {
            "name": device.get("name"),
            "uuid": uuid,
            "driver": None,
            "capability": device.get("capability"),
            "memory_total_mb": device.get("total_memory_mb"),
            "nvml": f"unavailable: {why}",
        }, []
    procs = [{"pid": pid, "used_mb": mb} for pid, mb in nvml.processes()]
    return nvml.describe(), procs
