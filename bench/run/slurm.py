"""`gpubench run --launcher slurm`: a matrix as one Slurm job, from a login node.

The parent plans without a GPU (the matrix, the models, --out: bad input exits 2 before anything is
submitted), writes DIR/scenarios.json and one shard per scenario (DIR/slurm/steps/SCENARIO, per node
for a multi-node scenario), writes DIR/slurm/job-N.sbatch (bench/run/slurm_script.py), submits it,
then polls the job (squeue, sacct) until it ends or --wait-timeout passes, copying each step's rows
into DIR/results.csv as they come, in the plan's order. Ctrl-C cancels the job. Slurm's commands
are found on PATH before anything is written; a new run whose job sbatch refuses takes away what it
wrote, so the same command can be given again. `--resume DIR`
waits for the job still queued or running, if there is one, else submits the scenarios without
a final row of every repeat: a step cut off resumes its shard, so its finished repeats stay.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import BadInput, ExitCode
from ..fsio import atomic_write_json, atomic_write_text, read_json
from ..recipe.scenario import Scenario
from ..results import ENV_JSON, FAILED_STATUSES, RESULTS_CSV, SCENARIOS_JSON, read_env, read_plan, write_results
from . import shards, slurm_jobs
from .outcome import RunOutcome
from .outdir import check_unused, discard_unmeasured, entries, locked, missing_folders
from .plan import RunPlan, _scenarios
from .proc import Interrupts
from .request import RunRequest, check_request, check_writable
from .required import check_patterns
from .runner import NullReporter, Reporter
from .slurm_script import PLACEHOLDER_ENDPOINT, SlurmOptions, Step, render

JOBS_JSON = "jobs.json"
CANCEL_WAIT_S = 120.0  # for a cancelled job's steps to save their rows


def plan_request(request: RunRequest, options: SlurmOptions) -> RunRequest:
    """The request as the steps run it: --nnodes from the job's nodes; the rendezvous given per node."""
    check_request(request)
    over = dict(request.overrides)
    if request.lanes is not None:
        raise BadInput("--lanes with --launcher slurm", hint="a Slurm job runs its scenarios one step after another")
    if request.time_limit_s is not None:
        raise BadInput("--time-limit with --launcher slurm", hint="give the job's limit with --slurm-time")
    for flag, key in (("--node-rank", "node_rank"), ("--rdzv-endpoint", "rdzv_endpoint")):
        if over.get(key) is not None:
            raise BadInput(f"{flag} with --launcher slurm", hint="each node's step takes it from Slurm")
    if options.nodes > 1 and request.resume is None:
        over.update(nnodes=options.nodes, rdzv_endpoint=PLACEHOLDER_ENDPOINT)
    return replace(request, overrides=over)


def _new_plan(request: RunRequest) -> tuple[Path, dict[str, Any]]:
    models_device = "cpu" if request.device == "cpu" else "cuda:0"  # model "auto": the device's preset
    name, scenarios, model, parity, _ = _scenarios(request, models_device)
    check_patterns(request.require, [s.name for s in scenarios], f"matrix '{name}'")
    out = request.out or Path("results") / datetime.now().strftime("%Y-%m-%dT%H-%M-%S")
    check_unused(out)
    plan = {
        "matrix": name,
        "repeats": request.repeats,
        "device": request.device,
        "model": model,
        "timeout_s": request.timeout_s,
        "parity": {"reference": parity[0], "seeds": parity[1]},
        "scenarios": [s.settings() for s in scenarios],
    }
    return out, plan


def _resumed_plan(request: RunRequest) -> tuple[Path, dict[str, Any]]:
    out = request.resume
    assert out is not None
    given = [k for k, v in request.overrides.items() if v is not None]
    if request.matrix is not None or request.only is not None or request.model is not None or given:
        raise BadInput(
            f"--resume {out}: --matrix, --only, --model and the workload options would change the run",
            hint="resume without them: the run's own scenarios.json is used",
        )
    return out, read_plan(out)


def run_slurm(
    request: RunRequest,
    options: SlurmOptions,
    reporter: Reporter | None = None,
    info: Callable[[str], None] = lambda _m: None,
    emit_script: Callable[[str], None] = lambda _s: None,
) -> tuple[RunPlan, RunOutcome]:
    request = plan_request(request, options)
    if not options.dry_run:
        slurm_jobs.check_tools()
    out, plan_json = _resumed_plan(request) if request.resume else _new_plan(request)
    made, before = (missing_folders(out), entries(out)) if request.resume is None else ((), frozenset())
    check_writable(out, resume=request.resume is not None)
    out = out.resolve()
    try:
        scenarios = tuple(Scenario(**s, origin=str(out / SCENARIOS_JSON)) for s in plan_json["scenarios"])
    except (ValueError, KeyError, TypeError) as exc:
        raise BadInput(f"{out / SCENARIOS_JSON}: unreadable ({type(exc).__name__}: {exc})") from None
    plan = RunPlan(
        str(plan_json["matrix"]),
        scenarios,
        int(plan_json["repeats"]),
        str(plan_json["device"]),
        None,
        str(plan_json["model"]),
        out,
        float(plan_json["timeout_s"]),
        resume=request.resume is not None,
    )
    with locked(out):
        if request.resume is None:
            atomic_write_json(out / SCENARIOS_JSON, plan_json)
        try:
            outcome = _submit_and_wait(plan, plan_json, request, options, reporter or NullReporter(), info, emit_script)
        except slurm_jobs.SlurmError:
            if request.resume is None and not (out / "slurm" / JOBS_JSON).exists():
                _discard(out, before, made)  # nothing was submitted: the same command may be given again
            raise
    return plan, outcome


def _discard(out: Path, before: frozenset[str], made: tuple[Path, ...]) -> None:
    """A new run refused before its job was submitted: what it wrote goes (its scripts and shards too)."""
    if "slurm" not in before:
        shutil.rmtree(out / "slurm", ignore_errors=True)
    discard_unmeasured(out, before, made)


def step_dir(out: Path, sc: Scenario) -> Path:
    return out / "slurm" / "steps" / sc.name


def shard_of(out: Path, sc: Scenario) -> Path:
    """Where a scenario's rows come from: its step's shard (node 0's for a multi-node scenario)."""
    return step_dir(out, sc) / "node-0" if sc.nnodes > 1 else step_dir(out, sc)


def _shards(out: Path, sc: Scenario) -> list[Path]:
    return [step_dir(out, sc)] if sc.nnodes == 1 else [step_dir(out, sc) / f"node-{k}" for k in range(sc.nnodes)]


def _write_job(
    plan: RunPlan,
    plan_json: dict[str, Any],
    request: RunRequest,
    options: SlurmOptions,
    rows: list[dict[str, Any]],
    number: int,
) -> tuple[Path, str, int]:
    """The shards of the scenarios still to run (seeded once) and the job's script: (path, text, steps)."""
    done = {(r["scenario"], int(r["repeat"])) for r in rows}
    todo = [s for s in plan.scenarios if any((s.name, r) not in done for r in range(plan.repeats))]
    for sc in todo:
        for shard in _shards(plan.out, sc):
            if not (shard / SCENARIOS_JSON).is_file():  # else a step cut off: its shard resumes
                shards.seed(shard, plan_json, [sc.name], plan.device, rows)
    steps = [Step(sc.name, step_dir(plan.out, sc), sc.nnodes) for sc in todo]
    argv = [*shards.GPUBENCH, "run", *shards.child_flags(request)]
    text = render(options, f"gpubench-{plan.matrix}"[:64], steps, argv, plan.out / "slurm", Path.cwd())
    script = plan.out / "slurm" / f"job-{number}.sbatch"
    atomic_write_text(script, text)
    return script, text, len(steps)


def _submit_and_wait(
    plan: RunPlan,
    plan_json: dict[str, Any],
    request: RunRequest,
    options: SlurmOptions,
    reporter: Reporter,
    info: Callable[[str], None],
    emit_script: Callable[[str], None],
) -> RunOutcome:
    out, order = plan.out, [s.name for s in plan.scenarios]
    sources = [shard_of(out, s) for s in plan.scenarios]
    base = shards.final_rows(out, retry_failed=request.retry_failed) if plan.resume else []
    rows = shards.gather(base, sources, order)
    jobs_path = out / "slurm" / JOBS_JSON
    jobs: list[dict[str, Any]] = read_json(jobs_path) if jobs_path.is_file() else []
    if jobs and not options.dry_run and not slurm_jobs.ended(slurm_jobs.state(str(jobs[-1]["job_id"]))):
        job = str(jobs[-1]["job_id"])
        info(f"Slurm job {job} of this run is still queued or running: waiting for it")
    else:
        if len(rows) == len(plan.scenarios) * plan.repeats:
            return _outcome(plan, rows, interrupted=False, waited_out=False)
        script, text, steps = _write_job(plan, plan_json, request, options, rows, len(jobs) + 1)
        if options.dry_run:
            emit_script(text)
            info(f"wrote {script} ({steps} step(s)); submit it with: sbatch {script}")
            return RunOutcome(rows, ExitCode.OK, False)
        job = slurm_jobs.submit(script)
        jobs.append({"job_id": job, "script": script.name, "submitted_at": datetime.now(UTC).isoformat()})
        atomic_write_json(jobs_path, jobs)
        info(f"submitted Slurm job {job}: {steps} step(s); its log: {out / 'slurm' / f'job-{job}.log'}")
    interrupted, waited_out = _wait(job, options, plan, base, sources, order, rows, reporter, info)
    rows = shards.gather(base, sources, order, keep_interrupted=True)
    _collect(out, base, sources, order, rows, set(), NullReporter(), final=True)
    _note_env(out, sources, jobs, request.command)
    for sc, shard in zip(plan.scenarios, sources, strict=True):
        shards.copy_logs(shard, out, f"slurm-{sc.name}")
    if waited_out:
        info(
            f"Slurm job {job} is still running after --wait-timeout {options.wait_timeout_s:g} s; collect "
            f"its rows later with `gpubench run --launcher slurm --resume {out}`"
        )
    return _outcome(plan, rows, interrupted, waited_out)


def _wait(
    job: str,
    options: SlurmOptions,
    plan: RunPlan,
    base: list[dict[str, Any]],
    sources: list[Path],
    order: list[str],
    rows: list[dict[str, Any]],
    reporter: Reporter,
    info: Callable[[str], None],
) -> tuple[bool, bool]:
    """Poll the job until it ends, copying rows as they come; (interrupted, waited out)."""
    reporter.start(total=len(plan.scenarios) * plan.repeats, done=len(rows))
    seen = {(r["scenario"], int(r["repeat"])) for r in rows}
    deadline = time.monotonic() + options.wait_timeout_s
    ctrl_c = Interrupts()
    try:
        with ctrl_c:
            try:
                while True:
                    rows = _collect(plan.out, base, sources, order, rows, seen, reporter)
                    if slurm_jobs.ended(slurm_jobs.state(job)):
                        return False, False
                    if time.monotonic() > deadline:
                        return False, True
                    with ctrl_c.armed_while():
                        time.sleep(options.poll_s)
            except KeyboardInterrupt:
                info(f"interrupted: cancelling Slurm job {job}")
                slurm_jobs.cancel(job)
                end = time.monotonic() + CANCEL_WAIT_S
                while not slurm_jobs.ended(slurm_jobs.state(job)) and time.monotonic() < end:
                    time.sleep(1.0)
                return True, False
    finally:
        reporter.finish()


def _collect(
    out: Path,
    base: list[dict[str, Any]],
    sources: list[Path],
    order: list[str],
    rows: list[dict[str, Any]],
    seen: set[tuple[str, int]],
    reporter: Reporter,
    final: bool = False,
) -> list[dict[str, Any]]:
    now = rows if final else shards.gather(base, sources, order)
    new = [r for r in now if (r["scenario"], int(r["repeat"])) not in seen]
    for row in new:
        seen.add((row["scenario"], int(row["repeat"])))
        reporter.scenario_end(row)
    if (new or final) and now:
        write_results(out / RESULTS_CSV, now)
    return now


def _note_env(out: Path, sources: list[Path], jobs: list[dict[str, Any]], command: list[str]) -> None:
    """DIR/env.json: the first step's machine and software (a compute node's), with the jobs."""
    env = next((e for e in (read_env(s) for s in sources) if e is not None), None)
    if env is None:
        return
    env["command"] = command
    env.pop("harness_time", None)  # one step's, not the job's
    env["slurm"] = {"jobs": jobs, "steps": "slurm/steps/SCENARIO (node-K: per node)"}
    atomic_write_json(out / ENV_JSON, env)


def _outcome(plan: RunPlan, rows: list[dict[str, Any]], interrupted: bool, waited_out: bool) -> RunOutcome:
    missing = len(plan.scenarios) * plan.repeats - len([r for r in rows if r["status"] != "interrupted"])
    if waited_out:
        return RunOutcome(rows, ExitCode.TIME_LIMIT, False, time_limited=True)
    if interrupted or missing > 0:
        return RunOutcome(rows, ExitCode.INTERRUPTED, True)
    failed = any(r["status"] in FAILED_STATUSES for r in rows)
    return RunOutcome(rows, ExitCode.FAILED if failed else ExitCode.OK, False)
