"""`gpubench recommend` end to end: the space (space.py), pruned before any work by the memory model
and the family's techniques, then raced (race.py) with short probes through the run's own runner
(bench/run/runner.run_one: each probe a results row, the candidate its scenario, the round its
repeat), then the finalists' loss judged against the plain recipe on a learnable task
(bench/results/parity.py), then the answer (answer.py) and its certificate, a matrix that
`gpubench run --matrix` reruns as is."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..checks import bounded
from ..errors import BadInput, ExitCode
from ..families import family_of, read_config, resolve_task
from ..families import origin as model_origin
from ..families.base import Family
from ..families.resolve import resolve_model
from ..fsio import atomic_write_text
from ..measure.nvml import open_nvml
from ..planner import datakinds
from ..predict.measured import DEFAULT_CONTEXT_MB
from ..predict.predictions import parse_memory
from ..recipe.scenario import Scenario
from ..results import read_env, write_plan, write_results
from ..results.parity import add_parity
from ..results.rowcheck import usable
from ..run import envinfo
from ..run.envinfo import gpu_in_use
from ..run.launcher import DEFAULT_LAUNCHER, Launcher
from ..run.outdir import check_unused, locked, remove_folders, remove_stale_temps
from ..run.plan import RunPlan, prepare
from ..run.probe import probe, resolve_device
from ..run.proc import Interrupts
from ..run.request import DEFAULT_TIMEOUT_S, RunRequest
from ..run.runner import NullReporter, Reporter, run_launcher, run_one
from ..run.session import with_matmul_ceiling
from .answer import Answer, CandidateResult, build_answer, certificate_toml, write_answer
from .budget import mean_wall, nothing_raced, overran
from .finalists import (
    PARITY_PREFIX,
    PARITY_SEEDS,
    judge_finalists,
    leaders_walls,
    pick_finalists,
    reference_checks,
    reference_seeds,
)
from .prune import MEMORY_MARGIN, predicted_peaks, prune_by_memory
from .race import BUDGET_SPENT, race
from .record import record
from .resume import SETTINGS_KEY, check_same_search, earlier_rows, earlier_sittings_s, search_settings
from .space import OBJECTIVES, PLAIN, Candidate, Space, build_space, plain_fields, valid_candidates
from .stages import StageReport, staged_race
from .twin import Twin, check_against, check_same_card, load_twin

DEFAULT_GLOBAL_BATCH = 32
DEFAULT_BUDGET_S = 900.0
NOISE_FLOOR = 0.01  # the least relative noise assumed between probes (docs/recommend.md)
OPTIONAL = ("bitsandbytes", "liger_kernel", "torchao")


@dataclass(frozen=True)
class RecommendRequest:
    model: str | None = None
    gpu_memory: str | None = None  # "24GB": the GPU to recommend for (capped on a GPU; stood in for on the CPU)
    device: str = "auto"
    out: Path | None = None
    objective: str = "speed"
    budget_s: float = DEFAULT_BUDGET_S
    data: str | None = None  # what the finalists' loss is judged on; default: the task's learnable kind
    allow: tuple[str, ...] = ()
    seq_len: int | None = None
    global_batch: int = DEFAULT_GLOBAL_BATCH
    engine: str | None = None
    probe_steps: int = 3
    warmup_steps: int = 1
    parity_steps: int = 24
    finalists: int = 2
    exhaustive: bool = False
    exhaustive_rounds: int = 3
    axes: tuple[str, ...] | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    command: list[str] = field(default_factory=list)
    resume: bool = False  # finish the search in --out (bench/recommend/resume.py)
    record: str | None = None  # a history store: the winner and the plain recipe recorded there
    twin: Path | None = None  # a finished --exhaustive of the same search: the answer judged against it


@dataclass(frozen=True)
class RecommendOutcome:
    out: Path
    answer: Answer
    rows: list[dict[str, Any]]
    exit_code: ExitCode


def check_request(request: RecommendRequest) -> float | None:
    """The flags alone, before anything is read or started; returns --gpu-memory in MB."""
    if request.objective not in OBJECTIVES:
        raise BadInput(f"--objective {request.objective!r} is not one of {', '.join(OBJECTIVES)}")
    if not 0 < request.budget_s <= 7 * 24 * 3600:
        raise BadInput(f"--budget {request.budget_s:g} s must lie above 0 and within a week")
    for flag, value, most in (
        ("--global-batch", request.global_batch, 1 << 16),
        ("--probe-steps", request.probe_steps, 1000),
        ("--parity-steps", request.parity_steps, 100_000),
        ("--finalists", request.finalists, 16),
    ):
        bounded(value, flag, 1, most, whole=True)
    if request.resume and request.out is None:
        raise BadInput("--resume needs --out DIR: the result directory of the search to finish")
    if request.twin is not None and request.exhaustive:
        raise BadInput("--twin with --exhaustive: the twin is the exhaustive search", hint="drop one of them")
    return parse_memory(request.gpu_memory) if request.gpu_memory is not None else None


def installed() -> frozenset[str]:
    import importlib.util

    return frozenset(name for name in OPTIONAL if importlib.util.find_spec(name) is not None)


def recommend(
    request: RecommendRequest,
    reporter: Reporter | None = None,
    warn: Callable[[str], None] = lambda _m: None,
    info: Callable[[str], None] = lambda _m: None,
) -> RecommendOutcome:
    capacity = check_request(request)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpubench-") as scratch_dir:
        scratch = Path(scratch_dir)
        device, _ = resolve_device(request.device, probe(request.device, scratch))
        cuda = device != "cpu"
        if not cuda and capacity is None:
            raise BadInput("on the CPU, gpubench recommend needs --gpu-memory", hint="nothing runs out of memory there")
        if request.objective == "energy" and not cuda:
            raise BadInput("--objective energy on the CPU: no energy counter there", hint="use --objective speed")
        q = question(request, device, installed())
        model, family, task, proxy, space = q.model, q.family, q.task, q.proxy, q.space
        every, candidates, invalid, plain, settings = q.every, q.candidates, q.invalid, q.plain, q.settings
        matrix = scratch / "candidates.toml"
        atomic_write_text(matrix, q.matrix_text)
        if request.resume:
            assert request.out is not None
            check_same_search(request.out, settings)
        twin = load_twin(request.twin, settings) if request.twin is not None else None
        run_request = RunRequest(
            matrix=str(matrix), device=request.device, out=None if request.resume else request.out,
            resume=request.out if request.resume else None, timeout_s=request.timeout_s,
            command=request.command, launcher=DEFAULT_LAUNCHER, report=False, ceiling=False,
        )  # fmt: skip
        plan, seen = prepare(run_request, scratch)  # every candidate validated: a refusal is exit 2 here
    try:
        gpu, procs = gpu_in_use(plan.gpu_uuid, seen, warn)
        if twin is not None:
            check_same_card(twin, gpu)
        total = float((gpu or {}).get("memory_total_mb") or 0) or None
        if capacity is not None and total is not None and capacity > total:
            raise BadInput(f"--gpu-memory {request.gpu_memory}: more than this GPU's {total:,.0f} MB")
        asked = capacity if capacity is not None else total
        context = DEFAULT_CONTEXT_MB if cuda else 0.0
        cap = None if asked is None else asked - context
        if cap is not None and cap <= 0:
            raise BadInput(f"--gpu-memory {request.gpu_memory} leaves nothing after the CUDA context")
    except BaseException:
        remove_folders(plan.made)
        raise
    by_name = {s.name: s for s in plan.scenarios}
    # the CPU stands in for a capped GPU through the memory model's activations (bench/worker/memcap.py):
    # a family without them is probed uncapped there, pruned by its lower bound alone (said in the answer)
    stand_in = cuda or family.activations
    probe_cap = cap if stand_in else None
    if not stand_in and cap is not None:
        why = (
            f"the memory model has no activations for the {family.name} family, so on the CPU no probe stands in "
            f"for an out-of-memory at {cap:,.0f} MB: candidates pruned by their lower bound alone, probes uncapped"
        )
        space = space.noted("memory", why)
    elif not family.activations and cap is not None:  # on a GPU: capped probes, pruned by the lower bound
        why = (
            f"the memory model has no activations for the {family.name} family: its peaks are lower bounds "
            "(pred MB >=), a candidate is pruned only when its bound exceeds the cap, and probes under the cap decide"
        )
        space = space.noted("memory", why)
    probes = {c.name: _probe(by_name[c.name], request, probe_cap) for c in [plain, *candidates]}
    peaks = predicted_peaks(probes, model)
    pruned = {**invalid, **(prune_by_memory(peaks, cap) if cap is not None else {})}
    lean = {name: mb for name, (mb, with_activations) in peaks.items() if with_activations}
    sure = {name for name, mb in lean.items() if cap is None or mb * (1 + MEMORY_MARGIN) <= cap}
    with locked(plan.out):
        if plan.resume:
            remove_stale_temps(plan.out)
        else:
            check_unused(plan.out)
        env = envinfo.collect(
            device=plan.device, probe=seen, gpu=gpu, gpu_processes=procs, command=request.command, matrix=plan.matrix
        )
        env["launcher"] = plan.launcher
        env["recommend"] = {
            "objective": request.objective, "gpu_memory_mb": asked, "memory_cap_mb": cap, "proxy_data": proxy,
            "global_batch": request.global_batch, "exhaustive": request.exhaustive, SETTINGS_KEY: settings,
        }  # fmt: skip
        # every fork server now, after the CPU probe (envinfo.collect, which a busy import would disturb):
        # their imports (torch, transformers; bitsandbytes, torchao or peft in their own) overlap the
        # ceiling and the plain recipe's checks, not the race's budget (on an H100 the first 8-bit
        # AdamW probe waited 14.3-15.2 s for its server's)
        launcher = run_launcher(plan, warn)
        try:
            launcher.prestart()
            if cuda:  # each candidate's MFU against the measured ceiling, as a run's rows have it (10-20 s)
                plan = with_matmul_ceiling(plan, env)
            else:
                env["matmul_ceiling"] = {"reason": "a CPU run"}
            write_plan(plan.out, plan.to_json(), env, resumed=plan.resume)
            return _run(
                request, plan, gpu, model, task, proxy, space, plain, every, probes, pruned, (lean, sure),
                probe_cap, started, reporter or NullReporter(), info, warn, launcher, twin,
            )  # fmt: skip
        except BaseException:
            launcher.close(kill=True)
            raise
        finally:
            launcher.close()  # the servers end with the search; on an exception, killed above
            shutil.rmtree(plan.shared_dir, ignore_errors=True)


@dataclass(frozen=True)
class Question:
    """What a search asks, from its flags, the device and the packages installed, before any work:
    its candidates as a matrix, and the settings a --resume or a --twin must share (with the
    candidates' matrix, by its hash)."""

    model: str
    family: Family
    task: str
    proxy: str
    space: Space
    every: list[Candidate]
    candidates: list[Candidate]
    invalid: dict[str, str]
    plain: Candidate
    matrix_text: str
    settings: dict[str, Any]


def question(request: RecommendRequest, device: str, packages: frozenset[str]) -> Question:
    """The search's question on `device` with `packages` installed (installed(); a test names them to
    check a published twin is still the question its command asks)."""
    cuda = device != "cpu"
    model = resolve_model(request.model or "auto", device)
    family = family_of(model)
    task = resolve_task("auto", read_config(model), family, model_origin(model))
    proxy = request.data or _learnable(task)
    space = build_space(
        family, cuda=cuda, global_batch=request.global_batch, allow=request.allow, installed=packages,
        axes=request.axes,
    )  # fmt: skip
    base = _base(request, model if request.model is None else request.model)
    every = space.candidates()
    candidates, invalid = valid_candidates(every, model, {k: v for k, v in base.items() if k != "model"})
    plain = Candidate(PLAIN, plain_fields(cuda, request.global_batch), {})
    text = matrix_text(base, [plain, *candidates], proxy)
    return Question(
        model, family, task, proxy, space, every, candidates, invalid, plain, text, search_settings(request, text)
    )


def _learnable(task: str) -> str:
    for kind in datakinds.KINDS.values():
        if kind.learnable and kind.serves(task):
            return kind.name
    raise BadInput(f"no learnable data kind serves {task}", hint="give --data with the user's own data")


def _base(request: RecommendRequest, model: str) -> dict[str, Any]:
    base: dict[str, Any] = {"model": model, "samples": 64, "warmup_steps": 1}
    if request.seq_len is not None:
        base["seq_len"] = request.seq_len
    if request.engine is not None:
        base["engine"] = request.engine
    return base


def matrix_text(base: dict[str, Any], candidates: list[Candidate], proxy: str) -> str:
    """The candidates as a matrix: one scenario each, and the parity scenarios (learnable data)."""
    from .answer import toml_table

    lines = ["[matrix]", 'description = "gpubench recommend: the candidates"']
    lines += [f'parity_reference = "{PARITY_PREFIX}{PLAIN}"', f"parity_seeds = {PARITY_SEEDS}", "", "[base]"]
    lines += toml_table(base)  # the reference's seeds are scenarios of the plan: a --resume finds their rows
    for c in candidates:
        lines += ["", f'[scenarios."{c.name}"]', *toml_table(dict(c.fields))]
        lines += ["", f'[scenarios."{PARITY_PREFIX}{c.name}"]', *toml_table({**c.fields, "data": proxy})]
    return "\n".join(lines) + "\n"


def _probe(sc: Scenario, request: RecommendRequest, cap: float | None) -> Scenario:
    steps = request.warmup_steps + request.probe_steps
    return sc.replace(
        samples=sc.batch_size * sc.grad_accum_steps * steps,
        warmup_steps=request.warmup_steps,
        window=request.probe_steps,
        profile_steps=0,
        memory_cap_mb=cap,
    )


def _figure(objective: str) -> Callable[[Mapping[str, Any]], float | str]:
    return lambda row: objective_value(dict(row), objective)


def objective_value(row: dict[str, Any], objective: str) -> float | str:
    """A probe row's figure on the objective (higher is better), or its status when it has none."""
    if row.get("status") != "ok":
        return str(row.get("status") or "error")
    if objective == "energy":
        joules = row.get("energy_per_sample_j")
        return (
            1.0 / float(joules) if isinstance(joules, int | float) and joules == joules and joules > 0 else "no energy"
        )
    value = row.get("samples_per_s")  # speed; cost: one GPU at an hourly price ranks as speed does
    return float(value) if isinstance(value, int | float) and value == value and value > 0 else "no figure"


def _plain_probes(
    answer: Answer, probe_rows: dict[tuple[str, int], dict[str, Any]], measure: Callable[[str, int], float | str]
) -> list[dict[str, Any]]:
    """--record: the winner's probe rows, and the plain recipe probed as many times (what the history stores)."""
    if answer.winner is None:
        return []
    won = [r for (name, _), r in sorted(probe_rows.items()) if name == answer.winner]
    for rnd in range(len(won)):
        measure(PLAIN, rnd)
    return [*won, *(r for (name, _), r in sorted(probe_rows.items()) if name == PLAIN)]


def _certificate_base(request: RecommendRequest, model: str, probe: Scenario) -> dict[str, Any]:
    """The certificate's [base]: the probes' own settings, so that its rerun adds to the series --record stored."""
    base = {k: v for k, v in _base(request, request.model or model).items() if k not in ("samples", "warmup_steps")}
    fields = ("samples", "warmup_steps", "window", "memory_cap_mb")
    return {**base, **{k: getattr(probe, k) for k in fields if getattr(probe, k) is not None}}


def _run(
    request: RecommendRequest, plan: RunPlan, gpu: dict[str, Any] | None, model: str, task: str, proxy: str,
    space: Any, plain: Candidate, candidates: list[Candidate], probes: dict[str, Scenario], pruned: dict[str, str],
    peaks: tuple[dict[str, float], set[str]], cap: float | None, started: float, reporter: Reporter,
    info: Callable[[str], None],
    warn: Callable[[str], None],
    launcher: Launcher,
    twin: Twin | None = None,
) -> RecommendOutcome:  # fmt: skip
    earlier = earlier_rows(plan.out) if plan.resume else {}
    rows: list[dict[str, Any]] = list(earlier.values())  # a resumed search's rows stay, measured once
    nvml, _ = open_nvml(plan.gpu_uuid)
    racing = [c.name for c in candidates if c.name not in pruned]
    ctrl_c = Interrupts()
    probe_rows: dict[tuple[str, int], dict[str, Any]] = {}
    parity_rows: list[dict[str, Any]] = []
    interrupted = False
    # the workers to expect: an exhaustive search's every round and loss check; a race's are not known
    # ahead (it runs until it decides or its budget ends), so its progress counts them without a total
    checks = len(reference_seeds(plan)) + min(request.finalists, len(racing))
    reporter.start(
        total=len(racing) * request.exhaustive_rounds + checks if request.exhaustive else None,
        done=0,
        deadline=started + request.budget_s,  # the search ends by its budget (and one probe)
    )

    def one(sc: Scenario, repeat: int) -> dict[str, Any]:
        nonlocal interrupted
        if (sc.name, repeat) in earlier:  # --resume: measured in an earlier sitting
            return earlier[(sc.name, repeat)]
        reporter.scenario_start(sc, repeat)
        row = usable(run_one(plan, sc, repeat, nvml, gpu["name"] if gpu else None, launcher, ctrl_c))
        rows.append(row)
        write_results(plan.results_csv, rows)
        reporter.scenario_end(row)
        interrupted = interrupted or row["status"] == "interrupted" or ctrl_c.requested
        return row

    def measure(name: str, rnd: int) -> float | str:
        if interrupted:
            return "interrupted"
        row = one(probes[name], rnd)
        probe_rows[(name, rnd)] = row
        return objective_value(row, request.objective)

    lean, sure = peaks
    stages: tuple[StageReport, ...] = ()
    with ctrl_c:
        try:
            # the plain recipe's loss checks first: they do not depend on the race, and what they cost
            # tells what the finalists' checks will, which the race keeps out of its budget
            reference_rows = reference_checks(plan, request, one, lambda: interrupted)
            check_s = mean_wall(reference_rows)

            def reserve() -> float:  # the finalists' checks: the leaders' probe time or a plain check, the longer
                return sum(
                    max(check_s, wall)
                    for wall in leaders_walls(probe_rows, request.finalists, _figure(request.objective))
                )

            if request.exhaustive:  # no elimination; --budget ends this sitting, --resume the next
                standing = race(
                    racing, measure, alpha=0.0, min_rounds=10**6, max_rounds=request.exhaustive_rounds,
                    spent=lambda: time.monotonic() - started > request.budget_s,
                )  # fmt: skip
            elif not interrupted:
                left = request.budget_s - (time.monotonic() - started)
                standing, stages = staged_race(
                    candidates, pruned, measure, budget_s=left, floor=NOISE_FLOOR, lean=lean, sure=sure,
                    reserve=reserve,
                )  # fmt: skip
            else:
                standing = race([], measure)
            info(f"race: {standing.rounds} rounds, {standing.stopped}")
            if not request.exhaustive and not interrupted and not probe_rows:
                space = space.noted("budget", nothing_raced(request.budget_s, reference_rows, reserve(), stages))
            race_end_s = time.monotonic() - started
            order = sorted((e for e in standing.entries.values() if e.values and not e.out), key=lambda e: -e.mean_log)
            finalists = pick_finalists([e.name for e in order], {c.name: c for c in candidates}, request.finalists)
            unfinished = request.exhaustive and standing.stopped == BUDGET_SPENT
            if unfinished:  # judged once every candidate is measured, in the sitting that finishes it
                finalists = []
                info(
                    f"the exhaustive search is unfinished: the same command with --out {plan.out} --resume finishes it"
                )
            if finalists and not interrupted:
                parity_rows = [
                    *reference_rows,
                    *judge_finalists(plan, request, cap, finalists, one, lambda: interrupted),
                ]
                add_parity(parity_rows, f"{PARITY_PREFIX}{PLAIN}")
                write_results(plan.results_csv, rows)
            judged = bool(finalists) and not interrupted
            checks_s = time.monotonic() - started - race_end_s if judged else 0.0  # the finalists' loss checks
            results = [
                CandidateResult.of(c, standing.entries.get(c.name), pruned.get(c.name), probe_rows, parity_rows)
                for c in candidates
            ]
            wall_s = time.monotonic() - started
            compiled = any(c.fields.get("compile") for c in candidates if c.name in finalists)
            late = None if interrupted else overran(request.budget_s, wall_s, race_end_s, checks_s, compiled)
            space = space.noted("budget", late) if late else space
            answer = build_answer(
                request.objective, results, space.notes, standing.stopped, proxy, task, plan.device,
                cap, MEMORY_MARGIN, wall_s, stages,
                earlier_sittings_s(read_env(plan.out) or {}, earlier.values()) if plan.resume else (),
            )  # fmt: skip
            if twin is not None and not interrupted:
                answer = replace(
                    answer, twin=check_against(answer, twin, _figure(request.objective), request.objective)
                )
            recorded = _plain_probes(answer, probe_rows, measure) if request.record and not interrupted else []
            recorded = [] if interrupted else recorded  # a cut-off plain probe: nothing half recorded
        finally:
            reporter.finish()
    write_answer(plan.out, answer)
    atomic_write_text(
        plan.out / "recommended.toml", certificate_toml(answer, _certificate_base(request, model, probes[PLAIN]), plain)
    )
    if request.record is not None:
        if recorded:
            record(request.record, plan.out, recorded, warn, info)
        elif interrupted:
            warn(f"interrupted, so nothing is recorded in the history: finish with --out {plan.out} --resume --record")
        else:
            warn("no recipe recommended, so nothing is recorded in the history")
    if interrupted:
        code = ExitCode.INTERRUPTED
    elif unfinished:
        code = ExitCode.TIME_LIMIT
    else:
        code = ExitCode.OK if answer.winner else ExitCode.FAILED
    return RecommendOutcome(plan.out, answer, rows, code)
