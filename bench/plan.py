"""Everything decided before the first scenario runs: matrix, device, model, output directory.

Bad input is caught here (exit 2) so no GPU time is spent on a run that cannot be right."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from . import cpus
from . import matrix as matrix_mod
from .errors import BadInput
from .fsio import atomic_write_json, read_json
from .launcher import DEFAULT_LAUNCHER, LAUNCHERS
from .models import resolve_model
from .proc import run_subprocess, tail
from .results import ENV_JSON, RESULTS_CSV, SCENARIOS_JSON
from .scenario import Scenario

DEFAULT_TIMEOUT_S = 1800.0
PROBE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class RunRequest:
    matrix: str | None = None
    model: str | None = None
    device: str = "auto"
    only: list[str] | None = None
    repeats: int = 1
    out: Path | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    overrides: dict[str, Any] = field(default_factory=dict)  # samples, seq_len, warmup_steps, engine
    exclusive: bool = False
    sample_memory: bool = True  # the NVML sampler thread in this process
    resume: Path | None = None
    command: list[str] = field(default_factory=list)
    launcher: str = DEFAULT_LAUNCHER  # fork: one fork server per run; spawn: a fresh interpreter each
    time_limit_s: float | None = None  # start no worker that would end after this many seconds
    cpu_affinity: str | None = None  # "2-5": the CPUs the workers may use (Linux)


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
    sample_memory: bool = True
    launcher: str = DEFAULT_LAUNCHER
    cpu_affinity: tuple[int, ...] | None = None

    @property
    def results_csv(self) -> Path:
        return self.out / RESULTS_CSV

    @property
    def inductor_cache(self) -> Path:
        """torch.compile's cache for this run's workers: cold for a compile scenario's first repeat."""
        return self.out / "work" / "inductor-cache"

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
            "scenarios": [s.settings() for s in self.scenarios],
        }


def probe_torch(scratch: Path) -> dict[str, Any]:
    """Ask a child what torch sees, so this process never creates a CUDA context."""
    out = scratch / "probe.json"
    result = run_subprocess(
        [sys.executable, "-m", "bench.worker", "--probe", str(out)],
        timeout_s=PROBE_TIMEOUT_S,
        log_path=scratch / "probe.log",
        env=worker_env(None),
    )
    if result.interrupted:  # Ctrl-C while torch was starting: stop, nothing ran
        raise KeyboardInterrupt
    if result.returncode != 0 or not out.is_file():
        raise BadInput(f"cannot start torch in a child process: {tail(scratch / 'probe.log', 400).strip()}")
    data: dict[str, Any] = read_json(out)
    return data


def check_device_name(requested: str) -> None:
    if requested not in ("auto", "cpu", "cuda") and not (requested.startswith("cuda:") and requested[5:].isdigit()):
        raise BadInput(f"--device {requested!r} is not one of auto, cpu, cuda, cuda:N")


def resolve_device(requested: str, probe: dict[str, Any]) -> tuple[str, str | None]:
    """(device, GPU UUID) from auto|cpu|cuda|cuda:N; asking for a GPU that is not there is bad input."""
    devices = probe.get("devices", [])
    given = requested  # for messages: what the user typed
    if requested == "cpu":
        return "cpu", None
    if requested == "auto":
        if not devices:
            return "cpu", None
        requested = "cuda:0"
    if requested == "cuda":
        requested = "cuda:0"
    check_device_name(requested)
    if not devices:
        raise BadInput(f"--device {given}: torch sees no CUDA GPU on this machine", hint="use --device cpu or auto")
    index = int(requested[5:])
    if index >= len(devices):
        raise BadInput(f"--device {given}: this machine has {len(devices)} CUDA GPU(s)")
    return requested, devices[index].get("uuid")


def worker_env(
    gpu_uuid: str | None, inductor_cache: Path | None = None, cpu_affinity: tuple[int, ...] | None = None
) -> dict[str, str]:
    """The child's environment: offline, unbuffered, and only the chosen GPU visible. With
    `inductor_cache`, torch.compile's caches live there (unless the user set TORCHINDUCTOR_CACHE_DIR),
    so a run's compile times do not depend on what earlier runs left in /tmp."""
    env = dict(os.environ)
    if inductor_cache is not None:
        env["TORCHINDUCTOR_CACHE_DIR"] = inductor_cache_dir(inductor_cache)
    package_root = str(Path(__file__).resolve().parent.parent)
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
    if gpu_uuid:
        env["CUDA_VISIBLE_DEVICES"] = gpu_uuid
    env.pop(cpus.ENV_VAR, None)
    if cpu_affinity:
        env[cpus.ENV_VAR] = ",".join(map(str, cpu_affinity))
    return env


def inductor_cache_dir(run_cache: Path) -> str:
    """Where the workers' torch.compile caches go: the user's TORCHINDUCTOR_CACHE_DIR, else the run's."""
    return os.environ.get("TORCHINDUCTOR_CACHE_DIR") or str(run_cache.resolve())


def check_writable(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write-test-"):
            pass
    except OSError as exc:
        raise BadInput(
            f"--out {out}: cannot write there: {exc.strerror or exc}", hint="choose another directory with --out"
        ) from None


def _scenarios(request: RunRequest, device: str) -> tuple[str, tuple[Scenario, ...], str]:
    m = matrix_mod.load_matrix(request.matrix or "full")
    scenarios = matrix_mod.select(m.scenarios, request.only, str(m.path))  # settings checked on these only
    scenarios = matrix_mod.apply_overrides(scenarios, {**request.overrides, "model": request.model})
    models = resolve_models(scenarios, device)
    return m.name, scenarios, models[0] if len(models) == 1 else ", ".join(models)


def resolve_models(scenarios: tuple[Scenario, ...], device: str) -> list[str]:
    """Each scenario's model resolved for the device; a checkpoint must still hold safetensors."""
    models = sorted({resolve_model(s.model, device) for s in scenarios})
    for resolved in models:
        if Path(resolved).is_dir():
            check_checkpoint(Path(resolved))
    return models


def check_checkpoint(path: Path) -> None:
    """A local checkpoint is loaded from safetensors only (no pickle), so it must have them."""
    if not any(path.glob("*.safetensors")):
        raise BadInput(
            f"model directory {path} has no .safetensors weights",
            hint="gpubench loads local checkpoints from safetensors only (never pickle); "
            "save it with save_pretrained(..., safe_serialization=True)",
        )


def prepare(request: RunRequest, scratch: Path) -> tuple[RunPlan, dict[str, Any]]:
    """Validate the request and resolve it to a plan; returns (plan, probe)."""
    if request.repeats < 1:
        raise BadInput(f"--repeats {request.repeats} must be at least 1")
    if request.timeout_s <= 0:
        raise BadInput(f"--timeout {request.timeout_s} must be a positive number of seconds")
    if request.time_limit_s is not None and not request.time_limit_s > 0:
        raise BadInput(f"--time-limit {request.time_limit_s} must be a positive number of seconds")
    affinity = cpus.check(request.cpu_affinity) if request.cpu_affinity is not None else None
    if request.launcher not in LAUNCHERS:
        raise BadInput(f"--launcher {request.launcher!r} is not one of {', '.join(LAUNCHERS)}")
    if request.launcher == "fork" and DEFAULT_LAUNCHER != "fork":
        raise BadInput("--launcher fork needs Linux (os.fork)", hint="use --launcher spawn")
    if request.resume is not None:
        return _resume(request, scratch, affinity)
    # Check matrix, settings, --only, models and --out before starting any child: a typo costs nothing.
    _scenarios(request, "cpu")
    check_device_name(request.device)
    out = request.out or Path("results") / datetime.now().strftime("%Y-%m-%dT%H-%M-%S")
    if (out / RESULTS_CSV).exists():
        raise BadInput(
            f"--out {out} already holds a results.csv", hint=f"use --resume {out} to finish it, or choose another --out"
        )
    created = not out.exists()
    check_writable(out)
    try:
        probe = probe_torch(scratch)
        device, uuid = resolve_device(request.device, probe)
        name, scenarios, model = _scenarios(request, device)
    except BaseException:
        if created:  # leave no empty result directory behind
            with contextlib.suppress(OSError):
                out.rmdir()
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
    )
    return plan, probe


def _resume(request: RunRequest, scratch: Path, affinity: tuple[int, ...] | None) -> tuple[RunPlan, dict[str, Any]]:
    out = request.resume
    assert out is not None
    saved_path = out / SCENARIOS_JSON
    if not saved_path.is_file():
        raise BadInput(f"--resume {out}: no {SCENARIOS_JSON} there; not a gpubench result directory")
    try:
        saved = read_json(saved_path)
        scenarios = tuple(Scenario(**s, origin=str(saved_path)) for s in saved["scenarios"])
        repeats, device, model = int(saved["repeats"]), saved["device"], saved["model"]
        timeout_s = float(saved["timeout_s"])
    except (ValueError, KeyError, TypeError) as exc:
        raise BadInput(f"{saved_path}: unreadable ({type(exc).__name__}: {exc})") from None
    changed = [
        flag
        for flag, given in (
            ("--model", request.model),
            ("--only", request.only),
            *((f"--{k.replace('_', '-')}", v) for k, v in request.overrides.items()),
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
        _, current, _ = _scenarios(request, device)
        if [s.settings() for s in current] != [s.settings() for s in scenarios]:
            raise BadInput(
                f"--resume {out}: matrix '{request.matrix}' no longer matches the run's scenarios",
                hint="resume without --matrix to finish the run as it was planned",
            )
    resolve_models(scenarios, device)  # the checkpoints are still there
    probe = probe_torch(scratch)
    device, uuid = resolve_device(device, probe)
    check_writable(out)
    for stale in out.glob(".*.tmp"):  # an atomic write cut short by a SIGKILL
        stale.unlink(missing_ok=True)
    name = str(saved.get("matrix", ""))
    plan = RunPlan(
        name,
        scenarios,
        repeats,
        device,
        uuid,
        model,
        out,
        timeout_s,
        resume=True,
        sample_memory=request.sample_memory,
        launcher=request.launcher,
        cpu_affinity=affinity,
    )
    return plan, probe


def save_plan(plan: RunPlan, env: dict[str, Any]) -> None:
    """scenarios.json and env.json; a resumed run keeps the first env.json and appends to its
    `resumes` list where (and on which machine) the rest ran."""
    atomic_write_json(plan.out / SCENARIOS_JSON, plan.to_json())
    env_path = plan.out / ENV_JSON
    if plan.resume and env_path.exists():
        first = read_json(env_path)
        gpu = env.get("gpu") or {}
        first.setdefault("resumes", []).append(
            {
                "created_at": env.get("created_at"),
                "host": env.get("host"),
                "command": env.get("command"),
                "launcher": env.get("launcher"),
                "cpu_affinity": env.get("cpu_affinity"),
                "gpu_uuid": gpu.get("uuid"),
                "driver": gpu.get("driver"),
                "packages": env.get("packages"),
                "cpu_speed": env.get("cpu_speed"),
            }
        )
        atomic_write_json(env_path, first)
    else:
        atomic_write_json(env_path, env)


def note_launcher_fallback(plan: RunPlan, why: str) -> None:
    """env.json: the fork server could not serve and workers were spawned afresh (see launcher.py)."""
    env_path = plan.out / ENV_JSON
    env = read_json(env_path)
    env["launcher_fallback"] = {"launcher": "spawn", "why": why}
    atomic_write_json(env_path, env)
