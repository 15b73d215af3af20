"""The environment every child (probe, fork server, worker) starts with."""

from __future__ import annotations

import os
from pathlib import Path

from .. import cpus


def worker_env(
    visible_gpus: str | None, inductor_cache: Path | None = None, cpu_affinity: tuple[int, ...] | None = None
) -> dict[str, str]:
    """The child's environment: offline, unbuffered, and only the chosen GPUs visible
    (CUDA_VISIBLE_DEVICES: a UUID for one GPU, visible_devices() for several). With
    `inductor_cache`, torch.compile's caches live there (unless the user set TORCHINDUCTOR_CACHE_DIR),
    so a run's compile times do not depend on what earlier runs left in /tmp."""
    env = dict(os.environ)
    if inductor_cache is not None:
        env["TORCHINDUCTOR_CACHE_DIR"] = inductor_cache_dir(inductor_cache)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    env.update(
        {
            "PYTHONUNBUFFERED": "1",
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "HF_DATASETS_OFFLINE": "1",
            "TRANSFORMERS_VERBOSITY": "warning",
        }
    )
    if visible_gpus:
        env["CUDA_VISIBLE_DEVICES"] = visible_gpus
    env.pop(cpus.ENV_VAR, None)
    if cpu_affinity:
        env[cpus.ENV_VAR] = ",".join(map(str, cpu_affinity))
    return env


def visible_devices(indices: list[int]) -> str:
    """CUDA_VISIBLE_DEVICES for a multi-GPU worker: the chosen GPUs as the entries the parent itself
    sees (its own CUDA_VISIBLE_DEVICES, or the indices). Not UUIDs: DeepSpeed parses the variable
    as integers (seen with 0.19.8, ZeRO-1 and 2)."""
    given = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return ",".join(given[i] if given else str(i) for i in indices)


def inductor_cache_dir(run_cache: Path) -> str:
    """Where the workers' torch.compile caches go: the user's TORCHINDUCTOR_CACHE_DIR, else the run's."""
    return os.environ.get("TORCHINDUCTOR_CACHE_DIR") or str(run_cache.resolve())
