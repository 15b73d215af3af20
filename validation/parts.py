"""What `benchmarks/run_all.py` and `benchmarks/fidelity.py` share: one `gpubench run` into a result
directory that is started, resumed or skipped as its state says, under an optional deadline."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from bench.errors import ExitCode
from bench.results import FINAL_STATUSES, RESULTS_CSV, SCENARIOS_JSON, read_results

CHILD_TIMEOUT_S = 600  # one scenario's process in each_scenario
TIME_LIMIT = int(ExitCode.TIME_LIMIT)  # gpubench run's exit code when --time-limit stopped it


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


def gpubench_run(name: str, out: Path, args: list[str], deadline: float | None) -> int:
    """`gpubench run ARGS --out OUT`, or `--resume OUT` for an unfinished run there; 0 if finished."""
    if (out / SCENARIOS_JSON).is_file():
        if finished(out):
            print(f"{name}: finished, skipped", file=sys.stderr)
            return 0
        cmd = [sys.executable, "-m", "bench", "run", "--resume", str(out), *limit_args(deadline)]
    else:
        cmd = [sys.executable, "-m", "bench", "run", *args, "--out", str(out), *limit_args(deadline)]
    print("+ " + " ".join(cmd), file=sys.stderr)
    return subprocess.run(cmd, check=False).returncode


def each_scenario(
    script: Path, names: list[str], out: Path, args: list[str], tag: str, deadline: float | None = None
) -> int:
    """`python SCRIPT --one NAME --out OUT ARGS` for each scenario without OUT/NAME-TAG.json yet, one
    process each (accelerate's state lives per process), its output in OUT/NAME-TAG.log, printed
    after; 1 at the first failure, TIME_LIMIT if the deadline passed before all had started."""
    from bench.proc import run_subprocess

    for name in names:
        if (out / f"{name}-{tag}.json").is_file():
            print(f"{name}: finished, skipped", file=sys.stderr)
            continue
        if expired(deadline):
            return TIME_LIMIT
        log = out / f"{name}-{tag}.log"
        cmd = [sys.executable, str(script), "--one", name, "--out", str(out), *args]
        done = run_subprocess(cmd, timeout_s=CHILD_TIMEOUT_S, log_path=log)
        print(log.read_text(), end="")
        if done.returncode != 0:
            timed_out = " (timed out)" if done.timed_out else ""
            print(f"{name}: exit {done.returncode}{timed_out}; see {log}", file=sys.stderr)
            return 1
    return 0
