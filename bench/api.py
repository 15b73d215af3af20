"""The library functions behind the commands: the CLI only parses their arguments and renders."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import envinfo, matrix as matrix_mod, plan as plan_mod, runner
from .errors import BadInput
from .measure.nvml import Nvml
from .plan import RunPlan, RunRequest


def _gpu(uuid: str | None) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The GPU's description and the processes already on it (NVML; no CUDA context here)."""
    if not uuid:
        return None, []
    nvml = Nvml(uuid)
    procs = [{"pid": pid, "used_mb": mb} for pid, mb in nvml.processes()]
    return nvml.describe(), procs


def run(
    request: RunRequest,
    reporter: runner.Reporter | None = None,
    warn: Callable[[str], None] = lambda _msg: None,
) -> tuple[RunPlan, runner.RunOutcome]:
    with tempfile.TemporaryDirectory(prefix="gpubench-") as scratch:
        plan, probe = plan_mod.prepare(request, Path(scratch))
    gpu, procs = _gpu(plan.gpu_uuid)
    if procs:
        listing = ", ".join(f"pid {p['pid']} ({p['used_mb'] or 0:.0f} MB)" for p in procs)
        if request.exclusive:
            raise BadInput(f"--exclusive: the GPU is in use by other processes: {listing}")
        warn(f"the GPU is in use by other processes ({listing}); figures will be disturbed")
    env = envinfo.collect(device=plan.device, probe=probe, gpu=gpu, gpu_processes=procs,
                          command=request.command, matrix=plan.matrix)
    plan_mod.save_plan(plan, env)
    outcome = runner.execute(plan, gpu["name"] if gpu else None, reporter)
    return plan, outcome


def list_scenarios(matrix: str, overrides: dict[str, Any]) -> list[dict[str, Any]]:
    """Each scenario of a matrix with what it changes versus the baseline (or the first scenario)."""
    m = matrix_mod.load_matrix(matrix)
    scenarios = matrix_mod.apply_overrides(m.scenarios, overrides)
    reference = next((s for s in scenarios if s.name == "baseline"), scenarios[0])
    return [
        {"scenario": s, "changes": matrix_mod.diff_from(s, reference), "reference": reference.name}
        for s in scenarios
    ]


def environment(device: str = "auto") -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="gpubench-") as scratch:
        probe = plan_mod.probe_torch(Path(scratch))
    resolved, uuid = plan_mod.resolve_device(device, probe)
    gpu, procs = _gpu(uuid)
    return envinfo.collect(device=resolved, probe=probe, gpu=gpu, gpu_processes=procs,
                           command=[], matrix="")
