"""`gpubench run` and `gpubench env` end to end: plan, environment, workers, report, history."""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import cpus
from ..errors import BadInput
from ..results import note_harness_time, note_launcher_fallback, read_env, write_plan
from . import envinfo, interconnect, lanes, shards
from .childenv import inductor_cache_dir
from .envinfo import gpu_in_use
from .launcher import Launcher
from .outcome import RunOutcome
from .outdir import check_unused, discard_unmeasured, entries, locked, remove_folders, remove_stale_temps
from .plan import RunPlan, prepare
from .probe import ceiling_tflops, earlier_ceiling, gemm_shapes, measure_ceiling, probe_torch, resolve_device
from .request import RunRequest, check_device_name
from .required import judge_required
from .runner import Reporter, execute, run_launcher


def run(
    request: RunRequest,
    reporter: Reporter | None = None,
    warn: Callable[[str], None] = lambda _msg: None,
    record_db: str | None = None,
    info: Callable[[str], None] = lambda _msg: None,
    mlflow: tuple[str, str] | None = None,
    write_report: Callable[[Path], object] | None = None,
) -> tuple[RunPlan, RunOutcome]:
    """Plan, measure and keep one run. `write_report(DIR)` is the command's report writer (bench.api
    hands in bench/report/html.py's): called under the lock when rows were measured and
    request.report, before the history record and the MLflow export, which carry the report."""
    started = time.monotonic()  # --time-limit counts from here, the probe included
    with tempfile.TemporaryDirectory(prefix="gpubench-") as scratch:
        plan, probe = prepare(request, Path(scratch))
    marks = {"planned": time.monotonic()}  # the parts of the time before the first row (harness_time)
    for name, note in plan.notes.items():  # an --engine that left a scenario: said before it runs
        info(f"scenario '{name}' {note}")
    made = () if plan.resume else plan.made  # a resumed run's folder is never taken away
    before = entries(plan.out)
    try:
        gpu, procs = gpu_in_use(plan.gpu_uuid, probe, warn)
        if procs:
            listing = ", ".join(f"pid {p['pid']} ({p['used_mb'] or 0:.0f} MB)" for p in procs)
            if request.exclusive:
                raise BadInput(f"--exclusive: the GPU is in use by other processes: {listing}")
            warn(f"the GPU is in use by other processes ({listing}); figures will be disturbed")
    except BaseException:
        remove_folders(made)  # refused or interrupted before the lock: nothing was written
        raise
    with locked(plan.out):  # until the run ends: a second run here is refused (outdir.py)
        try:
            plan, outcome = _measure(plan, request, probe, gpu, procs, (started, marks), reporter, warn)
        except KeyboardInterrupt:  # a Ctrl-C while planning, or a second one: before the first row?
            if not plan.resume:
                discard_unmeasured(plan.out, before, made)
            raise
        if outcome.interrupted and not outcome.rows and not plan.resume:  # nothing measured: nothing kept
            discarded = discard_unmeasured(plan.out, before, made)
            return plan, dataclasses.replace(outcome, discarded=discarded)
        if outcome.rows and request.report and write_report is not None:  # DIR/report.html, before the exports
            report_or_warn(write_report, plan.out, warn)
        if record_db is not None:  # --record: store the run in the history; a store failure only warns
            from ..history.library import record_after_run

            unfinished = outcome.interrupted or outcome.time_limited
            record_after_run(record_db, plan.out, unfinished=unfinished, warn=warn, info=info)
        if mlflow is not None:  # --mlflow URI: each scenario an MLflow run; a failure only warns
            from ..export.mlflow import export_after_run

            unfinished = outcome.interrupted or outcome.time_limited
            export_after_run(*mlflow, plan.out, unfinished=unfinished, warn=warn, info=info)
        return plan, outcome


def _measure(
    plan: RunPlan,
    request: RunRequest,
    probe: dict[str, Any],
    gpu: dict[str, Any] | None,
    procs: list[dict[str, Any]],
    clock: tuple[float, dict[str, float]],
    reporter: Reporter | None,
    warn: Callable[[str], None],
) -> tuple[RunPlan, RunOutcome]:
    """Under the lock: env.json and scenarios.json, then every scenario x repeat; the plan gains
    the measured matmul ceiling. `clock`: the command's start and the marks of its steps so far."""
    if plan.resume:
        remove_stale_temps(plan.out)
    else:
        check_unused(plan.out)
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
    marks = clock[1]  # the command's steps so far, for harness_time's before_rows
    marks["environment"] = time.monotonic()
    most = max((s.gpus for s in plan.scenarios if s.distributed and isinstance(s.gpus, int)), default=0)
    if most and plan.device != "cpu":
        env["multi_gpu"] = envinfo.multi_gpu(plan.gpu_uuids[:most], probe)
    # the fork server imports torch and transformers while the parent measures the ceiling or the
    # interconnect (after the CPU probe, envinfo.collect, which a busy import would disturb)
    ahead = run_launcher(plan, warn) if _parent_probes_gpu(plan, request) else None
    try:
        if ahead is not None:
            ahead.prestart()
        return _run_rows(plan, request, env, gpu, clock, reporter, warn, ahead)
    finally:
        if ahead is not None:
            ahead.close()  # execute closed it if it ran; else it ends here


def _parent_probes_gpu(plan: RunPlan, request: RunRequest) -> bool:
    """Whether the parent measures on the GPU before the first worker (the ceiling, the
    interconnect check): the time a fork server started ahead gains. Not with --lanes, whose lanes
    start their own."""
    if plan.lanes > 1 or plan.device == "cpu":
        return False
    return request.ceiling or bool(request.preflight and interconnect.world_sizes(plan.scenarios))


def _run_rows(
    plan: RunPlan,
    request: RunRequest,
    env: dict[str, Any],
    gpu: dict[str, Any] | None,
    clock: tuple[float, dict[str, float]],
    reporter: Reporter | None,
    warn: Callable[[str], None],
    launcher: Launcher | None,
) -> tuple[RunPlan, RunOutcome]:
    """The probes that use the GPU (interconnect, ceiling), scenarios.json, then the rows."""
    started, marks = clock
    env["cpu_affinity"] = cpus.format_list(plan.cpu_affinity) if plan.cpu_affinity else None
    env["inductor_cache"] = inductor_cache_dir(plan.inductor_cache)
    if interconnect.world_sizes(plan.scenarios):  # before the multi-process scenarios: bus GB/s per world size
        if request.preflight:
            with tempfile.TemporaryDirectory(prefix="gpubench-") as scratch:
                env["interconnect"] = interconnect.preflight(
                    plan.scenarios, plan.device, Path(scratch), plan.cpu_affinity
                )
        else:
            env["interconnect"] = {"reason": "--skip-preflight"}
    if plan.lanes > 1:
        env["lanes"] = {"lanes": plan.lanes, "dirs": "lanes/lane-K", "devices": "each lane's env.json"}
        env["matmul_ceiling"] = {"reason": "--lanes: each lane measures its own GPU's (lanes/lane-K/env.json)"}
    elif plan.device != "cpu" and request.ceiling:  # a GPU run: the matmul ceiling, before any worker
        marks["ceiling_from"] = time.monotonic()
        plan = with_matmul_ceiling(plan, env)
        marks["ceiling_to"] = time.monotonic()
    else:
        env["matmul_ceiling"] = {"reason": "a CPU run" if plan.device == "cpu" else "--no-ceiling"}
    write_plan(plan.out, plan.to_json(), env, resumed=plan.resume)
    deadline = None if request.time_limit_s is None else started + request.time_limit_s
    workers_from = time.time()
    rows_from = time.monotonic()
    outcome: RunOutcome | None = None
    try:
        if plan.lanes > 1:
            outcome = lanes.execute(plan, shards.child_flags(request), reporter, warn, deadline=deadline)
        else:
            outcome = execute(plan, gpu["name"] if gpu else None, reporter, warn, deadline=deadline, launcher=launcher)
    finally:
        # gigabytes of a preset's random weights: kept only for the --resume that a time limit asks
        # for (a QLoRA row's llama-1b took 77-86 s to build on the H200 host, each command again)
        if outcome is None or not outcome.time_limited:
            shutil.rmtree(plan.shared_dir, ignore_errors=True)
    rows_to = time.monotonic()
    outcome = judge_required(outcome, request.require)
    if outcome.launcher_fallback:  # env.json says how the workers really started
        note_launcher_fallback(plan.out, outcome.launcher_fallback)
    ended = time.monotonic()
    spans = {"before_rows_s": rows_from - started, "after_rows_s": ended - rows_to}
    spent = harness_time(outcome.rows, ended - started, workers_from, spans) | before_rows_parts(started, marks)
    note_harness_time(plan.out, spent, resumed=plan.resume)
    return plan, outcome


def with_matmul_ceiling(plan: RunPlan, env: dict[str, Any]) -> RunPlan:
    """The plan with its measured matmul ceiling (each row's MFU is against it), kept in env.json's
    `matmul_ceiling`."""
    env["matmul_ceiling"] = matmul_ceiling(plan, env)
    return dataclasses.replace(plan, ceiling_tflops=ceiling_tflops(env["matmul_ceiling"]))


def matmul_ceiling(plan: RunPlan, env: dict[str, Any]) -> dict[str, Any]:
    """The run's matmul ceiling (env.json `matmul_ceiling`): measured, or on a `--resume` on the
    GPU, driver and torch of an earlier command of the run, that command's (probe.earlier_ceiling)."""
    shapes = gemm_shapes(plan.scenarios)
    earlier = earlier_ceiling(read_env(plan.out), env, shapes) if plan.resume else None
    if earlier is not None:
        return earlier
    with tempfile.TemporaryDirectory(prefix="gpubench-") as scratch:
        return measure_ceiling(plan.device, shapes, Path(scratch))


def harness_time(
    rows: list[dict[str, Any]], wall_s: float, since: float, spans: dict[str, float] | None = None
) -> dict[str, Any]:
    """Where this invocation's wall time went (env.json `harness_time`): the training loops of the
    rows it ran (start of training to last step, warm-up included), their timed windows, and the
    rest, told apart where it was measured: `spans` (the parent's `before_rows_s`, from the start
    of the command to its first worker: the probes, the ceiling; `after_rows_s`, from its last
    worker's end, the fork servers closed and the shared weights removed, to here), the rows' own
    start (`rows_startup_s`: launch to first step) and end (`rows_teardown_s`: last step to result),
    and `between_rows_s`, what is left: the parent between workers, rows that trained nothing, the
    closing of the servers."""
    mine = [r for r in rows if _started(r) >= since - 1]  # --resume: not the rows an earlier run made
    trained = [r for r in mine if isinstance(r.get("train_loop_s"), int | float)]  # not a skipped row
    train = sum(float(r["train_loop_s"]) for r in trained)
    window = sum(float(r["window_s"]) for r in trained if isinstance(r.get("window_s"), int | float))
    spent: dict[str, Any] = {
        "wall_s": wall_s,
        "train_loop_s": train,
        "window_s": window,
        "training_share": train / wall_s if wall_s > 0 else None,
        "rows": len(trained),
    }
    timed = [r for r in trained if all(_number(r.get(k)) for k in ("startup_s", "overhead_s"))]
    if spans is None or len(timed) < len(trained):  # a trained row without its timing: the rest untold
        return spent
    startup = sum(float(r["startup_s"]) for r in timed)
    teardown = sum(float(r["overhead_s"]) - float(r["startup_s"]) for r in timed)
    told = train + startup + teardown + spans["before_rows_s"] + spans["after_rows_s"]
    wait = server_wait_s(timed)
    return (
        spent
        | spans
        | {
            "rows_startup_s": startup,
            "rows_teardown_s": teardown,
            "between_rows_s": max(0.0, wall_s - told),
        }
        | ({} if wait is None else {"rows_server_wait_s": wait})
    )


def before_rows_parts(started: float, marks: dict[str, float]) -> dict[str, Any]:
    """env.json `harness_time.before_rows`: the parts of the time before the first row, from the
    marks the command took: planning (the torch probe in a child, the scenarios), the environment
    (the GPU's other processes, the lock, envinfo.collect with its CPU probe) and, when measured,
    the matmul ceiling (which the fork server's imports overlap)."""
    parts: dict[str, float] = {}
    if "planned" in marks:
        parts["planning_s"] = marks["planned"] - started
        if "environment" in marks:
            parts["environment_s"] = marks["environment"] - marks["planned"]
    if "ceiling_from" in marks and "ceiling_to" in marks:
        parts["ceiling_s"] = marks["ceiling_to"] - marks["ceiling_from"]
    return {"before_rows": parts} if parts else {}


def server_wait_s(rows: list[dict[str, Any]]) -> float | None:
    """The seconds the rows waited for their fork server (startup_breakdown's `forked`: from the
    launch to the fork, the first row's wait for the server's imports above all); None when no row
    was forked."""
    waits = []
    for row in rows:
        raw = row.get("startup_breakdown")
        try:
            parts = json.loads(raw) if isinstance(raw, str) and raw else raw
        except ValueError:
            continue
        if isinstance(parts, dict) and _number(parts.get("forked")):
            waits.append(float(parts["forked"]))
    return sum(waits) if waits else None


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def _started(row: dict[str, Any]) -> float:
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(row.get("started_at"))).timestamp()
    except ValueError:
        return 0.0


def environment(device: str = "auto") -> dict[str, Any]:
    check_device_name(device)
    with tempfile.TemporaryDirectory(prefix="gpubench-") as scratch:
        probe = probe_torch(Path(scratch))
    resolved, uuid = resolve_device(device, probe)
    gpu, procs = gpu_in_use(uuid, probe)
    return envinfo.collect(device=resolved, probe=probe, gpu=gpu, gpu_processes=procs, command=[], matrix="")


def report_or_warn(write_report: Callable[[Path], object], out: Path, warn: Callable[[str], None]) -> None:
    """DIR/report.html: a failure only warns; the results and the exit code stand."""
    try:
        write_report(out)
    except Exception as exc:
        warn(f"could not write the HTML report in {out}: {exc}")
