"""The plan of a run: the request resolved to scenarios, device, model and result directory.

`prepare` checks everything that can be wrong before the first scenario runs (exit 2), then asks a
child what torch sees; a resumed run replays its own scenarios.json."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..checks import MAX_REPEATS, MAX_SECONDS, bounded
from ..errors import BadInput
from ..families.resolve import display_name
from ..planner import matrix as matrix_mod
from ..planner import rules
from ..planner.planning import check_data, check_program, plan_scenarios
from ..recipe.nodes import NODE_OWN

__all__ = ["check_data", "prepare"]  # check_data: bench/planner/planning.py's, where it moved
from ..recipe.scenario import Scenario
from ..results import RESULTS_CSV, SCENARIOS_JSON, read_plan, read_results
from ..results.columns import KNOWN_COLUMNS
from ..results.parity import seed_scenarios
from .launcher import DEFAULT_LAUNCHER
from .outdir import check_unlocked, check_unused, missing_folders, remove_folders
from .probe import probe, resolve_device
from .request import RunRequest, check_device_name, check_request, check_writable
from .required import check_patterns


@dataclass(frozen=True)
class RunPlan:
    matrix: str
    scenarios: tuple[Scenario, ...]
    repeats: int
    device: str  # "cpu" or "cuda:N" as the user means it
    gpu_uuid: str | None
    model: str  # resolved models, for display (each scenario resolves its own)
    out: Path
    timeout_s: float
    resume: bool = False
    retry_failed: bool = False
    sample_memory: bool = True
    launcher: str = DEFAULT_LAUNCHER
    cpu_affinity: tuple[int, ...] | None = None
    gpu_uuids: tuple[str, ...] = ()  # the chosen GPU and those after it: a multi-GPU scenario's
    lanes: int = 1  # --lanes: scenarios run at once, one per GPU (bench/run/lanes.py)
    ceiling_tflops: dict[str, float] = field(default_factory=dict)  # measured per format (env.json matmul_ceiling)
    made: tuple[Path, ...] = ()  # the folders this run made for `out` (it and new parents), deepest first
    parity_reference: str = matrix_mod.DEFAULT_PARITY_REFERENCE  # the loss reference (docs/parity.md)
    parity_seeds: int = 1  # the seeds it runs at (its extra seeds are scenarios of the plan)
    skips: dict[str, str] = field(default_factory=dict)  # scenario -> why it cannot mean what it says here
    notes: dict[str, str] = field(default_factory=dict)  # scenario -> why an override left it (bench/planner/matrix.py)

    @property
    def results_csv(self) -> Path:
        return self.out / RESULTS_CSV

    @property
    def inductor_cache(self) -> Path:
        """torch.compile's cache for this run's workers: cold for a compile scenario's first repeat."""
        return self.out / "work" / "inductor-cache"

    @property
    def shared_dir(self) -> Path:
        """Files this run's workers share while it runs (a QLoRA preset's random weights); the run
        deletes it when it ends, unless --time-limit stopped it (kept for the --resume)."""
        return self.out / "work" / "shared"

    def timeout_for(self, sc: Scenario) -> float:
        """A scenario's own `timeout_s` wins over the run's --timeout."""
        return float(sc.timeout_s) if sc.timeout_s is not None else self.timeout_s

    def to_json(self) -> dict[str, Any]:
        return {
            "matrix": self.matrix,
            "repeats": self.repeats,
            "device": self.device,
            "model": self.model,
            "timeout_s": self.timeout_s,
            "parity": {"reference": self.parity_reference, "seeds": self.parity_seeds},
            "skips": dict(self.skips),
            "scenarios": [s.settings() for s in self.scenarios],
        }


def prepare(request: RunRequest, scratch: Path) -> tuple[RunPlan, dict[str, Any]]:
    """Validate the request and resolve it to a plan; returns (plan, probe)."""
    affinity = check_request(request)
    if request.resume is not None:
        return _resume(request, scratch, affinity)
    # Check matrix, settings, --only, --require, models and --out before starting any child: a typo costs nothing.
    planned_name, planned, _, _, _ = _scenarios(request, "cpu")
    origin = f"matrix '{planned_name}'" + (" with --only" if request.only else "")
    check_patterns(request.require, [s.name for s in planned], origin)
    check_device_name(request.device)
    out = request.out or Path("results") / datetime.now().strftime("%Y-%m-%dT%H-%M-%S")
    check_unused(out)  # checked again under the lock (session.run): a run may start meanwhile
    made = missing_folders(out)
    check_writable(out)
    try:
        check_unlocked(out)
        seen = probe(request.device, scratch)
        device, uuid = resolve_device(request.device, seen)
        uuids = gpu_uuids(device, seen)
        name, scenarios, model, parity, notes = _scenarios(request, device)
        skips = spread_skips(scenarios, device, uuids)
        scenarios = resolve_gpus(scenarios, device, uuids)
        lanes = resolve_lanes(request.lanes, device, uuids, scenarios)
    except BaseException:
        remove_folders(made)  # leave no empty result directory behind
        raise
    plan = RunPlan(
        name,
        scenarios,
        request.repeats,
        device,
        uuid,
        model,
        out,
        request.timeout_s,
        sample_memory=request.sample_memory,
        launcher=request.launcher,
        cpu_affinity=affinity,
        gpu_uuids=uuids,
        made=made,
        parity_reference=parity[0],
        parity_seeds=parity[1],
        lanes=lanes,
        skips=skips,
        notes=notes,
    )
    return plan, seen


CPU_ALL_PROCESSES = 2  # gpus = "all" on the CPU: enough gloo processes to exercise the collectives


def resolve_lanes(lanes: str | int | None, device: str, gpu_uuids: Sequence[str], scenarios: Sequence[Scenario]) -> int:
    """--lanes as a number (all: every GPU from --device on; 2 on the CPU); BadInput for more lanes
    than GPUs or for a scenario that spans several GPUs."""
    if lanes is None:
        return 1
    have = CPU_ALL_PROCESSES if device == "cpu" else len(gpu_uuids)
    if lanes == "all":
        count = have
    elif isinstance(lanes, int) or (isinstance(lanes, str) and lanes.isascii() and lanes.isdigit()):
        count = int(lanes)
    else:
        raise BadInput(f"--lanes {lanes!r} must be a whole number or all")
    if count < 1:
        raise BadInput(f"--lanes {count}: give 1 or more")
    if device != "cpu" and count > have:
        raise BadInput(f"--lanes {count}: {device} and the GPUs after it are {have}", hint="give --lanes all")
    spanning = [s.name for s in scenarios if s.distributed]
    if count > 1 and spanning:
        raise BadInput(
            f"--lanes {count}: scenario(s) {', '.join(spanning[:5])} use several processes (strategy); lanes "
            "run single-GPU scenarios only",
            hint="run those without --lanes, or leave them out with --only",
        )
    return count


def gpu_uuids(device: str, probe: dict[str, Any]) -> tuple[str, ...]:
    """The GPUs a multi-GPU scenario may use: the chosen one and every one after it."""
    if device == "cpu":
        return ()
    devices = probe.get("devices", [])
    return tuple(str(d.get("uuid")) for d in devices[int(device.split(":")[1]) :])


def spread_skips(scenarios: tuple[Scenario, ...], device: str, uuids: tuple[str, ...]) -> dict[str, str]:
    """The scenarios that ask to spread over every GPU (gpus = "all" with a strategy) on a host with
    one: each would run its strategy in one process, a row that does not measure what it names. Each
    is a skipped row saying why (`gpus = 1` or --gpus 1 runs it on one GPU on purpose)."""
    if device == "cpu" or len(uuids) > 1:
        return {}
    return {
        sc.name: f'gpus = "all" found {len(uuids)} GPU here: strategy = "{sc.strategy}" needs 2 or more to '
        "spread over; run it on a host with more GPUs, or set gpus = 1 (or --gpus 1) to time it on one"
        for sc in scenarios
        if sc.gpus == "all" and sc.strategy != "none" and sc.nnodes == 1
    }


def resolve_gpus(scenarios: tuple[Scenario, ...], device: str, uuids: tuple[str, ...]) -> tuple[Scenario, ...]:
    """gpus = "all" becomes a number; asking for more GPUs than there are is bad input, before any run."""
    have = CPU_ALL_PROCESSES if device == "cpu" else len(uuids)
    out = []
    for sc in scenarios:
        if sc.gpus == "all":
            sc = rules.check(sc.replace(gpus=have))  # the mesh now has a world size to fit
        if device != "cpu" and isinstance(sc.gpus, int) and sc.gpus > have:
            raise BadInput(
                f"scenario '{sc.name}': gpus = {sc.gpus}, but {device} and the GPUs after it are {have}",
                hint='lower gpus (or --gpus), use gpus = "all", or choose --device cuda:0',
            )
        out.append(sc)
    return tuple(out)


def _resume(request: RunRequest, scratch: Path, affinity: tuple[int, ...] | None) -> tuple[RunPlan, dict[str, Any]]:
    out = request.resume
    assert out is not None
    saved_path = out / SCENARIOS_JSON
    saved = read_plan(out)
    check_unlocked(out, hint="wait for it to end; then resume the run if it did not finish")
    frame = None
    if (out / RESULTS_CSV).is_file():
        frame = read_results(out / RESULTS_CSV)  # a damaged file is refused now, before anything is written
        foreign = [c for c in frame.columns if c not in KNOWN_COLUMNS]
        if foreign:  # the writer keeps only gpubench's columns: resuming would lose them
            raise BadInput(
                f"--resume {out}: {RESULTS_CSV} has columns gpubench does not write ({', '.join(foreign)})",
                hint="resuming rewrites the file with its own columns only: move those to another file first",
            )
    try:
        scenarios = tuple(Scenario(**s, origin=str(saved_path)) for s in saved["scenarios"])
        repeats, device, model, timeout_s = (saved[k] for k in ("repeats", "device", "model", "timeout_s"))
    except (ValueError, KeyError, TypeError) as exc:
        raise BadInput(f"{saved_path}: unreadable ({type(exc).__name__}: {exc})") from None
    check_patterns(request.require, [s.name for s in scenarios], f"the run in {out}")
    if frame is not None:
        unplanned = sorted(set(frame["scenario"].astype(str)) - {s.name for s in scenarios})
        if unplanned:  # the writer keeps the planned scenarios' rows only: resuming would drop these
            raise BadInput(
                f"--resume {out}: {RESULTS_CSV} has rows of scenarios {SCENARIOS_JSON} does not plan "
                f"({', '.join(unplanned[:5])}{', ...' if len(unplanned) > 5 else ''})",
                hint="resuming would drop them: move those rows to another file first",
            )
    bounded(repeats, f"{saved_path}: repeats = {repeats!r}", 1, MAX_REPEATS, whole=True)
    bounded(timeout_s, f"{saved_path}: timeout_s = {timeout_s!r}", 0, MAX_SECONDS, above=True, unit="seconds")
    if not isinstance(device, str) or not isinstance(model, str):
        raise BadInput(f"{saved_path}: unreadable (device and model must be strings)")
    changed = [
        flag
        for flag, given in (
            ("--model", request.model),
            ("--only", request.only),
            *((flag_of(k), v) for k, v in request.overrides.items() if k not in NODE_OWN),
        )
        if given is not None
    ]
    if request.matrix is None and changed:
        raise BadInput(
            f"--resume {out}: {', '.join(changed)} would change the run's scenarios",
            hint="resume without them (the run's own scenarios.json is used), "
            "or also give the same --matrix to check they still match",
        )
    if request.matrix is not None:
        _, current, _, _, _ = _scenarios(request, device)
        # gpus = "all" was resolved to a number when the run was planned
        unresolved = [
            s.replace(gpus=old.gpus) if s.gpus == "all" and len(current) == len(scenarios) else s
            for s, old in zip(current, scenarios, strict=False)
        ]
        if [s.settings() for s in unresolved] != [s.settings() for s in scenarios]:
            raise BadInput(
                f"--resume {out}: matrix '{request.matrix}' no longer matches the run's scenarios",
                hint="resume without --matrix to finish the run as it was planned",
            )
    own = {k: v for k, v in request.overrides.items() if k in NODE_OWN and v is not None}
    if own:  # each node's own (bench/recipe/nodes.py): a Slurm step's node learns them when it starts
        scenarios = tuple(s.replace(**own) if s.nnodes > 1 else s for s in scenarios)
    scenarios, _ = plan_scenarios(scenarios, device)  # the checkpoints and data files are still there
    seen = probe(device, scratch)
    device, uuid = resolve_device(device, seen)
    uuids = gpu_uuids(device, seen)
    scenarios = resolve_gpus(scenarios, device, uuids)
    lanes = resolve_lanes(request.lanes, device, uuids, scenarios)
    check_writable(out, resume=True)
    name = str(saved.get("matrix", ""))
    saved_parity = saved.get("parity")
    parity: dict[str, Any] = saved_parity if isinstance(saved_parity, dict) else {}
    reference = parity.get("reference", matrix_mod.DEFAULT_PARITY_REFERENCE)
    plan = RunPlan(
        name,
        scenarios,
        repeats,
        device,
        uuid,
        model,
        out,
        float(timeout_s),
        resume=True,
        retry_failed=request.retry_failed,
        sample_memory=request.sample_memory,
        launcher=request.launcher,
        cpu_affinity=affinity,
        gpu_uuids=uuids,
        parity_reference=str(reference),
        parity_seeds=int(parity.get("seeds", 1)),
        lanes=lanes,
        skips={str(k): str(v) for k, v in (saved.get("skips") or {}).items()},
    )
    return plan, seen


def _scenarios(
    request: RunRequest, device: str
) -> tuple[str, tuple[Scenario, ...], str, tuple[str, int], dict[str, str]]:
    """The matrix's name, its scenarios (the loss reference's extra seeds appended), the models shown,
    (parity reference, seeds): --parity-seeds wins over the matrix's parity_seeds, and the notes of
    scenarios an override left (Matrix.notes)."""
    if request.cmd is not None:
        return COMMAND_MATRIX, (command_scenario(request),), "command", (matrix_mod.DEFAULT_PARITY_REFERENCE, 1), {}
    overrides = {**request.overrides, "model": request.model}
    # only the selected scenarios are built, so an override is checked on them alone
    m = matrix_mod.load_matrix(
        "full" if request.matrix is None else request.matrix, overrides=overrides, only=request.only
    )
    seeds = m.parity_seeds if request.parity_seeds is None else request.parity_seeds
    scenarios, models = plan_scenarios(seed_scenarios(m.scenarios, m.parity_reference, seeds), device)
    shown = [display_name(m) for m in models] + (["command"] if any(s.is_command for s in scenarios) else [])
    shown_models = shown[0] if len(shown) == 1 else ", ".join(shown)
    return m.name, scenarios, shown_models, (m.parity_reference, seeds), m.notes


COMMAND_MATRIX = "cmd"  # the plan's matrix name for `run --cmd`
# what `run --cmd` takes from the command line: the window's settings, the timeout, the GPUs it sees
COMMAND_OVERRIDES = ("warmup_steps", "window", "gpus")
OVERRIDE_FLAGS = {"profile_steps": "--profile", "eval_samples": "--eval"}  # the rest: --KEY-WITH-DASHES


def flag_of(key: str) -> str:
    """The `gpubench run` option that sets the scenario field `key` for every scenario."""
    return OVERRIDE_FLAGS.get(key, f"--{key.replace('_', '-')}")


def command_scenario(request: RunRequest) -> Scenario:
    """`run --cmd "..."`: one scenario running that argument list (shlex.split, never a shell)."""
    assert request.cmd is not None
    if request.matrix is not None or request.model is not None or request.only:
        given = "--matrix" if request.matrix is not None else "--model" if request.model is not None else "--only"
        raise BadInput(
            f"--cmd and {given}: a command is its own scenario",
            hint="give --cmd alone, or a matrix with command = [...]",
        )
    ignored = sorted(k for k, v in request.overrides.items() if v is not None and k not in COMMAND_OVERRIDES)
    if ignored:
        flags = ", ".join(flag_of(k) for k in ignored)
        raise BadInput(f"--cmd: {flags} do not apply to a command (the script has its own)", hint="leave them out")
    try:
        argv = shlex.split(request.cmd)
    except ValueError as exc:
        raise BadInput(f"--cmd {request.cmd!r}: {exc}", hint="quote it as a POSIX shell would") from None
    if not argv:
        raise BadInput("--cmd is empty", hint='give the command, e.g. --cmd "python train.py"')
    check_program(argv[0], "--cmd")
    settings = {k: v for k, v in request.overrides.items() if v is not None and k in COMMAND_OVERRIDES}
    return rules.check(Scenario(name=request.cmd_name, description=request.cmd, command=tuple(argv), **settings))
