"""A run survives its scenarios' failures and its own interruption (issue 5), on the CPU with real
worker processes and faults injected on purpose (the scenario field `inject_fault`).

Each test asserts statuses, exit codes, the messages' key parts, and that no finished row is lost."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest
from harness import (
    SHORT,
    alive,
    children_of,
    error_lines,
    finished,
    gpubench,
    leftover_temp_files,
    pids_with,
    results,
    start_gpubench,
    statuses,
    wait_for,
    worker_pids,
    write_matrix,
)

from bench.results.dirlock import LOCK_FILE

pytestmark = pytest.mark.slow

HANG_TIMEOUT_S = 10
# What the runner does with a worker it stops or loses does not depend on the engine: the tests of
# process control train with the plain loop, lighter than the Trainer; the failures run the Trainer.
LOOP = {**SHORT, "engine": "accelerate"}


@dataclass
class Watched:
    """A background `gpubench run` and the processes seen for one of its scenarios."""

    proc: subprocess.Popen[bytes]
    out: Path
    logs: Path
    seen: set[int] = field(default_factory=set)
    most_at_once: int = 0

    def look(self, scenario: str) -> set[int]:
        now = worker_pids(self.out, scenario)
        self.seen |= now
        self.most_at_once = max(self.most_at_once, len(now))
        return now

    def stderr(self) -> str:
        return (self.logs / "stderr.txt").read_text(errors="replace")

    def wait(self, timeout: float, watch: str | None = None) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                self.proc.kill()
                raise AssertionError(f"gpubench run still running after {timeout} s: {self.stderr()[-2000:]}")
            if watch:
                self.look(watch)
            time.sleep(0.1)
        return self.proc.returncode


def start(tmp_path: Path, scenarios: dict[str, dict], *extra: str, base: dict = LOOP) -> Watched:
    matrix = write_matrix(tmp_path / "m.toml", scenarios, base=base)
    out = tmp_path / "out"
    proc = start_gpubench(
        "run", "--matrix", matrix, "--device", "cpu", "--out", out, *extra, log_dir=tmp_path / "parent"
    )
    return Watched(proc, out, tmp_path / "parent")


def wait_for_row(run: Watched, scenario: str, timeout: float = 180) -> None:
    def has_row() -> bool:
        if run.proc.poll() is not None:
            raise AssertionError(f"gpubench run ended early ({run.proc.returncode}): {run.stderr()[-2000:]}")
        frame = finished(run.out)
        return frame is not None and scenario in set(frame["scenario"])

    wait_for(f"the row of '{scenario}'", has_row, timeout=timeout)


# -- every kind of scenario failure in one run -----------------------------------------------------


@pytest.fixture(scope="module")
def faults(tmp_path_factory: pytest.TempPathFactory) -> Watched:
    tmp_path = tmp_path_factory.mktemp("faults")
    run = start(
        tmp_path,
        {
            "baseline": {},
            "hang": {"inject_fault": "hang", "dataloader_workers": 2, "timeout_s": HANG_TIMEOUT_S},
            "oom": {"inject_fault": "oom"},
            "nan": {"inject_fault": "nan"},
            "sigkill": {"inject_fault": "sigkill"},
            "exit3": {"inject_fault": "exit3"},
            "raise": {"inject_fault": "raise"},
        },
        "--timeout",
        "300",
        base=SHORT,
    )  # the hang's own timeout_s must win over --timeout
    run.wait(timeout=600, watch="hang")
    return run


def test_failures_are_rows_and_the_run_goes_on(faults: Watched) -> None:
    assert faults.proc.returncode == 1  # a scenario failed; results written
    frame = results(faults.out)
    assert statuses(frame) == {
        "baseline": "ok",
        "hang": "timeout",
        "oom": "oom",
        "nan": "diverged",
        "sigkill": "crashed",
        "exit3": "crashed",
        "raise": "error",
    }
    assert list(frame["scenario"]) == ["baseline", "hang", "oom", "nan", "sigkill", "exit3", "raise"]
    assert frame.set_index("scenario").loc["baseline", "samples_per_s"] > 0
    assert "Traceback" not in faults.stderr()


def test_out_of_memory_is_oom_with_the_message(faults: Watched) -> None:
    row = results(faults.out).set_index("scenario").loc["oom"]
    assert row["error"] == "OutOfMemoryError: CUDA out of memory. Tried to allocate 1 EiB (injected)"
    assert "torch.OutOfMemoryError" in row["stderr_tail"]  # the worker's traceback


def test_timeout_kills_the_worker_and_its_dataloader_workers(faults: Watched) -> None:
    row = results(faults.out).set_index("scenario").loc["hang"]
    assert row["error"] == (f"no result within the {HANG_TIMEOUT_S} s timeout; the worker and its children were killed")
    assert HANG_TIMEOUT_S <= row["worker_wall_s"] < HANG_TIMEOUT_S + 15  # its own timeout_s, not --timeout 300
    assert row["exit_code"] == -signal.SIGTERM
    assert faults.seen, "the hang's worker was never seen"
    assert not any(alive(p) for p in faults.seen)  # no survivor


def test_a_crash_names_the_signal_or_exit_code_and_keeps_the_stderr_tail(faults: Watched) -> None:
    by = results(faults.out).set_index("scenario")
    assert by.loc["sigkill", "error"] == "worker killed by signal SIGKILL before writing a result"
    assert by.loc["sigkill", "exit_code"] == -signal.SIGKILL
    assert by.loc["exit3", "error"] == "worker exited with code 3 without writing a result"
    assert by.loc["exit3", "exit_code"] == 3
    for name in ("sigkill", "exit3"):
        assert "gpubench worker: pid " in by.loc[name, "stderr_tail"]
        assert f"scenario '{name}' repeat 0 on cpu" in by.loc[name, "stderr_tail"]


def test_a_non_finite_loss_is_diverged(faults: Watched) -> None:
    row = results(faults.out).set_index("scenario").loc["nan"]
    assert row["error"].endswith("non-finite losses; final loss nan")
    assert row["nonfinite_losses"] > 0 and row["loss_finite"] == False  # noqa: E712 (a numpy bool)


def test_an_exception_is_error_with_its_message(faults: Watched) -> None:
    row = results(faults.out).set_index("scenario").loc["raise"]
    assert row["error"] == 'RuntimeError: injected failure (inject_fault = "raise")'


def test_the_timeout_option(tmp_path: Path) -> None:
    matrix = write_matrix(tmp_path / "m.toml", {"hang": {"inject_fault": "hang"}}, base=LOOP)
    done = gpubench(
        "run", "--matrix", matrix, "--device", "cpu", "--out", tmp_path / "out", "--timeout", "4", timeout=120
    )
    assert done.returncode == 1, done.stderr
    row = results(tmp_path / "out").iloc[0]
    assert (row["status"], row["error"]) == (
        "timeout",
        "no result within the 4 s timeout; the worker and its children were killed",
    )
    assert 4 <= row["worker_wall_s"] < 15


# -- Ctrl-C ----------------------------------------------------------------------------------------


def test_ctrl_c_stops_the_worker_saves_what_finished_and_exits_130(tmp_path: Path) -> None:
    run = start(
        tmp_path,
        {"first": {}, "hang": {"inject_fault": "hang", "dataloader_workers": 2}, "last": {}},
        "--timeout",
        "300",
    )
    wait_for_row(run, "first")
    # the hang's worker and its two dataloader workers are up: the worker is in its training loop
    wait_for("the worker and 2 dataloader workers", lambda: len(run.look("hang")) >= 3, timeout=120)
    os.kill(run.proc.pid, signal.SIGINT)
    assert run.wait(timeout=60) == 130
    frame = results(run.out)
    assert statuses(frame) == {"first": "ok", "hang": "interrupted"}  # 'last' never started
    assert frame.set_index("scenario").loc["hang", "error"] == (
        "stopped by Ctrl-C (SIGINT), SIGTERM or SIGHUP; the worker and its children were killed"
    )
    assert f"interrupted: finish the run with `gpubench run --resume {run.out}`" in " ".join(run.stderr().split())
    assert "Traceback" not in run.stderr()
    assert len(run.seen) >= 3
    assert wait_for("no survivor", lambda: not worker_pids(run.out, "hang"), timeout=10)
    assert not (run.out / "work" / "last-r0").exists()


def test_a_second_ctrl_c_exits_at_once_leaving_a_valid_results_file(tmp_path: Path) -> None:
    run = start(tmp_path, {"first": {}, "hang": {"inject_fault": "hang"}, "last": {}}, "--timeout", "300")
    wait_for_row(run, "first")
    wait_for("the hang's worker", lambda: run.look("hang"), timeout=60)
    os.kill(run.proc.pid, signal.SIGINT)
    time.sleep(0.02)
    os.kill(run.proc.pid, signal.SIGINT)
    pressed = time.monotonic()
    assert run.wait(timeout=30) == 130
    assert time.monotonic() - pressed < 10
    frame = results(run.out)  # valid: read_results accepts it
    assert frame.set_index("scenario").loc["first", "status"] == "ok"
    assert set(statuses(frame).items()) <= {("first", "ok"), ("hang", "interrupted")}
    assert leftover_temp_files(run.out) == []
    assert "Traceback" not in run.stderr()
    assert wait_for("no survivor", lambda: not worker_pids(run.out, "hang"), timeout=10)


# -- Ctrl-C while the run is still planning ---------------------------------------------------------
def tree(folder: Path) -> dict[str, bytes | None]:
    """Every entry under `folder` (a folder as None, a file as its bytes, the lock file as b"": it
    holds the pid of the last run that took it); {} when it is absent."""
    if not folder.exists():
        return {}

    def content(p: Path) -> bytes | None:
        return None if p.is_dir() else b"" if p.name == LOCK_FILE else p.read_bytes()

    return {str(p.relative_to(folder)): content(p) for p in sorted(folder.rglob("*"))}


def planning(tmp_path: Path, out: Path, *args: str | Path) -> Watched:
    """`gpubench run ARGS` stopped where it plans under the lock: writing env.json, which asks git
    about the checkout. A `git` first on PATH leaves a marker and waits there (env.json gives up on
    a git that takes over 5 s, so each of its 3 calls is a 5 s window for the test's Ctrl-C)."""
    bin_dir, marker = tmp_path / "bin", tmp_path / "planning"
    bin_dir.mkdir(exist_ok=True)
    git = bin_dir / "git"
    git.write_text(f'#!/bin/sh\n: > "{marker}"\nexec sleep 30\n')
    git.chmod(0o755)
    marker.unlink(missing_ok=True)
    logs = tmp_path / f"parent-{len(list(tmp_path.glob('parent-*')))}"
    proc = start_gpubench(*args, log_dir=logs, env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    run = Watched(proc, out, logs)

    def there() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"gpubench run ended early ({proc.returncode}): {run.stderr()[-2000:]}")
        return marker.exists()

    wait_for("the run to plan under its lock", there, timeout=180)
    os.kill(proc.pid, signal.SIGINT)
    assert run.wait(timeout=60) == 130, run.stderr()[-2000:]
    assert "Traceback" not in run.stderr()
    return run


@pytest.mark.parametrize("where", ["new", "existing", "resumed"])
def test_ctrl_c_while_planning_leaves_the_out_folder_as_it_was(tmp_path: Path, where: str) -> None:
    """Nothing measured, nothing left: a new --out (and the parents made for it) goes; a folder that
    was there, or one --resume finishes, keeps exactly what it held (its lock file too)."""
    matrix = write_matrix(tmp_path / "m.toml", {"a": {}}, base=LOOP)
    out = tmp_path / "new" / "nested" / "out" if where == "new" else tmp_path / "out"
    if where == "existing":
        out.mkdir()
        (out / "notes.txt").write_text("the user's own file\n")
    if where == "resumed":  # a run that planned, ran nothing and stopped: --resume finishes it
        stopped = gpubench("run", "--matrix", matrix, "--device", "cpu", "--out", out, "--time-limit", "0.001")
        assert stopped.returncode == 4, stopped.stderr[-2000:]
    before = tree(tmp_path / "new" if where == "new" else out)
    args = ("--resume", out) if where == "resumed" else ("--matrix", matrix, "--device", "cpu", "--out", out)
    planning(tmp_path, out, "run", *args)
    if where == "new":
        assert not (tmp_path / "new").exists()
    else:
        assert tree(out) == before


# -- the parent killed outright, then --resume -----------------------------------------------------


def test_parent_killed_outright_then_resume(tmp_path: Path) -> None:
    scenarios = {"a": {}, "b": {"batch_size": 2}}
    run = start(tmp_path, scenarios)
    wait_for_row(run, "a")
    worker = wait_for("b's worker", lambda: run.look("b"), timeout=60)
    server = children_of(run.proc.pid) & pids_with("bench.worker --serve")
    assert len(server) == 1  # the default launcher: a fork server, child of the runner, forks the workers
    os.kill(run.proc.pid, signal.SIGKILL)
    run.proc.wait(timeout=30)
    before = results(run.out)  # a valid CSV holding every finished scenario
    assert statuses(before) == {"a": "ok"}
    # the orphaned worker does not live on (it would hold the GPU during the resume), nor the server
    assert wait_for("b's worker to die with its parent", lambda: not worker_pids(run.out, "b"), timeout=15)
    assert wait_for("the fork server to die", lambda: not any(alive(p) for p in server), timeout=15)
    assert worker

    # --resume refuses what would change the run
    write_matrix(tmp_path / "m.toml", {**scenarios, "b": {"batch_size": 4}}, base=LOOP)  # edited since
    refused = gpubench("run", "--resume", run.out, "--matrix", tmp_path / "m.toml", timeout=60)
    assert refused.returncode == 2
    assert error_lines(refused.stderr) == [
        f"gpubench: error: --resume {run.out}: matrix '{tmp_path / 'm.toml'}' no longer matches the run's "
        "scenarios (resume without --matrix to finish the run as it was planned)"
    ]
    refused = gpubench("run", "--resume", run.out, "--samples", "8", timeout=60)
    assert refused.returncode == 2 and "--samples would change the run's scenarios" in refused.stderr
    assert statuses(results(run.out)) == {"a": "ok"}  # nothing ran

    # the resume runs b from the run's own scenarios.json (batch 2, not the edited 4) and keeps a as it was
    done = gpubench("run", "--resume", run.out, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    after = results(run.out)
    assert statuses(after) == {"a": "ok", "b": "ok"}
    pd.testing.assert_series_equal(after.iloc[0], before.iloc[0], check_dtype=False)  # a as it was
    assert list(after["batch_size"]) == [4, 2]

    # a finished run resumed again runs nothing; a --matrix that still matches is accepted
    same = write_matrix(tmp_path / "same.toml", scenarios, base=LOOP)
    again = gpubench("run", "--resume", run.out, "--matrix", same, timeout=120)
    assert again.returncode == 0, again.stderr
    assert results(run.out).equals(after)


# -- --time-limit, then --resume --------------------------------------------------------------------


def test_a_spent_time_limit_runs_nothing_exits_4_and_resume_finishes(tmp_path: Path) -> None:
    matrix = write_matrix(tmp_path / "m.toml", {"a": {}}, base=LOOP)
    out = tmp_path / "out"
    stopped = gpubench("run", "--matrix", matrix, "--repeats", "2", "--out", out, "--time-limit", "0.001")
    assert stopped.returncode == 4, stopped.stderr[-3000:]
    said = " ".join(stopped.stderr.split())
    assert (
        f"stopped at --time-limit 0.001 s with 0 of 2 rows done: finish the run with `gpubench run --resume {out}`"
        in said
    )
    assert "(the time limit had passed before a could start)" in said  # why, not only that
    assert "Traceback" not in stopped.stderr and not (out / "work").exists()  # no worker started
    bad = gpubench("run", "--matrix", matrix, "--out", tmp_path / "o2", "--time-limit", "0", timeout=60)
    assert bad.returncode == 2 and error_lines(bad.stderr) == [
        "gpubench: error: --time-limit 0.0 must be a positive number of seconds"
    ]
    done = gpubench("run", "--resume", out, "--time-limit", "600")
    assert done.returncode == 0, done.stderr[-3000:]
    assert list(zip(*(results(out)[c] for c in ("repeat", "status")), strict=True)) == [(0, "ok"), (1, "ok")]
    env = json.loads((out / "env.json").read_text())
    (resumed,) = env["resumes"]  # the first env.json stays; the resume says how its machine was
    assert resumed["command"].endswith("--time-limit 600") and resumed["cpu_speed"]["passes"] >= 4
    # each command's share of its wall time stays as it was measured: the first trained nothing
    assert env["harness_time"]["rows"] == 0 and env["harness_time"]["train_loop_s"] == 0
    assert resumed["harness_time"]["rows"] == 2 and 0 < resumed["harness_time"]["training_share"] < 1
    said = " ".join(done.stderr.split())
    assert f"{resumed['harness_time']['training_share']:.0%} of it in the training loops (2 rows" in said
    whole = resumed["harness_time"]["train_loop_s"] / (
        env["harness_time"]["wall_s"] + resumed["harness_time"]["wall_s"]
    )
    assert "; the run's 2 commands: " in said and f"s, {whole:.0%}" in said


# -- orphans: torchrun and its ranks die with the parent ---------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP], ids=["SIGKILL", "SIGHUP"])
def test_no_rank_outlives_a_killed_or_hung_up_parent(tmp_path: Path, sig: signal.Signals) -> None:
    """torchrun is asked to die with gpubench (PR_SET_PDEATHSIG) and each rank with torchrun, so a
    SIGKILLed parent leaves nothing behind; SIGHUP (a closed terminal) is an interruption: the ranks
    are stopped, the row is `interrupted`, exit 130. Found by the spec path in their command lines."""
    hang = {"ddp-hang": {"strategy": "ddp", "gpus": 2, "inject_fault": "hang"}}
    run = start(tmp_path, hang, "--timeout", "600", "--skip-preflight")
    marker = str(run.out / "work" / "ddp-hang-r0" / "spec.json")
    try:
        wait_for("torchrun and its 2 ranks", lambda: len(pids_with(marker)) >= 3, timeout=240)
        os.kill(run.proc.pid, sig)
        code = run.wait(timeout=120)
        assert wait_for("no rank left", lambda: not pids_with(marker), timeout=120)
    finally:
        for pid in pids_with(marker):  # end leftovers by pid, whatever the outcome
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    if sig == signal.SIGHUP:
        assert code == 130, run.stderr()
        assert statuses(results(run.out)) == {"ddp-hang": "interrupted"}
