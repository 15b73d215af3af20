"""bench.history.judge: baselines, thresholds, confirmation by repeats, consecutive runs, accepted steps."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from bench.compare.core import Thresholds
from bench.errors import BadInput, IncomparableRuns
from bench.history.judge import (
    ACCEPTED,
    BEYOND,
    CHECK_COLUMNS,
    IMPROVED,
    NO_BASELINE,
    NOISY,
    WITHIN,
    Params,
    Point,
    Series,
    Step,
    judge_run,
    marks,
)

T0 = datetime(2026, 11, 1, 2, 0)


def point(run_id: int, speeds: list[float] | None, *, mem: float = 1000.0, status: str = "ok") -> Point:
    speeds = speeds or []
    values: dict[str, float | None] = {
        "samples_per_s": statistics.median(speeds) if speeds else None,
        "peak_mem_mb": mem if speeds else None,
        "step_time_median_ms": statistics.median(4000.0 / s for s in speeds) if speeds else None,
    }
    repeats = {
        "samples_per_s": tuple(speeds),
        "peak_mem_mb": tuple(mem for _ in speeds),
        "step_time_median_ms": tuple(4000.0 / s for s in speeds),
    }
    return Point(run_id, T0 + timedelta(days=run_id), status, values, repeats)


def series(
    nights: list[list[float] | None],
    *,
    steps: tuple[Step, ...] = (),
    mems: list[float] | None = None,
    statuses: list[str] | None = None,
) -> Series:
    points = tuple(
        point(i + 1, speeds, mem=mems[i] if mems else 1000.0, status=statuses[i] if statuses else "ok")
        for i, speeds in enumerate(nights)
    )
    return Series("k" * 16, "bf16", "NVIDIA H200", "bert-large", {}, points, steps)


def verdicts(s: Series, params: Params | None = None, run_id: int | None = None) -> dict[str, dict[str, Any]]:
    run = {"id": run_id or s.points[-1].run_id, "gpu_model": "NVIDIA H200"}
    result = judge_run(run, [s], params or Params(), earlier_gpus=["NVIDIA H200"])
    return {row["metric"]: row for row in result.rows.to_dict("records")}


STEADY = [[100.0, 100.5, 99.5]] * 6


def test_baseline_is_the_median_of_the_last_window_runs() -> None:
    s = series([[50.0]] * 3 + [[100.0], [102.0], [98.0], [101.0]] + [[100.0]])
    row = verdicts(s, Params(window=4))["samples_per_s"]
    assert row["baseline"] == 100.5  # median of 100, 102, 98, 101: the 50s are outside the window
    assert row["baseline_n"] == 4
    assert row["verdict"] == "unchanged"
    wide = verdicts(s, Params(window=7))["samples_per_s"]
    assert wide["baseline"] == 98.0 and wide["baseline_n"] == 7


def test_one_slow_night_is_watched_not_failed_by_default() -> None:
    s = series([*STEADY, [90.0, 90.3, 89.8]])
    row = verdicts(s)["samples_per_s"]
    assert row["verdict"] == "watch"
    assert row["streak"] == "1/2"
    assert row["change_pct"] == pytest.approx(-10.0)
    result = judge_run({"id": 7}, [s], Params(), earlier_gpus=["x"])
    assert result.exit_code == 0


def test_two_slow_nights_in_a_row_are_a_regression() -> None:
    s = series([*STEADY, [90.0, 90.3, 89.8], [89.9, 90.1, 90.0]])
    row = verdicts(s)["samples_per_s"]
    assert row["verdict"] == "regression"
    assert row["streak"] == "2/2"
    assert row["p_value"] <= 0.05
    assert judge_run({"id": 8}, [s], Params(), earlier_gpus=["x"]).exit_code == 1


def test_consecutive_1_fails_on_a_single_night() -> None:
    s = series([*STEADY, [90.0, 90.3, 89.8]])
    assert verdicts(s, Params(consecutive=1))["samples_per_s"]["verdict"] == "regression"
    assert judge_run({"id": 7}, [s], Params(consecutive=1), earlier_gpus=["x"]).exit_code == 1


def test_a_slow_night_between_good_ones_breaks_the_streak() -> None:
    s = series([*STEADY, [90.0, 90.3, 89.8], [100.0, 100.2, 99.9], [90.0, 90.1, 89.9]])
    assert verdicts(s)["samples_per_s"]["verdict"] == "watch"


def test_a_move_within_the_threshold_is_unchanged_and_an_improvement_does_not_fail() -> None:
    s = series([*STEADY, [96.0, 96.2, 95.9], [96.0, 96.1, 95.8]])  # -4%: inside 5%
    assert verdicts(s)["samples_per_s"]["verdict"] == "unchanged"
    faster = series([*STEADY, [120.0, 120.5, 119.0], [121.0, 120.0, 120.2]])
    rows = verdicts(faster)
    assert rows["samples_per_s"]["verdict"] == "improvement"
    assert rows["step_time_median_ms"]["verdict"] == "improvement"  # lower is better there


def test_repeats_that_straddle_the_baseline_do_not_confirm_it() -> None:
    # the median is 10% down, but one repeat is as fast as ever: the test cannot confirm a move
    s = series([*STEADY, [90.0, 89.0, 101.0], [90.0, 88.0, 100.6]])
    row = verdicts(s)["samples_per_s"]
    assert row["verdict"] == "noisy"
    assert row["p_value"] > 0.05
    assert judge_run({"id": 8}, [s], Params(), earlier_gpus=["x"]).exit_code == 0


def test_without_three_repeats_the_threshold_alone_decides() -> None:
    s = series([[100.0]] * 4 + [[90.0], [90.0]])
    row = verdicts(s)["samples_per_s"]
    assert row["verdict"] == "regression"
    assert math.isnan(row["p_value"])
    assert "threshold only" in row["note"]


def test_peak_memory_has_its_own_2_percent_threshold() -> None:
    up3 = series([*STEADY, *STEADY[:2]], mems=[1000.0] * 6 + [1030.0, 1030.0])
    assert verdicts(up3)["peak_mem_mb"]["verdict"] == "regression"
    up1 = series([*STEADY, *STEADY[:2]], mems=[1000.0] * 6 + [1015.0, 1015.0])
    assert verdicts(up1)["peak_mem_mb"]["verdict"] == "unchanged"
    loose = Params(thresholds=Thresholds(memory_pct=5.0))
    assert verdicts(up3, loose)["peak_mem_mb"]["verdict"] == "unchanged"


def test_an_accepted_step_starts_a_new_level() -> None:
    slower = [[80.0, 80.2, 79.9]] * 3
    unaccepted = series([*STEADY, *slower])
    assert verdicts(unaccepted)["samples_per_s"]["verdict"] == "regression"
    accepted = series([*STEADY, *slower], steps=(Step(7, None, "torch 2.12 upgrade"),))
    judged = marks(accepted, "samples_per_s", Params())
    assert [m.flag for m in judged[6:]] == [ACCEPTED, WITHIN, WITHIN]
    assert judged[6].change_pct == pytest.approx(-20.0, abs=0.5)  # the step's size, against the old level
    assert judged[6].note == "accepted: torch 2.12 upgrade"
    assert judged[8].baseline == pytest.approx(80.0)  # counted from the accepted run only
    assert verdicts(accepted)["samples_per_s"]["verdict"] == "unchanged"


def test_the_night_after_an_accepted_step_has_only_the_new_level_as_baseline() -> None:
    s = series([*STEADY, [80.0, 80.2, 79.9], [100.0, 100.1, 99.9]], steps=(Step(7, None, "upgrade"),))
    judged = marks(s, "samples_per_s", Params())
    assert judged[-1].flag == IMPROVED and judged[-1].baseline_n == 1


def test_a_step_accepted_for_one_metric_leaves_the_others_judged() -> None:
    nights = [*STEADY, [80.0, 80.2, 79.9], [80.1, 79.9, 80.0]]
    mems = [1000.0] * 6 + [1100.0, 1100.0]
    s = series(nights, mems=mems, steps=(Step(7, "peak_mem_mb", "bigger buffers on purpose"),))
    rows = verdicts(s)
    assert rows["peak_mem_mb"]["verdict"] == "unchanged"
    assert rows["samples_per_s"]["verdict"] == "regression"


def test_a_scenario_that_starts_failing_is_a_new_failure_after_two_nights() -> None:
    s = series([*STEADY, None, None], statuses=["ok"] * 6 + ["oom", "oom"])
    rows = verdicts(s)
    assert list(rows) == ["status"]  # a failed run has no figures to judge
    assert rows["status"]["verdict"] == "new failure"
    assert judge_run({"id": 8}, [s], Params(), earlier_gpus=["x"]).exit_code == 1
    once = series([*STEADY, None], statuses=["ok"] * 6 + ["crashed"])
    assert verdicts(once)["status"]["verdict"] == "watch"


def test_a_scenario_that_always_failed_is_not_new() -> None:
    s = series([None] * 3, statuses=["oom"] * 3)
    assert verdicts(s)["status"]["verdict"] == "still failing"


def test_the_first_points_have_no_baseline() -> None:
    s = series([[100.0, 100.0, 100.0]])
    assert marks(s, "samples_per_s", Params())[0].flag == NO_BASELINE
    result = judge_run({"id": 1, "gpu_model": "NVIDIA H200"}, [s], Params(), earlier_gpus=[])
    assert result.exit_code == 0
    assert result.notes == ("run 1 is the first run stored: nothing to judge it against yet",)
    assert list(result.rows.columns) == CHECK_COLUMNS


def test_a_run_without_any_series_history_among_other_runs_is_incomparable() -> None:
    s = series([[100.0, 100.0, 100.0]])
    with pytest.raises(IncomparableRuns, match=r"run 1 \(NVIDIA H200\) has no history.*NVIDIA A100"):
        judge_run({"id": 1, "gpu_model": "NVIDIA H200"}, [s], Params(), earlier_gpus=["NVIDIA A100"])


def test_an_older_run_can_be_judged_against_what_came_before_it() -> None:
    s = series([*STEADY, [90.0, 90.3, 89.8], [89.9, 90.1, 90.0], [100.0, 100.0, 100.0]])
    assert verdicts(s, run_id=8)["samples_per_s"]["verdict"] == "regression"
    assert verdicts(s, run_id=9)["samples_per_s"]["verdict"] in ("unchanged", "improvement")


def test_noisy_and_beyond_flags_per_point() -> None:
    s = series([*STEADY, [90.0, 89.0, 101.0], [90.0, 90.3, 89.8]])
    assert [m.flag for m in marks(s, "samples_per_s", Params())][-2:] == [NOISY, BEYOND]


def test_a_slow_night_with_a_slower_cpu_says_so_and_is_still_judged() -> None:
    """Seven steady nights with the CPU probe near 12 ms, then two 20% slower nights whose windows
    met a CPU taking 16.5 ms: a regression, whose note names the CPU; the memory row has no such note."""
    base = series([[100.0, 100.5, 99.5]] * 7 + [[80.0, 80.5, 79.5]] * 2)
    points = tuple(replace(p, cpu_loop_ms=12.0 if i < 7 else 16.5) for i, p in enumerate(base.points))
    slow_cpu = replace(base, points=points)
    for metric in ("samples_per_s", "step_time_median_ms"):
        row = judge_run({"id": 9}, [slow_cpu], Params(), metrics=[metric]).rows.iloc[0]
        assert row["verdict"] == "regression"
        assert "the CPU ran slower around this run's windows than around its baseline's" in row["note"]
        assert (
            "(a fixed Python loop: 16.5 vs 12.0 ms, +38%)" in row["note"] and "flagged in the newest 2" in row["note"]
        )
    same_cpu = replace(base, points=tuple(replace(p, cpu_loop_ms=12.0) for p in base.points))
    row = judge_run({"id": 9}, [same_cpu], Params(), metrics=["samples_per_s"]).rows.iloc[0]
    assert row["verdict"] == "regression" and "CPU" not in row["note"]
    row = judge_run({"id": 9}, [slow_cpu], Params(), metrics=["peak_mem_mb"]).rows.iloc[0]
    assert "CPU" not in row["note"]


@pytest.mark.parametrize("key, value", [("window", 0), ("consecutive", 0), ("window", 1.5)])
def test_params_are_checked(key: str, value: Any) -> None:
    with pytest.raises(BadInput, match=f"--{key}"):
        Params(**{key: value})
