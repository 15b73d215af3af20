"""The library functions behind the commands: the CLI only parses their arguments and renders."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import cpus, envinfo, runner
from . import matrix as matrix_mod
from . import plan as plan_mod
from .errors import BadInput
from .measure.nvml import open_nvml
from .models import resolve_model
from .plan import RunPlan, RunRequest


def _gpu(
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


def run(
    request: RunRequest,
    reporter: runner.Reporter | None = None,
    warn: Callable[[str], None] = lambda _msg: None,
    record_db: str | None = None,
    info: Callable[[str], None] = lambda _msg: None,
) -> tuple[RunPlan, runner.RunOutcome]:
    started = time.monotonic()  # --time-limit counts from here, the probe included
    with tempfile.TemporaryDirectory(prefix="gpubench-") as scratch:
        plan, probe = plan_mod.prepare(request, Path(scratch))
    gpu, procs = _gpu(plan.gpu_uuid, probe, warn)
    if procs:
        listing = ", ".join(f"pid {p['pid']} ({p['used_mb'] or 0:.0f} MB)" for p in procs)
        if request.exclusive:
            raise BadInput(f"--exclusive: the GPU is in use by other processes: {listing}")
        warn(f"the GPU is in use by other processes ({listing}); figures will be disturbed")
    env = envinfo.collect(
        device=plan.device,
        probe=probe,
        gpu=gpu,
        gpu_processes=procs,
        command=request.command,
        matrix=plan.matrix,
        cpu_affinity=plan.cpu_affinity,
    )
    env["launcher"] = plan.launcher
    env["cpu_affinity"] = cpus.format_list(plan.cpu_affinity) if plan.cpu_affinity else None
    env["inductor_cache"] = plan_mod.inductor_cache_dir(plan.inductor_cache)
    plan_mod.save_plan(plan, env)
    deadline = None if request.time_limit_s is None else started + request.time_limit_s
    outcome = runner.execute(plan, gpu["name"] if gpu else None, reporter, warn, deadline=deadline)
    if outcome.launcher_fallback:  # env.json says how the workers really started
        plan_mod.note_launcher_fallback(plan, outcome.launcher_fallback)
    if outcome.rows:  # DIR/report.html: any failure is only a warning; results and exit code stand
        try:
            from .report_html import write_report

            write_report(plan.out)
        except Exception as exc:
            warn(f"could not write the HTML report in {plan.out}: {exc}")
    if record_db is not None:  # --record: store the run in the history; a store failure only warns
        from .history.api import record_after_run

        unfinished = outcome.interrupted or outcome.time_limited
        record_after_run(record_db, plan.out, unfinished=unfinished, warn=warn, info=info)
    return plan, outcome


def list_scenarios(matrix: str, overrides: dict[str, Any]) -> list[dict[str, Any]]:
    """Each scenario of a matrix with what it changes versus the baseline (or the first scenario)."""
    m = matrix_mod.load_matrix(matrix)
    scenarios = matrix_mod.apply_overrides(m.scenarios, overrides)
    for model in {s.model for s in scenarios}:
        resolve_model(model, "cpu")  # an unknown model name is an error here too
    reference = next((s for s in scenarios if s.name == "baseline"), scenarios[0])
    return [
        {"scenario": s, "changes": matrix_mod.diff_from(s, reference), "reference": reference.name} for s in scenarios
    ]


def environment(device: str = "auto") -> dict[str, Any]:
    plan_mod.check_device_name(device)
    with tempfile.TemporaryDirectory(prefix="gpubench-") as scratch:
        probe = plan_mod.probe_torch(Path(scratch))
    resolved, uuid = plan_mod.resolve_device(device, probe)
    gpu, procs = _gpu(uuid, probe)
    return envinfo.collect(device=resolved, probe=probe, gpu=gpu, gpu_processes=procs, command=[], matrix="")
