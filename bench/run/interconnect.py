"""The interconnect check before a run's multi-process scenarios: once per world size on this
node, a short torchrun job times all_reduce, all_gather and reduce_scatter (bench/worker/
interconnect.py) and its rank 0 writes JSON; env.json keeps every world size's figures as
`interconnect`, {"2": {...}, "4": {...}}, beside the rows' scaling efficiency in the report. A check
that fails is a {"reason": ...} entry: the run goes on. Scenarios of several nodes are left out
(their other nodes join only at the scenario's own rendezvous). `--skip-preflight` turns it off.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from ..fsio import read_json
from ..recipe.scenario import Scenario
from . import torchrun
from .childenv import visible_devices, worker_env
from .proc import run_subprocess, tail

TIMEOUT_S = 120.0


def world_sizes(scenarios: tuple[Scenario, ...]) -> list[int]:
    """The process counts of this node's multi-process scenarios (2 or more, one node)."""
    return sorted({int(s.gpus) for s in scenarios if s.distributed and s.nnodes == 1 and int(s.gpus) >= 2})


def preflight(
    scenarios: tuple[Scenario, ...], device: str, scratch: Path, cpu_affinity: tuple[int, ...] | None = None
) -> dict[str, Any]:
    """{world size: figures or {"reason": why}} for every world size of `scenarios`."""
    return {str(n): measure(n, device, scratch, cpu_affinity) for n in world_sizes(scenarios)}


def measure(processes: int, device: str, scratch: Path, cpu_affinity: tuple[int, ...] | None = None) -> dict[str, Any]:
    """One world size's check: the GPUs from `device` on (NCCL), or gloo processes on the CPU."""
    out, log = scratch / f"interconnect-{processes}.json", scratch / f"interconnect-{processes}.log"
    with contextlib.suppress(FileNotFoundError):
        out.unlink()
    visible = None
    if device != "cpu":
        first = int(device.split(":")[1])
        visible = visible_devices(list(range(first, first + processes)))
    env = {**worker_env(visible, cpu_affinity=cpu_affinity), "OMP_NUM_THREADS": "1"}
    result = run_subprocess(
        torchrun.interconnect_command(processes, "cpu" if device == "cpu" else "cuda", out),
        timeout_s=TIMEOUT_S,
        log_path=log,
        env=env,
        grace_s=5.0,
    )
    if result.interrupted:
        raise KeyboardInterrupt
    if result.returncode != 0 or not out.is_file():
        why = "timed out" if result.timed_out else f"exit {result.returncode}"
        return {"reason": f"the interconnect check failed ({why}): {tail(log, 300).strip()}"}
    data: dict[str, Any] = read_json(out)
    return data
