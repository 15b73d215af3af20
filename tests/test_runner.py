"""The parent's bookkeeping without real workers: how a worker's end becomes a status, what a resume
reruns, and that a Ctrl-C stops the run after saving the row in hand."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from bench.errors import ExitCode
from bench.recipe.scenario import Scenario
from bench.results import read_results, write_results
from bench.run import runner
from bench.run.plan import RunPlan
from bench.run.proc import ProcResult


def scenario(name: str, **settings: Any) -> Scenario:
    return Scenario(name=name, model="tiny", samples=16, seq_len=32, warmup_steps=1, **settings)


def outcome(proc: ProcResult, result: Any = None, tmp_path: Path | None = None) -> tuple[str, str, dict]:
    path = (tmp_path or Path("/nonexistent")) / "result.json"
    if result is not None:
        path.write_text(result if isinstance(result, str) else json.dumps(result))
    return runner._outcome(proc, path, 30.0, None)


def test_worker_endings_become_statuses(tmp_path: Path) -> None:
    ok = {"status": "ok", "reason": "", "figures": {"samples_per_s": 12.5}}
    assert outcome(ProcResult(0, 1.0), ok, tmp_path) == ("ok", "", {"samples_per_s": 12.5})
    oom = {"status": "oom", "reason": "OutOfMemoryError: CUDA out of memory", "figures": {}}
    assert outcome(ProcResult(0, 1.0), oom, tmp_path)[:2] == ("oom", "OutOfMemoryError: CUDA out of memory")
    assert outcome(ProcResult(-9, 1.0)) == ("crashed", "worker killed by signal SIGKILL before writing a result", {})
    assert outcome(ProcResult(-11, 1.0))[1] == "worker killed by signal SIGSEGV before writing a result"
    assert outcome(ProcResult(3, 1.0)) == ("crashed", "worker exited with code 3 without writing a result", {})
    assert outcome(ProcResult(-15, 30.0, timed_out=True)) == (
        "timeout",
        "no result within the 30 s timeout; the worker and its children were killed",
        {},
    )
    status, error, _ = outcome(ProcResult(-15, 2.0, interrupted=True))
    assert status == "interrupted" and error.startswith("stopped by Ctrl-C")


def test_a_worker_that_finished_before_the_ctrl_c_keeps_its_result(tmp_path: Path) -> None:
    ok = {"status": "ok", "reason": "", "figures": {"samples_per_s": 1.0}}
    assert outcome(ProcResult(-15, 2.0, interrupted=True), ok, tmp_path)[0] == "ok"


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        json.dumps({"reason": "no status"}),
        json.dumps([1, 2]),
        json.dumps({"status": "great", "figures": {}}),
        json.dumps({"status": "ok", "figures": [1]}),
    ],
)
def test_an_unreadable_worker_result_is_a_crash_not_a_bad_results_file(tmp_path: Path, content: str) -> None:
    status, error, figures = outcome(ProcResult(0, 1.0), content, tmp_path)
    assert status == "crashed" and error.startswith("unreadable worker result: ") and figures == {}


def test_a_scenarios_own_timeout_wins(tmp_path: Path) -> None:
    plan = RunPlan("m", (), 1, "cpu", None, "tiny", tmp_path, 600.0)
    assert plan.timeout_for(scenario("a")) == 600.0
    assert plan.timeout_for(scenario("b", timeout_s=12)) == 12.0


def fake_run_one(calls: list[str], statuses: dict[str, str] | None = None, on_call: Any = None) -> Any:
    def run_one(plan: RunPlan, sc: Scenario, repeat: int, *args: Any) -> dict[str, Any]:
        calls.append(f"{sc.name}-r{repeat}")
        if on_call is not None:
            on_call(sc)
        status = (statuses or {}).get(sc.name, "ok")
        return {
            "scenario": sc.name,
            "repeat": repeat,
            "status": status,
            "error": "",
            "samples_per_s": 10.0 if status == "ok" else None,
            "peak_mem_mb": 1.0,
        }

    return run_one


def test_resume_reruns_only_scenarios_without_a_final_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = RunPlan(
        "m",
        (scenario("a"), scenario("b"), scenario("c"), scenario("d")),
        2,
        "cpu",
        None,
        "tiny",
        tmp_path,
        60.0,
        resume=True,
    )
    write_results(
        plan.results_csv,
        [
            {"scenario": "a", "repeat": 0, "status": "ok", "samples_per_s": 99.0, "peak_mem_mb": 1.0},
            {"scenario": "a", "repeat": 1, "status": "oom", "error": "out of memory"},  # final: kept
            {"scenario": "b", "repeat": 0, "status": "interrupted", "error": "stopped by Ctrl-C"},  # rerun
            {"scenario": "d", "repeat": 0, "status": "skipped", "error": "tf32 is a CUDA matmul mode"},
            {"scenario": "gone", "repeat": 0, "status": "ok", "samples_per_s": 1.0},  # not in the plan
        ],
    )
    calls: list[str] = []
    monkeypatch.setattr(runner, "run_one", fake_run_one(calls))
    result = runner.execute(plan, None)
    assert calls == ["b-r0", "c-r0", "b-r1", "c-r1", "d-r1"]
    frame = read_results(plan.results_csv)
    assert list(zip(frame["scenario"], frame["repeat"], frame["status"], strict=True)) == [
        ("a", 0, "ok"),
        ("a", 1, "oom"),
        ("b", 0, "ok"),
        ("b", 1, "ok"),
        ("c", 0, "ok"),
        ("c", 1, "ok"),
        ("d", 0, "skipped"),
        ("d", 1, "ok"),
    ]
    assert frame["samples_per_s"][0] == 99.0  # the finished row as it was
    assert result.exit_code == ExitCode.FAILED  # a's oom still counts


def test_exit_codes_of_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = RunPlan("m", (scenario("a"), scenario("b")), 1, "cpu", None, "tiny", tmp_path, 60.0)
    monkeypatch.setattr(runner, "run_one", fake_run_one([], {"b": "skipped"}))
    assert runner.execute(plan, None).exit_code == ExitCode.OK
    monkeypatch.setattr(runner, "run_one", fake_run_one([], {"b": "diverged"}))
    assert runner.execute(plan, None).exit_code == ExitCode.FAILED
    calls: list[str] = []
    monkeypatch.setattr(runner, "run_one", fake_run_one(calls, {"a": "interrupted"}))
    outcome = runner.execute(plan, None)
    assert (outcome.exit_code, outcome.interrupted, calls) == (ExitCode.INTERRUPTED, True, ["a-r0"])
    assert list(read_results(plan.results_csv)["status"]) == ["interrupted"]


def test_a_ctrl_c_between_scenarios_saves_the_row_in_hand_and_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = RunPlan("m", (scenario("a"), scenario("b"), scenario("c")), 1, "cpu", None, "tiny", tmp_path, 60.0)
    calls: list[str] = []

    def press_during_a(sc: Scenario) -> None:  # the worker has finished; the parent is saving its row
        if sc.name == "a":
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(runner, "run_one", fake_run_one(calls, on_call=press_during_a))
    outcome = runner.execute(plan, None)
    assert calls == ["a-r0"]
    assert (outcome.exit_code, outcome.interrupted) == (ExitCode.INTERRUPTED, True)
    assert list(read_results(plan.results_csv)["status"]) == ["ok"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_time_limit_starts_no_worker_that_an_earlier_repeat_says_would_overrun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = scenario("a"), scenario("b")
    seen = [
        {"scenario": "a", "repeat": 0, "worker_wall_s": 30.0},
        {"scenario": "b", "repeat": 0, "worker_wall_s": None},
    ]
    assert not runner.over_limit(None, a, seen, now=1e9)  # no limit
    assert not runner.over_limit(100.0, a, seen, now=69.0)  # 31 s left, a took 30 s
    # 29 s left: said with the figures it was decided on (a verify on an H100 stopped, saying nothing)
    assert (
        runner.over_limit(100.0, a, seen, now=71.0)
        == "a was not started: 29 s were left and an earlier repeat of it took 30 s"
    )
    assert not runner.over_limit(100.0, b, seen, now=99.0)  # b's time is unknown: any time left will do
    assert runner.over_limit(100.0, b, seen, now=100.0) == "the time limit had passed before b could start"

    clock = [0.0]
    monkeypatch.setattr(runner.time, "monotonic", lambda: clock[0])
    calls: list[str] = []
    walls = {"a": 30.0, "b": 10.0}

    def run_one(plan: RunPlan, sc: Scenario, repeat: int, *args: Any) -> dict[str, Any]:
        calls.append(f"{sc.name}-r{repeat}")
        clock[0] += walls[sc.name]
        row = {"scenario": sc.name, "repeat": repeat, "status": "ok", "worker_wall_s": walls[sc.name]}
        return {**row, "samples_per_s": 1.0}

    monkeypatch.setattr(runner, "run_one", run_one)
    plan = RunPlan("m", (a, b), 3, "cpu", None, "tiny", tmp_path, 60.0)
    outcome = runner.execute(plan, None, deadline=75.0)
    # a-r0 and b-r0 end at 40 s; a-r1 (30 s) fits in the 35 s left and ends at 70; b-r1 (10 s) does not
    assert calls == ["a-r0", "b-r0", "a-r1"]
    assert (outcome.exit_code, outcome.time_limited, outcome.interrupted) == (ExitCode.TIME_LIMIT, True, False)
    assert outcome.limit_reason == "b was not started: 5 s were left and an earlier repeat of it took 10 s"
    assert len(read_results(plan.results_csv)) == 3  # every finished row saved
