"""`--lanes N`: a matrix's single-GPU scenarios spread over the host's GPUs, one scenario per GPU at a time.

The scenarios still to run are dealt round-robin, in matrix order, to N lanes. Each lane is a shard
(bench/run/shards.py), DIR/lanes/lane-K, run by its own `gpubench run --resume` on its own GPU
(`cuda:FIRST+K`: its workers see that GPU alone, CUDA_VISIBLE_DEVICES set to its UUID); on the CPU,
N such runs at once, without a device. The parent polls the lanes, copies each new row into
DIR/results.csv in the plan's order (the same columns and order as a plain run's), passes Ctrl-C
on as SIGTERM (each lane saves an `interrupted` row) and copies the lanes' logs into DIR/logs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import ExitCode
from ..results import FAILED_STATUSES, write_results
from . import shards
from .outcome import RunOutcome
from .plan import RunPlan
from .proc import Interrupts, start_child, tail
from .runner import NullReporter, Reporter, _finished_rows

POLL_S = 0.5
STARTUP_S = 600.0  # a lane's own probe, ceiling and fork server, on top of its workers' timeouts
STOP_GRACE_S = 30.0  # for a lane to stop its worker and save the row after SIGTERM


def deal(names: Sequence[str], lanes: int) -> list[list[str]]:
    """Round-robin in matrix order; empty lanes left out."""
    return [list(names[k::lanes]) for k in range(lanes) if names[k::lanes]]


def lane_device(device: str, k: int) -> str:
    return "cpu" if device == "cpu" else f"cuda:{int(device.split(':')[1]) + k}"


def execute(
    plan: RunPlan,
    flags: Sequence[str],
    reporter: Reporter | None = None,
    warn: Callable[[str], None] = lambda _m: None,
    deadline: float | None = None,
) -> RunOutcome:
    reporter = reporter or NullReporter()
    order = [s.name for s in plan.scenarios]
    root = plan.out / "lanes"
    old = sorted(root.glob("lane-*")) if root.is_dir() else []
    base = _finished_rows(plan) if plan.resume else []
    rows = shards.gather(base, old, order)  # a killed parent's lanes may have rows it had not copied
    done = {(r["scenario"], int(r["repeat"])) for r in rows}
    todo = [s.name for s in plan.scenarios if any((s.name, r) not in done for r in range(plan.repeats))]
    for stale in old:  # their final rows are in `rows` now
        with contextlib.suppress(OSError):
            shutil.rmtree(stale)
    reporter.start(total=len(plan.scenarios) * plan.repeats, done=len(done))
    plan_json = plan.to_json()
    procs: dict[Path, subprocess.Popen[bytes]] = {}
    bound = {}
    child_flags = list(flags)
    if deadline is not None:
        child_flags += ["--time-limit", f"{max(1.0, deadline - time.monotonic()):.0f}"]
    for k, names in enumerate(deal(todo, plan.lanes)):
        lane = root / f"lane-{k}"
        shards.seed(lane, plan_json, names, lane_device(plan.device, k), rows)
        procs[lane] = start_child(shards.resume_argv(lane, child_flags), log_path=lane / "run.log")
        scenarios = [s for s in plan.scenarios if s.name in set(names)]
        bound[lane] = time.monotonic() + STARTUP_S + plan.repeats * sum(plan.timeout_for(s) for s in scenarios)
    interrupted = False
    reported = set(done)
    ctrl_c = Interrupts()
    try:
        with ctrl_c:
            try:
                while any(p.poll() is None for p in procs.values()):
                    rows = _copy_rows(plan, base, procs, order, rows, reported, reporter)
                    for lane, proc in procs.items():
                        if proc.poll() is None and time.monotonic() > bound[lane]:
                            warn(f"{lane}: the lane outlived its scenarios' timeouts; stopped")
                            _stop(proc, grace_s=STOP_GRACE_S)
                    with ctrl_c.armed_while():
                        time.sleep(POLL_S)
            except KeyboardInterrupt:
                interrupted = True
                for proc in procs.values():
                    _signal(proc, signal.SIGTERM)
                try:
                    for proc in procs.values():
                        _stop(proc, grace_s=STOP_GRACE_S)
                except KeyboardInterrupt:  # a second Ctrl-C: no more grace
                    for proc in procs.values():
                        _signal(proc, signal.SIGKILL)
                    raise
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                _signal(proc, signal.SIGKILL)
                proc.wait(timeout=10)
        reporter.finish()
    rows = shards.gather(base, list(procs), order, keep_interrupted=True)
    _copy_rows(plan, base, procs, order, rows, reported, reporter, final=True)
    for k, lane in enumerate(procs):
        shards.copy_logs(lane, plan.out, f"lane-{k}")
    codes = {lane: p.returncode for lane, p in procs.items()}
    for lane, code in codes.items():
        if code not in (0, 1, 4, 5, int(ExitCode.INTERRUPTED)):
            warn(f"{lane}: its gpubench run exited with code {code}: {tail(lane / 'run.log', 300).strip()}")
    interrupted = interrupted or any(r["status"] == "interrupted" for r in rows)
    if interrupted:
        return RunOutcome(rows, ExitCode.INTERRUPTED, True)
    missing = len(plan.scenarios) * plan.repeats - len(rows)
    if any(c == int(ExitCode.TIME_LIMIT) for c in codes.values()) and missing:
        return RunOutcome(rows, ExitCode.TIME_LIMIT, False, time_limited=True)
    failed = missing > 0 or any(r["status"] in FAILED_STATUSES for r in rows)
    return RunOutcome(rows, ExitCode.FAILED if failed else ExitCode.OK, False)


def _copy_rows(
    plan: RunPlan,
    base: list[dict[str, Any]],
    procs: dict[Path, subprocess.Popen[bytes]],
    order: list[str],
    rows: list[dict[str, Any]],
    reported: set[tuple[str, int]],
    reporter: Reporter,
    final: bool = False,
) -> list[dict[str, Any]]:
    """The lanes' rows so far into DIR/results.csv, if any is new; each new one reported."""
    now = rows if final else shards.gather(base, list(procs), order)
    new = [r for r in now if (r["scenario"], int(r["repeat"])) not in reported]
    for row in new:
        reported.add((row["scenario"], int(row["repeat"])))
        reporter.scenario_end(row)
    if new or final:
        write_results(plan.results_csv, now)
    return now


def _signal(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _stop(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the lane's group (it saves an `interrupted` row), SIGKILL it after `grace_s`."""
    _signal(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        _signal(proc, signal.SIGKILL)
        proc.wait(timeout=10)
