"""`gpubench fit` end to end: plan the searches (exit 2 before any work), then per scenario jump to
the memory model's predicted largest value and confirm it with short real runs through the run's
own runner (bench/run/runner.run_one), each probe a results row; DIR/fit.json after each scenario."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BadInput, ExitCode
from ..families.resolve import resolve_model
from ..fsio import atomic_write_json
from ..measure.nvml import open_nvml
from ..predict.measured import DEFAULT_CONTEXT_MB
from ..predict.predictions import parse_memory
from ..recipe.scenario import Scenario
from ..results import SCENARIOS_JSON, write_plan, write_results
from ..results.rowcheck import usable
from ..run import envinfo
from ..run.envinfo import gpu_in_use
from ..run.launcher import DEFAULT_LAUNCHER
from ..run.outdir import check_unused, locked, remove_folders
from ..run.plan import RunPlan, prepare
from ..run.proc import Interrupts
from ..run.request import DEFAULT_TIMEOUT_S, RunRequest
from ..run.runner import NullReporter, Reporter, run_launcher, run_one
from .capacity_summary import FitSummary, ProbeRecord, ScenarioFit, write_summary
from .dimensions import DIMENSIONS, Prediction, ProbeShape, predict_largest, value_range
from .search import FITS, OOM, search

MAX_PROBES = 64
MAX_PROBE_STEPS = 1000
STAND_IN = (
    "CPU stand-in: a probe is out of memory when the memory model's predicted peak of torch-allocated "
    "memory on a CUDA GPU is above the cap (bench/worker/memcap.py); no allocation failed"
)
CAPPED = "torch.cuda.set_per_process_memory_fraction: the caching allocator capped at the memory left after the context"
UNCAPPED = "the GPU's own memory (no cap)"


@dataclass(frozen=True)
class FitRequest:
    matrix: str | None = None
    model: str | None = None
    device: str = "auto"
    only: list[str] | None = None
    out: Path | None = None
    overrides: dict[str, Any] = field(default_factory=dict)  # seq_len, batch_size, engine: every scenario
    gpu_memory: str | None = None  # "24GB": the GPU to ask about
    dimension: str = "batch_size"
    probes: int = 3  # real runs per scenario at most
    probe_steps: int = 3  # timed optimizer steps per probe
    warmup_steps: int = 1
    most: int | None = None  # the largest value to search
    timeout_s: float = DEFAULT_TIMEOUT_S
    launcher: str = DEFAULT_LAUNCHER
    command: list[str] = field(default_factory=list)
    report: bool = True


@dataclass(frozen=True)
class FitOutcome:
    out: Path
    summary: FitSummary
    rows: list[dict[str, Any]]
    exit_code: ExitCode


def check_fit_request(request: FitRequest) -> float | None:
    """The flags alone, before anything is read or started; returns --gpu-memory in MB."""
    if request.dimension not in DIMENSIONS:
        raise BadInput(f"--dimension {request.dimension!r} is not one of {', '.join(DIMENSIONS)}")
    if request.dimension in request.overrides and request.overrides[request.dimension] is not None:
        flag = "--" + request.dimension.replace("_", "-")
        raise BadInput(f"{flag} sets the dimension the fit searches", hint=f"leave {flag} out, or search the other one")
    for flag, value, most in (
        ("--probes", request.probes, MAX_PROBES),
        ("--probe-steps", request.probe_steps, MAX_PROBE_STEPS),
        ("--max", request.most if request.most is not None else 1, 1 << 20),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
            raise BadInput(f"{flag} {value!r} must be a whole number from 1 to {most}")
    if request.device == "cpu" and request.gpu_memory is None:
        raise BadInput(
            "on the CPU, gpubench fit needs --gpu-memory", hint="nothing runs out of memory there: docs/fit.md"
        )
    return parse_memory(request.gpu_memory) if request.gpu_memory is not None else None


@dataclass(frozen=True)
class _Search:
    sc: Scenario
    model: str
    low: int
    high: int
    prediction: Prediction


def fit(
    request: FitRequest,
    reporter: Reporter | None = None,
    warn: Callable[[str], None] = lambda _m: None,
    info: Callable[[str], None] = lambda _m: None,
) -> FitOutcome:
    capacity = check_fit_request(request)
    run_request = RunRequest(
        matrix=request.matrix,
        model=request.model,
        device=request.device,
        only=request.only,
        out=request.out,
        timeout_s=request.timeout_s,
        overrides=request.overrides,
        command=request.command,
        launcher=request.launcher,
        report=request.report,
        ceiling=False,
    )
    with tempfile.TemporaryDirectory(prefix="gpubench-") as scratch:
        plan, probe = prepare(run_request, Path(scratch))
    for name, note in plan.notes.items():  # an --engine that left a scenario (bench/planner/matrix.py)
        info(f"scenario '{name}' {note}")
    try:
        gpu, procs = gpu_in_use(plan.gpu_uuid, probe, warn)
        summary, searches, shape = _plan_searches(request, plan, gpu, capacity)
    except BaseException:
        remove_folders(plan.made)  # refused before any work: no result directory is left
        raise
    with locked(plan.out):
        check_unused(plan.out)
        env = envinfo.collect(
            device=plan.device, probe=probe, gpu=gpu, gpu_processes=procs, command=request.command, matrix=plan.matrix
        )
        env["launcher"], env["fit"] = (
            plan.launcher,
            {"dimension": request.dimension, "memory_cap_mb": shape.memory_cap_mb},
        )
        write_plan(plan.out, plan.to_json(), env, resumed=False)
        try:
            return _run_searches(request, plan, gpu, summary, searches, shape, reporter or NullReporter(), warn, info)
        finally:
            shutil.rmtree(plan.shared_dir, ignore_errors=True)


def _plan_searches(
    request: FitRequest, plan: RunPlan, gpu: dict[str, Any] | None, capacity: float | None
) -> tuple[FitSummary, list[_Search], ProbeShape]:
    """Every check that needs the device: the memory to fit, each scenario's range and prediction."""
    cpu = plan.device == "cpu"
    if cpu and capacity is None:
        raise BadInput(
            "on the CPU, gpubench fit needs --gpu-memory", hint="nothing runs out of memory there: docs/fit.md"
        )
    total = float((gpu or {}).get("memory_total_mb") or 0) or None
    if capacity is not None and total is not None and capacity > total:
        raise BadInput(
            f"--gpu-memory {request.gpu_memory}: more than this GPU's {total:,.0f} MB", hint="ask about a smaller GPU"
        )
    context = 0.0 if cpu else DEFAULT_CONTEXT_MB  # the CPU has no CUDA context
    asked = capacity if capacity is not None else total
    cap = None if capacity is None else capacity - context
    if cap is not None and cap <= 0:
        raise BadInput(f"--gpu-memory {request.gpu_memory} leaves nothing after the CUDA context ({context:.0f} MB)")
    shape = ProbeShape(request.dimension, request.warmup_steps, request.probe_steps, cap)
    searches = []
    for sc in plan.scenarios:
        model = resolve_model(sc.model, plan.device)
        low, high = value_range(sc, model, shape, request.most)
        predicted = (
            predict_largest(sc, model, shape, cap if cap is not None else (asked or 0) - context, low, high)
            if asked is not None
            else Prediction(None, None, "not predicted: the GPU's memory is unknown")
        )
        if cpu and predicted.largest is None:
            raise BadInput(
                f"scenario '{sc.name}': the CPU's stand-in for a capped GPU needs the memory model's full "
                f"prediction ({predicted.note})",
                hint="on the CPU, fit a BERT or Llama model (docs/fit.md), or run the fit on a GPU",
            )
        searches.append(_Search(sc, model, low, high, predicted))
    summary = FitSummary(
        matrix=plan.matrix,
        device=plan.device,
        dimension=request.dimension,
        gpu_memory_mb=asked,
        context_mb=context,
        memory_cap_mb=cap,
        mechanism=STAND_IN if cpu else (CAPPED if cap is not None else UNCAPPED),
        memory_source="pred_peak_allocated_mb (the stand-in's figure)"
        if cpu
        else "peak_mem_mb (NVML per-process peak)",
        probe_budget=request.probes,
    )
    return summary, searches, shape


def _run_searches(
    request: FitRequest,
    plan: RunPlan,
    gpu: dict[str, Any] | None,
    summary: FitSummary,
    searches: list[_Search],
    shape: ProbeShape,
    reporter: Reporter,
    warn: Callable[[str], None],
    info: Callable[[str], None],
) -> FitOutcome:
    rows: list[dict[str, Any]] = []
    probed: list[Scenario] = []
    nvml, _ = open_nvml(plan.gpu_uuid)
    launcher = run_launcher(plan, warn, [s.sc for s in searches])
    ctrl_c = Interrupts()
    fits: list[ScenarioFit] = []
    interrupted = False
    reporter.start(total=len(searches) * request.probes, done=0)
    with ctrl_c:
        try:
            for s in searches:
                if interrupted:
                    break
                records: list[ProbeRecord] = []

                def probe(value: int, s: _Search = s, records: list[ProbeRecord] = records) -> str:
                    nonlocal interrupted
                    if ctrl_c.requested:
                        interrupted = True
                        return "interrupted"
                    sc = shape.scenario(s.sc, value)
                    reporter.scenario_start(sc, 0)
                    row = usable(run_one(plan, sc, 0, nvml, gpu["name"] if gpu else None, launcher, ctrl_c))
                    rows.append(row)
                    probed.append(sc)
                    write_results(plan.results_csv, rows)
                    reporter.scenario_end(row)
                    records.append(_record(row, value, plan.device))
                    interrupted = interrupted or row["status"] == "interrupted"
                    return str(row["status"])

                # the prediction (0: not even the smallest is predicted to fit), else the scenario's own value
                guess = s.prediction.largest if s.prediction.largest is not None else getattr(s.sc, shape.dimension)
                result = search(max(guess, s.low), probe, request.probes, s.low, s.high)
                fits.append(_scenario_fit(s, records, result))
                summary = dataclasses.replace(summary, scenarios=tuple(fits))
                write_summary(plan.out, summary)
                info(f"{s.sc.name}: {result.stopped}")
        except BaseException:
            launcher.close(kill=True)
            raise
        finally:
            launcher.close()
            reporter.finish()
            # scenarios.json: the probes that ran, so the directory replays as any run's
            ran = dataclasses.replace(plan, scenarios=tuple(probed) or plan.scenarios, repeats=1)
            atomic_write_json(plan.out / SCENARIOS_JSON, ran.to_json())
    stopped_badly = any(r["status"] not in (FITS, OOM, "skipped") for r in rows)  # error, crashed, timeout...
    code = ExitCode.INTERRUPTED if interrupted else (ExitCode.FAILED if stopped_badly else ExitCode.OK)
    return FitOutcome(plan.out, summary, rows, code)


def _record(row: dict[str, Any], value: int, device: str) -> ProbeRecord:
    memory = row.get("pred_peak_allocated_mb") if device == "cpu" else row.get("peak_mem_mb")
    speed = row.get("samples_per_s") if row["status"] == FITS else None
    return ProbeRecord(value, str(row["scenario"]), str(row["status"]), _float(speed), _float(memory))


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and value == value else None


def _scenario_fit(s: _Search, records: list[ProbeRecord], result: Any) -> ScenarioFit:
    return ScenarioFit(
        scenario=s.sc.name,
        model=s.model,
        predicted_largest=s.prediction.largest,
        predicted_peak_mb=s.prediction.peak_mb,
        prediction_note=s.prediction.note,
        low=s.low,
        high=s.high,
        probes=tuple(records),
        largest_ok=result.largest_ok,
        smallest_oom=result.smallest_oom,
        exact=result.exact,
        stopped=result.stopped,
    )
