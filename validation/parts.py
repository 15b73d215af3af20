"""What `validation.run_all` (make bench), `validation.fidelity` and `validation.interleaved` share:
one `gpubench run` into a result directory that is started, resumed or skipped as its state says,
under an optional deadline; and every long child they start, each under a timeout.

A part that runs on a GPU may legitimately take long: `gpubench run --matrix full --repeats 3`
runs 39 workers, each bounded by gpubench's own per-scenario timeout (1800 s by default). The
timeouts here only guard against a hang. With a deadline (`--time-limit`) a child gets the time
left plus PAST_DEADLINE_S (gpubench run stops between workers, so the worker running at the
deadline may still take its own timeout); without one, NO_DEADLINE_TIMEOUT_S. A child that
outlives its timeout is stopped as Ctrl-C would stop it (SIGTERM to its process group: gpubench
run then kills its worker and saves its rows), and the part ends with TIMED_OUT and one line
saying so.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from bench.errors import ExitCode
from bench.results import FINAL_STATUSES, RESULTS_CSV, SCENARIOS_JSON, read_results
from bench.run.proc import kill_group

TIME_LIMIT = int(ExitCode.TIME_LIMIT)  # gpubench run's exit code when --time-limit stopped it
INTERRUPTED = int(ExitCode.INTERRUPTED)
TIMED_OUT = 124  # a child outlived its timeout (as timeout(1) says it)
NO_DEADLINE_TIMEOUT_S = 24 * 3600.0  # a hang guard for a part without --time-limit, not a budget
PAST_DEADLINE_S = 2400.0  # gpubench's default per-scenario timeout (1800 s), and time to save
STOP_GRACE_S = 60.0  # after SIGTERM, before SIGKILL: time for gpubench run to save its rows


def finished(out: Path) -> bool:
    """Every scenario x repeat of the run in `out` has a final row."""
    if not (out / RESULTS_CSV).is_file():
        return False
    plan = json.loads((out / SCENARIOS_JSON).read_text())
    frame = read_results(out)
    done = frame[frame["status"].isin(FINAL_STATUSES)]
    return len(done) >= len(plan["scenarios"]) * int(plan["repeats"])


def limit_args(deadline: float | None) -> list[str]:
    return [] if deadline is None else ["--time-limit", f"{max(deadline - time.monotonic(), 0.001):.3f}"]


def expired(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def child_timeout_s(deadline: float | None) -> float:
    """How long a child started now may run: see the module's docstring."""
    if deadline is None:
        return NO_DEADLINE_TIMEOUT_S
    return max(deadline - time.monotonic(), 0.0) + PAST_DEADLINE_S


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def stop_on_sigterm() -> None:
    """SIGTERM (a timeout above this process, `kill`) stops this script as Ctrl-C does: run_child
    then stops its child too, which lives in a session of its own and so gets no signal of ours."""
    signal.signal(signal.SIGTERM, _interrupt)


def run_script(body: Callable[[], int]) -> int:
    """A validation script's entry point: SIGTERM stops it as Ctrl-C does, and either ends it with
    INTERRUPTED; what finished is kept."""
    stop_on_sigterm()
    try:
        return body()
    except KeyboardInterrupt:
        return INTERRUPTED


def run_child(name: str, cmd: Sequence[str], timeout_s: float, quiet: bool = False) -> int:
    """Run `cmd` (an argument list, never a shell) with this terminal's output (none if `quiet`),
    in a session of its own; its exit code, TIMED_OUT once it outlived `timeout_s` (then it is
    stopped, and one line says so), INTERRUPTED on Ctrl-C or SIGTERM (the child is stopped the
    same way first: SIGTERM to its process group, SIGKILL after STOP_GRACE_S)."""
    print("+ " + " ".join(cmd), file=sys.stderr)
    stdout = subprocess.DEVNULL if quiet else None
    proc = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=stdout, start_new_session=True)
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc, STOP_GRACE_S)
        print(f"{name}: still running after its {timeout_s:g} s timeout; stopped", file=sys.stderr)
        return TIMED_OUT
    except KeyboardInterrupt:  # the child is in its own session: a terminal's Ctrl-C reached us only
        kill_group(proc, STOP_GRACE_S)
        return INTERRUPTED


def gpubench_run(name: str, out: Path, args: list[str], deadline: float | None) -> int:
    """`gpubench run ARGS --out OUT`, or `--resume OUT` for an unfinished run there; 0 if finished."""
    if (out / SCENARIOS_JSON).is_file():
        if finished(out):
            print(f"{name}: finished, skipped", file=sys.stderr)
            return 0
        cmd = [sys.executable, "-m", "bench", "run", "--resume", str(out), *limit_args(deadline)]
    else:
        cmd = [sys.executable, "-m", "bench", "run", *args, "--out", str(out), *limit_args(deadline)]
    return run_child(name, cmd, child_timeout_s(deadline))
