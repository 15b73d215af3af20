"""`gpubench verify` end to end: read the claims, run the scenarios they need through `gpubench
run`'s runner (bench.api.run, one generated matrix), judge each claim, write DIR/verify.json."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import BadInput
from ..fsio import atomic_write_json
from ..run.request import DEFAULT_TIMEOUT_S, RunRequest, check_device_name
from .claims import load_claims
from .judge import ClaimResult, from_arithmetic, from_rows, not_comparable
from .scenarios import VerifyPlan, build, write_matrix

VERIFY_JSON = "verify.json"
VERIFY_FORMAT = 1


@dataclass(frozen=True)
class VerifyRequest:
    claims: str = "all"
    only: list[str] | None = None
    repeats: int = 3
    device: str = "auto"
    out: Path | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    command: list[str] = field(default_factory=list)
    resume: Path | None = None  # finish an earlier verify's scenarios in this directory (run's --resume)
    time_limit_s: float | None = None  # start no worker after this many seconds (run's --time-limit)


@dataclass(frozen=True)
class VerifyOutcome:
    out: Path
    device: str
    results: tuple[ClaimResult, ...]
    ran: bool  # whether any scenario ran (else only arithmetic and not-comparable claims)
    exit_code: int  # run's, when a run was interrupted; else 0
    limit_reason: str = ""  # why --time-limit started no further worker (runner.over_limit)


def on_the_cpu(device: str) -> bool:
    """--device cpu, or auto on a machine with no GPU driver (known without starting torch)."""
    from ..run.probe import no_gpu_driver

    return device == "cpu" or (device == "auto" and no_gpu_driver())


def gpus_from(device: str) -> int:
    """The GPUs a run on `device` may use (it and every one after it), asked of a child as `run`
    does, so that a claim made on more GPUs is not comparable here before anything runs."""
    from ..run.plan import gpu_uuids
    from ..run.probe import probe, resolve_device

    with tempfile.TemporaryDirectory(prefix="gpubench-verify-probe-") as scratch:
        seen = probe(device, Path(scratch))
    resolved, _ = resolve_device(device, seen)
    return len(gpu_uuids(resolved, seen))


def verify(
    request: VerifyRequest,
    reporter: Any = None,
    warn: Callable[[str], None] = lambda _m: None,
    info: Callable[[str], None] = lambda _m: None,
) -> VerifyOutcome:
    check_device_name(request.device)
    files = load_claims(request.claims, request.only)
    if request.resume is not None and request.out is not None:
        raise BadInput("--out and --resume: give one", hint="--resume DIR finishes the verify in DIR")
    finished = None
    if request.resume is not None and (finished := finished_run(request.resume)) is not None:
        device, gpus, frame, repeats = finished  # every run is a row: judged again where it ran, no device
        on_cpu = device == "cpu"
        plan = build(files, on_cpu, None if on_cpu else gpus)
        _check_same_scenarios(request.resume, plan, frame)
    else:
        on_cpu = on_the_cpu(request.device)
        plan = build(files, on_cpu, None if on_cpu else gpus_from(request.device))
        frame, gpus, device, repeats = None, 0, "cpu" if on_cpu else request.device, request.repeats
    out = request.resume or request.out or Path("results") / datetime.now().strftime("verify-%Y-%m-%dT%H-%M-%S")
    exit_code, limit_reason = 0, ""
    if plan.scenarios and finished is None:
        from ..results import to_frame
        from ..run.session import run as run_session

        with tempfile.TemporaryDirectory(prefix="gpubench-verify-") as scratch:
            matrix = write_matrix(plan, Path(scratch) / "verify.toml", f"gpubench verify --claims {request.claims}")
            run_plan, outcome = run_session(
                RunRequest(
                    matrix=str(matrix),
                    device=request.device,
                    repeats=request.repeats,
                    out=None if request.resume else out,
                    resume=request.resume,
                    time_limit_s=request.time_limit_s,
                    timeout_s=request.timeout_s,
                    command=request.command,
                    report=False,
                ),
                reporter,
                warn=warn,
                info=info,
            )
        out, device = run_plan.out, run_plan.device
        gpus = 0 if run_plan.device == "cpu" else len(run_plan.gpu_uuids)
        frame = to_frame(outcome.rows) if outcome.rows else None
        if outcome.interrupted or outcome.time_limited:
            exit_code, limit_reason = int(outcome.exit_code), outcome.limit_reason
    else:
        from ..run.request import check_writable

        check_writable(out, resume=finished is not None)
        if finished is not None:
            info(f"every run in {out} is a row: the claims are judged again from them ({device}); nothing runs")
    results = []
    for f in files:
        for claim in f.claims:
            if claim.id in plan.not_comparable:
                results.append(not_comparable(claim, plan.not_comparable[claim.id]))
            elif claim.arithmetic:
                results.append(from_arithmetic(claim, plan))
            elif frame is None:
                results.append(not_comparable(claim, "nothing ran"))
            else:
                results.append(from_rows(claim, plan, frame, gpus))
    document = {
        "verify_format": VERIFY_FORMAT,
        "claims": request.claims,
        "device": device,
        "repeats": repeats,
        "smoke_test": on_cpu,
        "rules": plan.rules,
        "results": [r.record() for r in results],
    }
    atomic_write_json(out / VERIFY_JSON, document)
    return VerifyOutcome(out, device, tuple(results), bool(plan.scenarios), exit_code, limit_reason)


def finished_run(result_dir: Path) -> tuple[str, int, pd.DataFrame, int] | None:
    """(device, GPUs, rows, repeats) of a verify directory where every planned run is a row (ok or
    not), read from its own files; None while runs are missing (then --resume runs them). So a
    finished verify is judged again anywhere, a laptop included, from what its GPU measured."""
    from ..results import read_results
    from ..results.resultdir import RESULTS_CSV, read_env, read_plan

    saved = read_plan(result_dir)
    if not (result_dir / RESULTS_CSV).is_file():
        return None
    frame = read_results(result_dir / RESULTS_CSV)
    try:
        names, repeats, device = (
            [str(s["name"]) for s in saved["scenarios"]],
            int(saved["repeats"]),
            str(saved["device"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise BadInput(f"{result_dir / 'scenarios.json'}: unreadable ({type(exc).__name__}: {exc})") from None
    counts = frame["scenario"].astype(str).value_counts()
    if any(counts.get(n, 0) < repeats for n in names):
        return None
    multi = (read_env(result_dir) or {}).get("multi_gpu") or {}
    gpus = 0 if device == "cpu" else max(1, len(multi.get("gpus") or []))
    return device, gpus, frame, repeats


def _check_same_scenarios(result_dir: Path, plan: VerifyPlan, frame: pd.DataFrame) -> None:
    """The claims asked for are measured by the directory's runs (else their verdicts would be
    judged from rows of other settings, or from none)."""
    missing = sorted({sc.name for sc in plan.scenarios} - set(frame["scenario"].astype(str)))
    if missing:
        raise BadInput(
            f"--resume {result_dir}: its runs do not measure these claims (no rows of {', '.join(missing[:5])})",
            hint="give the --claims and --only that verify in it was given",
        )
