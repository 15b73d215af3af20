"""bench.history.check: baselines, thresholds, confirmation by repeats, consecutive runs, accepted steps."""

from __future__ import annotations

import math
import random
import re
import statistics
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from bench.compare.comparison import Thresholds
from bench.errors import BadInput, IncomparableRuns
from bench.history.check import (
    ACCEPTED,
    BEYOND,
    CHECK_COLUMNS,
    DRIFT,
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
    verdict_of,
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
    s = series([[100.0]] * 5 + [[90.0], [90.0]])
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


# -- nights as the unit: regressions stay red, outlier nights, drifts, false alarms ----------------
def noisy_nights(levels: list[float], *, night_pct: float, repeat_pct: float, seed: int) -> list[list[float]]:
    """One night per level: an offset for the night (night_pct, a standard deviation in %), then
    three repeats around it (repeat_pct); fixed seed, so every run of the test sees the same nights."""
    rng = random.Random(seed)
    out = []
    for level in levels:
        offset = rng.gauss(0, night_pct / 100)
        out.append([level * (1 + offset + rng.gauss(0, repeat_pct / 100)) for _ in range(3)])
    return out


def gate_verdicts(s: Series, params: Params | None = None) -> list[str]:
    """The verdict `history check` gives each night on samples/s, judged as the newest run then."""
    params = params or Params()
    judged = marks(s, "samples_per_s", params)
    return [verdict_of(judged[: j + 1], "samples_per_s", params)[0] for j in range(len(judged))]


def test_a_10_percent_step_stays_red_for_15_nights_until_it_is_accepted() -> None:
    """30 nights, bf16 10% slower from night 16: every night from the 17th is a regression (the slow
    nights never enter the baseline), until the 30th is accepted; the night after that is judged
    against the new level."""
    levels = [100.0] * 15 + [90.0] * 15
    nights = noisy_nights(levels, night_pct=1.0, repeat_pct=1.0, seed=3)
    red = gate_verdicts(series(nights))
    assert red[:15] == ["no baseline"] + ["unchanged"] * 14
    assert red[15] == "watch" and red[16:] == ["regression"] * 14
    row = verdicts(series(nights))["samples_per_s"]
    assert row["baseline"] == pytest.approx(100.0, abs=1.5) and row["streak"] == "15/2"
    accepted = series([*nights, [90.2, 89.9, 90.1]], steps=(Step(30, None, "slower bf16 kernels, on purpose"),))
    after = gate_verdicts(accepted)
    assert after[16:29] == ["regression"] * 13  # the red nights stay on record
    assert after[29:] == ["accepted", "unchanged"]
    assert verdicts(accepted)["samples_per_s"]["baseline"] == pytest.approx(statistics.median(nights[29]))


def test_a_night_back_within_the_threshold_of_the_old_level_is_a_recovery() -> None:
    nights = [*STEADY, *[[90.0, 90.2, 89.9]] * 4, [99.8, 100.1, 100.0], [90.1, 90.0, 89.8]]
    red = ["regression"] * 3
    assert gate_verdicts(series(nights))[6:] == ["watch", *red, "unchanged", "watch"]
    row = verdicts(series(nights[:11]))["samples_per_s"]
    assert row["note"] == "recovered: back within the threshold after 4 flagged runs"
    assert verdicts(series(nights))["samples_per_s"]["baseline"] == pytest.approx(100.0)


@pytest.mark.parametrize("outlier", [[33.0, 33.4, 33.2], [100.1, 33.0, 99.9]], ids=["night", "repeat"])
def test_a_night_of_3x_slower_outliers_does_not_hide_a_later_regression(outlier: list[float]) -> None:
    """A night 3x slower (all its repeats, or one of them), then steady nights, then a real 10%
    slow-down: the outlier night weighs as one night (its median) and, when beyond the threshold,
    stays out of the baseline; the slow-down fails the gate on its second night."""
    steady = noisy_nights([100.0] * 20, night_pct=1.0, repeat_pct=1.0, seed=5)
    slow = noisy_nights([90.0] * 2, night_pct=1.0, repeat_pct=1.0, seed=6)
    s = series([*steady[:12], outlier, *steady[12:], *slow])
    judged = gate_verdicts(s)
    assert judged[12] == ("watch" if outlier[0] < 50 else "unchanged")
    assert judged[13:21] == ["unchanged"] * 8
    assert judged[21:] == ["watch", "regression"]
    row = verdicts(s)["samples_per_s"]
    assert row["baseline"] == pytest.approx(100.0, abs=1.5) and row["p_value"] <= 0.05


def test_a_drift_of_1_5_percent_a_night_is_flagged_and_fails_within_10_nights() -> None:
    """20 steady nights, then 1.5% slower every night (1% noise a night and a repeat): in 20 such
    histories the gate fails within 10 nights of the drift's start, by the frozen baseline or the
    drift check. At 1% a night (inside the 5% threshold against a rolling baseline for ever) the
    drift check is what catches it within 10 nights."""
    for rate, params in ((1.5, Params()), (1.0, Params())):
        failed_after = []
        for seed in range(20):
            levels = [100.0] * 20 + [100.0 * (1 - rate / 100 * k) for k in range(1, 16)]
            judged = gate_verdicts(series(noisy_nights(levels, night_pct=1.0, repeat_pct=1.0, seed=seed)), params)
            assert "regression" not in judged[:20]
            failed_after.append(next(k for k in range(1, 16) if judged[19 + k] == "regression"))
        assert max(failed_after) <= 10, (rate, failed_after)
    levels = [100.0] * 20 + [100.0 * (1 - 0.01 * k) for k in range(1, 11)]
    histories = [series(noisy_nights(levels, night_pct=1.0, repeat_pct=1.0, seed=seed)) for seed in range(20)]
    without = [gate_verdicts(s, Params(drift_nights=0)) for s in histories]
    assert sum("regression" in v[20:] for v in without) < 20  # the drift check is doing work


def test_the_drift_check_says_what_it_found() -> None:
    """1% slower a night from night 13: on night 17 the median of the last 7 nights is only 4% above
    it (inside the threshold), but the newest 10 nights fall steadily: flagged as a drift."""
    levels = [100.0] * 12 + [100.0 - 1.0 * k for k in range(1, 11)]
    judged = marks(series([[v, v, v] for v in levels]), "samples_per_s", Params())
    first = next(i for i, m in enumerate(judged) if m.flag == DRIFT)
    assert first == 16 and judged[first].change_pct == pytest.approx(-4.040404)
    assert judged[first].note == "drift: -0.61% a run over the newest 10 runs (-5.5% in all; Mann-Kendall p = 0.000473)"
    assert [m.flag for m in judged[first + 1 :]] == [BEYOND] * 5  # out of the baseline: the level stays


def test_the_false_alarm_rate_of_no_change_nights_is_low() -> None:
    """A/A: 40 histories of 30 unchanged nights of a launch-bound row (4% noise a night, 6% a
    repeat) and 40 of a compute-bound one (1% and 1%). With the threshold widened to 3x the measured
    night-to-night noise, at most 1% of nights fail (measured over 800 histories each: 0.3% and
    0%); a fixed 5% threshold fails many more, so this test can tell the two apart."""

    def failing(params: Params, night_pct: float, repeat_pct: float) -> float:
        count = 0
        for seed in range(40):
            nights = noisy_nights([100.0] * 30, night_pct=night_pct, repeat_pct=repeat_pct, seed=seed)
            judged = gate_verdicts(series(nights), params)
            count += sum(v == "regression" for v in judged)
        return count / (40 * 30)

    assert failing(Params(), 4.0, 6.0) <= 0.01
    assert failing(Params(), 1.0, 1.0) == 0.0
    assert failing(Params(noise_factor=0), 4.0, 6.0) >= 0.05


def test_a_young_series_flags_but_cannot_fail_until_its_noise_is_measured() -> None:
    """Its first 5 runs cannot tell its noise: a slow night among them is flagged (watch) but does not
    count; from the 6th run on, 2 flagged runs in a row fail the gate."""
    nights = [[100.0, 100.1, 99.9]] * 2 + [[80.0, 80.1, 79.9]] * 6
    assert gate_verdicts(series(nights)) == ["no baseline", "unchanged", *["watch"] * 4, "regression", "regression"]
    row = verdicts(series(nights[:4]))["samples_per_s"]
    assert row["verdict"] == "watch" and row["streak"] == "0/2"
    assert row["note"].endswith("a series' first 5 runs only warn: its noise is unknown")


def test_the_threshold_widens_with_the_series_noise_and_says_so() -> None:
    """A row whose nights move by about 4% (a launch-bound one): a night 9% down is within its noise;
    with the threshold alone (noise factor 0) it would be flagged."""
    nights = [*noisy_nights([100.0] * 12, night_pct=4.0, repeat_pct=1.0, seed=8), [91.0, 91.2, 90.9]]
    row = verdicts(series(nights))["samples_per_s"]
    assert row["threshold_pct"] > 9.0 and row["verdict"] == "unchanged"
    assert verdicts(series(nights), Params(noise_factor=0))["samples_per_s"]["verdict"] in ("watch", "regression")
    widened = r"threshold \d+\.\d%: 3 x this series' night-to-night noise \(\d\.\d% over 12 runs\)"
    assert re.fullmatch(widened, row["note"])


def test_a_failure_stays_new_until_the_scenario_runs_ok_again_or_is_accepted() -> None:
    statuses = ["ok"] * 6 + ["oom"] * 12
    s = series([*STEADY, *[None] * 12], statuses=statuses)
    assert verdicts(s)["status"]["verdict"] == "new failure"  # 12 nights on, still red
    accepted = replace(s, steps=(Step(7, None, "bigger model, oom expected"),))
    assert verdicts(accepted)["status"]["verdict"] == "still failing"
