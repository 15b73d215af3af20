"""The parent: runs each scenario x repeat in its own worker process, one at a time, and writes
results.csv atomically after every one. A failing worker becomes a row; the run goes on."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from .. import predict
from ..errors import BadInput, CannotWrite, ExitCode
from ..families.resolve import resolve_model
from ..fsio import atomic_write_json, read_json
from ..measure import gpuwatch, hostmem, mfu
from ..measure.nvml import MemoryPeaks, MemorySampler, Nvml, TreeSampler, open_nvml
from ..planner.rules import needs_cuda
from ..recipe.scenario import Scenario
from ..results import FAILED_STATUSES, FINAL_STATUSES, SETTING_COLUMNS, bound, read_results, write_results
from ..results.losscurve import write_curve
from ..results.parity import add_parity
from ..results.rowcheck import usable
from ..results.scaling import add_scaling
from . import command, torchrun
from .childenv import visible_devices, worker_env
from .launcher import Launcher, WorkerJob, open_launcher
from .outcome import RunOutcome
from .plan import RunPlan
from .proc import Interrupts, ProcResult, tail

COMMAND_MODEL = "command"  # model_resolved of a command scenario: the script builds its own


class Reporter(Protocol):
    # total None: not known ahead (recommend's race runs until it decides or its budget ends)
    def start(self, total: int | None, done: int, deadline: float | None = None) -> None: ...
    def scenario_start(self, sc: Scenario, repeat: int) -> None: ...
    def scenario_end(self, row: dict[str, Any]) -> None: ...
    def finish(self) -> None: ...


class NullReporter:
    def start(self, total: int | None, done: int, deadline: float | None = None) -> None: ...
    def scenario_start(self, sc: Scenario, repeat: int) -> None: ...
    def scenario_end(self, row: dict[str, Any]) -> None: ...
    def finish(self) -> None: ...


def over_limit(deadline: float | None, sc: Scenario, rows: list[dict[str, Any]], now: float) -> str:
    """Why the next worker should not start ("" when it should): the limit has passed, or an earlier
    repeat of this scenario in this run took longer than the time left. A scenario never run yet
    starts if any time is left (nothing is known about it)."""
    if deadline is None:
        return ""
    left = deadline - now
    if left <= 0:
        return f"the time limit had passed before {sc.name} could start"
    walls = [float(r["worker_wall_s"]) for r in rows if r["scenario"] == sc.name and _number(r.get("worker_wall_s"))]
    if walls and max(walls) > left:
        return f"{sc.name} was not started: {left:.0f} s were left and an earlier repeat of it took {max(walls):.0f} s"
    return ""


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not _isnan(value)


def execute(
    plan: RunPlan,
    gpu_name: str | None,
    reporter: Reporter | None = None,
    warn: Callable[[str], None] = lambda _m: None,
    deadline: float | None = None,
    launcher: Launcher | None = None,
) -> RunOutcome:
    """Every scenario x repeat not yet finished, interleaved; `deadline` (time.monotonic) is --time-limit.
    `launcher`: one the caller opened ahead (run_launcher, prestarted); execute closes it."""
    reporter = reporter or NullReporter()
    order = {s.name: i for i, s in enumerate(plan.scenarios)}
    rows = _finished_rows(plan) if plan.resume else []
    done = {(r["scenario"], int(r["repeat"])) for r in rows}
    todo = [(r, s) for r in range(plan.repeats) for s in plan.scenarios if (s.name, r) not in done]
    nvml, _ = open_nvml(plan.gpu_uuid)
    reporter.start(total=len(todo) + len(done), done=len(done), deadline=deadline)
    interrupted = time_limited = False
    limit_reason = ""
    ctrl_c = Interrupts()
    launcher = launcher or run_launcher(plan, warn, [sc for _, sc in todo])
    with ctrl_c:
        try:
            for repeat, sc in todo:
                if ctrl_c.requested:  # a Ctrl-C held while the last row was saved
                    interrupted = True
                    break
                limit_reason = over_limit(deadline, sc, rows, time.monotonic())
                if limit_reason:
                    time_limited = True
                    break
                reporter.scenario_start(sc, repeat)
                row = usable(run_one(plan, sc, repeat, nvml, gpu_name, launcher, ctrl_c))  # it must read back
                rows.append(row)
                add_scaling(rows)
                add_parity(rows, plan.parity_reference)
                rows.sort(key=lambda r: (order.get(r["scenario"], 1 << 30), int(r["repeat"])))
                write_results(plan.results_csv, rows)
                reporter.scenario_end(row)
                if row["status"] == "interrupted" or ctrl_c.requested:
                    interrupted = True
                    break
        except CannotWrite as exc:  # a full disk, a read-only folder: the rows saved so far stay
            raise CannotWrite(
                exc.message,
                hint=f"results.csv keeps every row saved before; make room, then finish the run with "
                f"`gpubench run --resume {plan.out}`",
            ) from exc
        except BaseException:  # a second Ctrl-C: the server and any worker of it go at once
            launcher.close(kill=True)
            raise
        finally:
            launcher.close()
            reporter.finish()
    fallback = launcher.fallback_reason
    if interrupted:
        return RunOutcome(rows, ExitCode.INTERRUPTED, True, fallback)
    if time_limited:
        return RunOutcome(rows, ExitCode.TIME_LIMIT, False, fallback, time_limited=True, limit_reason=limit_reason)
    failed = any(r["status"] in FAILED_STATUSES for r in rows)
    return RunOutcome(rows, ExitCode.FAILED if failed else ExitCode.OK, False, fallback)


def run_launcher(plan: RunPlan, warn: Callable[[str], None], scenarios: list[Scenario] | None = None) -> Launcher:
    """The launcher of this run's workers (not started): the fork server imports the engines of
    `scenarios` (default: every scenario of the plan), one more each set of CUDA_AT_IMPORT packages
    they use where they can run."""
    chosen = plan.scenarios if scenarios is None else scenarios
    return open_launcher(
        plan.launcher,
        worker_env(plan.gpu_uuid, plan.inductor_cache, plan.cpu_affinity),
        plan.out / "logs" / "forkserver.log",
        warn,
        engines=sorted({sc.engine for sc in chosen}),
        imports=sorted({worker_imports(plan, sc) for sc in chosen} - {()}),
    )


def worker_imports(plan: RunPlan, sc: Scenario) -> tuple[str, ...]:
    """The CUDA_AT_IMPORT packages the scenario's worker imports (none where it cannot run anyway)."""
    return () if plan.device == "cpu" and needs_cuda(sc) else sc.cuda_at_import


def _finished_rows(plan: RunPlan) -> list[dict[str, Any]]:
    if not plan.results_csv.is_file():
        return []
    frame = read_results(plan.results_csv)
    names = {s.name for s in plan.scenarios}
    kept = [s for s in FINAL_STATUSES if not (plan.retry_failed and s in FAILED_STATUSES)]
    keep = frame[frame["status"].isin(kept) & frame["scenario"].isin(names)]
    return [{k: (None if _isnan(v) else v) for k, v in row.items()} for row in keep.to_dict("records")]


def _isnan(value: Any) -> bool:
    return isinstance(value, float) and value != value


def run_one(
    plan: RunPlan,
    sc: Scenario,
    repeat: int,
    nvml: Nvml | None,
    gpu_name: str | None,
    launcher: Launcher,
    interrupts: Interrupts | None = None,
) -> dict[str, Any]:
    """One scenario x repeat in a fresh worker process; always returns a row."""
    if sc.name in plan.skips:  # it cannot run as it says here (plan.spread_skips): no worker, no work folder
        return _row(
            sc, repeat, resolve_model(sc.model, plan.device), plan.device, "skipped", plan.skips[sc.name], {}, None
        )
    workdir = plan.out / "work" / f"{sc.name}-r{repeat}"
    workdir.mkdir(parents=True, exist_ok=True)
    if sc.is_command:
        return _run_command(plan, sc, repeat, gpu_name, workdir, interrupts)
    spec_path, result_path = workdir / "spec.json", workdir / "result.json"
    result_path.unlink(missing_ok=True)
    model = resolve_model(sc.model, plan.device)
    device = "cpu" if plan.device == "cpu" else "cuda:0"  # CUDA_VISIBLE_DEVICES holds the chosen GPU
    launched_at = time.time()
    timeout_s = plan.timeout_for(sc)
    atomic_write_json(
        spec_path,
        {
            "scenario": sc.settings(),
            "device": device,
            "model": model,
            "repeat": repeat,
            "launched_at": launched_at,
            "timeout_s": timeout_s,
            "shared_dir": str(plan.shared_dir),
            "trace_path": str(plan.out / "logs" / f"{sc.name}-r{repeat}.trace.json"),  # with profile_steps
        },
    )
    log_path = plan.out / "logs" / f"{sc.name}-r{repeat}.log"
    if sc.distributed:
        job = WorkerJob(spec_path, result_path, timeout_s, log_path, interrupts=interrupts)
        return _run_distributed(plan, sc, repeat, model, gpu_name, job, launched_at)
    sampler = MemorySampler(nvml) if nvml and plan.sample_memory else None
    if sampler is not None:
        sampler.idle_mb = nvml.used_mb() if nvml else 0.0
    kills_before = hostmem.oom_kills()
    pid_path = workdir / "pid"  # the worker's pid, which is also its process group
    pid_path.unlink(missing_ok=True)

    def started(pid: int) -> None:
        pid_path.write_text(f"{pid}\n")
        if sampler is not None:
            sampler.start(pid)

    # peft and torchao are kept out of the fork server's imports: a scenario that can run here and
    # uses one is forked by the server that preloaded it, or starts afresh (launcher.py)
    job = WorkerJob(spec_path, result_path, timeout_s, log_path, started, interrupts, imports=worker_imports(plan, sc))
    proc = launcher.run(job)
    peaks = sampler.stop() if sampler else None
    status, error, figures = _outcome(proc, result_path, timeout_s, kills_before)
    row = _row(sc, repeat, model, plan.device, status, error, figures, peaks)
    _add_curve(row, plan.out, result_path)
    return _finish_row(row, sc, model, gpu_name, figures, launched_at, proc, log_path, plan.ceiling_tflops)


def _run_distributed(
    plan: RunPlan,
    sc: Scenario,
    repeat: int,
    model: str,
    gpu_name: str | None,
    job: WorkerJob,
    launched_at: float,
) -> dict[str, Any]:
    """A multi-process scenario: torchrun over this node's GPUs (or gloo processes on the CPU),
    memory sampled on each GPU, the rank files read when something failed."""
    uuids = plan.gpu_uuids[: sc.world_size // sc.nnodes] if plan.device != "cpu" else ()
    handles = [h for h in (open_nvml(u)[0] for u in uuids) if h is not None] if plan.sample_memory else []
    sampler = TreeSampler(handles) if handles and len(handles) == len(uuids) else None
    first = int(plan.device.split(":")[1]) if uuids else 0
    visible = visible_devices(list(range(first, first + len(uuids)))) if uuids else None
    proc = torchrun.launch(
        sc,
        job.spec,
        job.result,
        timeout_s=job.timeout_s,
        log_path=job.log_path,
        env=worker_env(visible, plan.inductor_cache, plan.cpu_affinity),
        on_start=sampler.start if sampler else None,
        interrupts=job.interrupts,
    )
    per_gpu = sampler.stop() if sampler else []
    status, error, figures = _outcome(proc, job.result, job.timeout_s, None)
    if status != "ok" and status != "skipped" and not proc.interrupted:
        told = torchrun.failure(job.result.parent, sc, proc, tail(job.log_path, 20000))
        if told is not None:
            status, error = told
            figures = {}
    row = _row(sc, repeat, model, plan.device, status, error, figures, _largest(per_gpu))
    _add_curve(row, plan.out, job.result)
    if per_gpu and status != "skipped":
        row["nvml_process_peak_sum_mb"] = sum(p.peak_mb for p in per_gpu)
        row["gpu_peaks_mb"] = ",".join(f"{p.peak_mb:.0f}" for p in per_gpu)
    return _finish_row(row, sc, model, gpu_name, figures, launched_at, proc, job.log_path, plan.ceiling_tflops)


def _run_command(
    plan: RunPlan, sc: Scenario, repeat: int, gpu_name: str | None, workdir: Path, interrupts: Interrupts | None
) -> dict[str, Any]:
    """The user's own command, timed by the step hook inside it (bench/run/command.py)."""
    log_path = plan.out / "logs" / f"{sc.name}-r{repeat}.log"
    timeout_s = plan.timeout_for(sc)
    kills_before = hostmem.oom_kills()
    proc, per_gpu, launched_at = command.launch(
        sc,
        workdir,
        log_path,
        device=plan.device,
        gpu_uuids=plan.gpu_uuids or ((plan.gpu_uuid,) if plan.gpu_uuid else ()),
        timeout_s=timeout_s,
        base_env=worker_env(None, plan.inductor_cache, plan.cpu_affinity),
        sample_memory=plan.sample_memory,
        interrupts=interrupts,
    )
    status, error, figures = command.outcome(proc, workdir, log_path, timeout_s, kills_before)
    row = _row(sc, repeat, COMMAND_MODEL, plan.device, status, error, figures, _largest(per_gpu))
    if len(per_gpu) > 1 and status != "skipped":
        row["nvml_process_peak_sum_mb"] = sum(p.peak_mb for p in per_gpu)
        row["gpu_peaks_mb"] = ",".join(f"{p.peak_mb:.0f}" for p in per_gpu)
    return _finish_row(row, sc, COMMAND_MODEL, gpu_name, figures, launched_at, proc, log_path, plan.ceiling_tflops)


def _add_curve(row: dict[str, Any], out: Path, result_path: Path) -> None:
    """The worker's loss curve into losses/NAME-rN.json, and its initial and final-window loss into the row."""
    if row["status"] not in ("ok", "diverged"):
        return
    try:
        data = read_json(result_path).get("loss_curve")
    except (OSError, ValueError, AttributeError):
        return
    if not isinstance(data, dict):
        return
    try:
        curve = write_curve(out, row["scenario"], int(row["repeat"]), data)
    except BadInput:  # a worker's malformed curve: the row stands without it
        return
    if curve is not None:
        row["initial_loss"], row["final_window_loss"] = curve.initial, curve.final_window


def _largest(per_gpu: list[MemoryPeaks]) -> MemoryPeaks | None:
    """The GPU whose peak was highest: what must fit on one GPU."""
    return max(per_gpu, key=lambda p: p.peak_mb) if per_gpu else None


def _finish_row(
    row: dict[str, Any],
    sc: Scenario,
    model: str,
    gpu_name: str | None,
    figures: dict[str, Any],
    launched_at: float,
    proc: ProcResult,
    log_path: Path,
    ceiling: dict[str, float] | None = None,
) -> dict[str, Any]:
    status = row["status"]
    tf32 = sc.tf32 or figures.get("fp32_matmul_precision") == "tf32"
    gpus = int(figures.get("world_size") or 1) if row.get("device") != "cpu" else 1
    if not sc.is_command:  # a command's model is the script's own: no FLOPs, no memory prediction
        row.update(
            mfu.figures(
                sc, model, figures.get("model_params"), row.get("samples_per_s"), gpu_name, tf32, gpus, figures, ceiling
            )
        )
        row.update(predict.predicted_columns(sc, model, figures))
    if status == "ok":
        row.update(gpuwatch.per_work(row))
        row.update(bound.columns(row))
    row["started_at"] = datetime.fromtimestamp(launched_at, UTC).isoformat(timespec="seconds")
    row["worker_wall_s"] = proc.wall_s
    if row.get("train_loop_s") is not None:
        row["overhead_s"] = proc.wall_s - row["train_loop_s"]
    row["exit_code"] = proc.returncode
    if status != "ok":
        row["stderr_tail"] = tail(log_path, 1500)
    return row


def _outcome(
    proc: Any, result_path: Path, timeout_s: float, kills_before: int | None
) -> tuple[str, str, dict[str, Any]]:
    result = _read_result(result_path)
    if proc.interrupted and not isinstance(result, tuple):  # a worker that had finished keeps its row
        why = "stopped by Ctrl-C (SIGINT), SIGTERM or SIGHUP; the worker and its children were killed"
        return "interrupted", why, {}
    if proc.timed_out:
        return "timeout", f"no result within the {timeout_s:g} s timeout; the worker and its children were killed", {}
    if isinstance(result, tuple):
        return result
    if result is not None:
        return "crashed", f"unreadable worker result: {result}", {}
    if proc.note:
        return "crashed", proc.note, {}
    code = proc.returncode
    if code is not None and code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        kills_after = hostmem.oom_kills()
        oom_killed = kills_before is not None and kills_after is not None and kills_after > kills_before
        if -code == signal.SIGKILL and oom_killed:
            return "oom", "killed by the kernel's OOM killer (host memory)", {}
        return "crashed", f"worker killed by signal {name} before writing a result", {}
    return "crashed", f"worker exited with code {code} without writing a result", {}


def _read_result(path: Path) -> tuple[str, str, dict[str, Any]] | str | None:
    """The worker's (status, reason, figures); a string saying why it is unreadable; None if absent."""
    if not path.is_file():
        return None
    try:
        result = read_json(path)
        status, reason, figures = result["status"], result.get("reason", ""), result.get("figures") or {}
    except (ValueError, KeyError, TypeError, AttributeError, OSError) as exc:
        return f"{type(exc).__name__}: {exc}"
    if status not in FINAL_STATUSES or not isinstance(figures, dict):
        return f"status {status!r}, figures of type {type(figures).__name__}"
    return str(status), str(reason), figures


def _row(
    sc: Scenario,
    repeat: int,
    model: str,
    device: str,
    status: str,
    error: str,
    figures: dict[str, Any],
    peaks: MemoryPeaks | None,
) -> dict[str, Any]:
    row: dict[str, Any] = {"scenario": sc.name, "repeat": repeat, "status": status, "error": error}
    # not name, inject_fault; a command's row only what applies to it (the script's own settings are
    # empty unless it reported them through the hook: in `figures`, bench/run/command.py)
    applies = command.ROW_SETTINGS if sc.is_command else SETTING_COLUMNS
    row.update({k: v for k, v in sc.settings().items() if k in SETTING_COLUMNS and k in applies})
    row["command"] = json.dumps(list(sc.command)) if sc.command else ""  # a list cell is JSON
    row.update({"model_resolved": model, "device": device})
    if not sc.is_command:
        # what the engines train with by default (bench/worker/schedule.py); the worker's figures say what they did
        row.update(
            {
                "effective_learning_rate": sc.effective_learning_rate,
                "effective_lr_schedule": sc.lr_schedule,
                "effective_lr_warmup_steps": sc.lr_warmup_steps,
            }
        )
    row.update(figures)
    if status == "skipped":
        return row
    if peaks is not None:
        row.update(
            {
                "nvml_process_peak_mb": peaks.process_peak_mb,
                "nvml_device_peak_mb": peaks.device_peak_mb,
                "nvml_idle_mb": peaks.idle_mb,
                "nvml_sample_hz": peaks.sample_hz,
                "peak_mem_mb": peaks.peak_mb,
                "peak_mem_source": peaks.source,
            }
        )
    elif device != "cpu" and figures.get("torch_max_reserved_mb") is not None:  # NVML sampling off
        row.update({"peak_mem_mb": figures["torch_max_reserved_mb"], "peak_mem_source": "torch-reserved"})
    elif figures.get("rss_peak_mb") is not None:
        row.update({"peak_mem_mb": figures["rss_peak_mb"], "peak_mem_source": "rss"})
    return row
