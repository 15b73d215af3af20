"""History's judgement where a wrong operator would go unseen (make mutation): a metric first
measured at the judged night, the window and its median, the threshold's edge both ways, the test
that confirms a flag, the streak and the young series, failures, and the shown columns."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

import pytest

from bench.compare.comparison import Thresholds
from bench.history.check import (
    MIN_NOISE_NIGHTS,
    Mark,
    Params,
    Point,
    Series,
    Step,
    judge_run,
    marks,
    streak,
    verdict_of,
)

T0 = datetime(2026, 11, 1, 2, 0)


def point(run_id: int, values: dict[str, float | None], status: str = "ok", n: int = 3) -> Point:
    repeats = {k: tuple([v] * n) if v is not None else () for k, v in values.items()}
    return Point(run_id, T0 + timedelta(days=run_id), status, values, repeats)


def series(points: list[Point], steps: tuple[Step, ...] = ()) -> Series:
    return Series("k" * 16, "bf16", "NVIDIA H200", "bert-large", {}, tuple(points), steps)


def rows(s: Series, params: Params | None = None, run_id: int | None = None) -> dict[str, dict[str, Any]]:
    run = {"id": run_id or s.points[-1].run_id, "gpu_model": "NVIDIA H200"}
    result = judge_run(run, [s], params or Params(), earlier_gpus=["NVIDIA H200"])
    return {row["metric"]: row for row in result.rows.to_dict("records")}


def speeds(*nights: float | None, energy: list[float | None] | None = None) -> Series:
    pts = []
    for i, v in enumerate(nights):
        values: dict[str, float | None] = {"samples_per_s": v}
        if energy is not None:
            values["energy_per_sample_j"] = energy[i]
        pts.append(point(i + 1, values))
    return series(pts)


def test_a_metric_first_measured_at_the_judged_night_gets_a_verdict() -> None:
    s = speeds(100.0, 100.0, 100.0, energy=[None, None, 2.0])
    got = rows(s)
    assert got["energy_per_sample_j"]["verdict"] == "no baseline"
    assert got["energy_per_sample_j"]["value"] == 2.0 and got["samples_per_s"]["verdict"] == "unchanged"
    never = rows(speeds(100.0, 100.0, energy=[None, None]))
    assert "energy_per_sample_j" not in never  # never measured: no row
    earlier = rows(speeds(100.0, 100.0, 100.0, energy=[None, 2.0, 2.0]), run_id=2)
    assert earlier["energy_per_sample_j"]["verdict"] == "no baseline"


def test_the_baseline_is_the_median_of_the_last_window_clean_nights() -> None:
    s = speeds(50.0, 100.0, 104.0, 98.0, 101.0)
    last = marks(s, "samples_per_s", Params(window=3))[-1]
    assert last.baseline == 100.0 and last.baseline_n == 3 and last.change_pct == pytest.approx(1.0)
    one = marks(s, "samples_per_s", Params(window=1))[-1]
    assert one.baseline == 104.0 and one.baseline_n == 1  # 98 was beyond 104 by 5.8%: out of the baseline


def test_the_threshold_edge_both_ways() -> None:
    within = marks(speeds(100.0, 100.0, 95.0), "samples_per_s", Params())[-1]
    assert within.flag == "within" and within.threshold_pct == 5.0 and within.change_pct == -5.0
    beyond = marks(speeds(100.0, 100.0, 100.0, 94.9), "samples_per_s", Params())[-1]
    assert beyond.flag == "beyond" and beyond.young
    assert beyond.p_value == pytest.approx(0.05) and beyond.note == ""
    better = marks(speeds(100.0, 100.0, 105.1), "samples_per_s", Params())[-1]
    assert better.flag == "improvement"
    mem = series([point(i + 1, {"peak_mem_mb": v}) for i, v in enumerate([1000.0, 1000.0, 1021.0])])
    assert marks(mem, "peak_mem_mb", Params())[-1].flag == "beyond"
    mem_ok = series([point(i + 1, {"peak_mem_mb": v}) for i, v in enumerate([1000.0, 1000.0, 1020.0])])
    assert marks(mem_ok, "peak_mem_mb", Params())[-1].flag == "within"


def test_few_repeats_or_nights_are_judged_by_the_threshold_alone() -> None:
    s = series(
        [point(1, {"samples_per_s": 100.0}), point(2, {"samples_per_s": 100.0}), point(3, {"samples_per_s": 80.0}, n=2)]
    )
    last = marks(s, "samples_per_s", Params())[-1]
    assert last.flag == "beyond" and last.p_value is None and last.note.startswith("threshold only: fewer than 3")
    two = series([point(1, {"samples_per_s": 100.0}), point(2, {"samples_per_s": 80.0})])
    assert marks(two, "samples_per_s", Params())[-1].p_value is None


def test_a_flagged_night_stays_out_of_later_baselines_and_a_recovery_is_named() -> None:
    s = speeds(100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 80.0, 80.0, 100.0)
    ms = marks(s, "samples_per_s", Params())
    assert [m.flag for m in ms[-3:]] == ["beyond", "beyond", "within"]
    assert ms[-2].baseline == 100.0  # the first 80 is not its baseline
    assert streak(ms[:-1]) == 2 and streak(ms) == 0
    verdict, note = verdict_of(ms, "samples_per_s", Params())
    assert verdict == "unchanged" and note == "recovered: back within the threshold after 2 flagged runs"
    verdict, note = verdict_of(ms[:-1], "samples_per_s", Params())
    assert verdict == "regression" and note.endswith("flagged in the newest 2 runs")
    verdict, note = verdict_of(ms[:-2], "samples_per_s", Params())
    assert verdict == "watch" and note.startswith("flagged in the newest 1 of the 2 runs")


def test_a_young_series_only_warns_and_does_not_count_in_the_streak() -> None:
    young = [Mark(1, "m", "beyond", young=True), Mark(2, "m", "beyond", young=True)]
    assert streak(young) == 0
    verdict, note = verdict_of(young, "m", Params())
    assert verdict == "watch" and f"first {MIN_NOISE_NIGHTS} runs only warn" in note
    old = [Mark(1, "m", "beyond", young=True), Mark(2, "m", "beyond"), Mark(3, "m", "drift")]
    assert streak(old) == 2 and verdict_of(old, "m", Params())[0] == "regression"
    assert verdict_of(old, "m", Params(consecutive=3))[0] == "watch"


def test_failures_and_an_accepted_step() -> None:
    pts = [point(1, {"samples_per_s": 100.0}), point(2, {"samples_per_s": None}, status="oom")]
    got = rows(series(pts))
    assert list(got) == ["status"] and got["status"]["verdict"] == "watch"
    assert got["status"]["note"].endswith("; oom; ok before")
    assert math.isnan(got["status"]["threshold_pct"]) and got["status"]["repeats_n"] == 0
    again = rows(series([*pts, point(3, {"samples_per_s": None}, status="oom")]))
    assert again["status"]["verdict"] == "new failure"
    never = rows(series([point(1, {}, status="oom"), point(2, {}, status="oom")]))
    assert never["status"]["verdict"] == "still failing"
    accepted = series([*pts, point(3, {"samples_per_s": None}, status="oom")], steps=(Step(3, None, "known"),))
    assert rows(accepted)["status"]["verdict"] == "accepted"
    step = series(
        [point(1, {"samples_per_s": 100.0}), point(2, {"samples_per_s": 50.0})],
        steps=(Step(2, "samples_per_s", "new GPU"),),
    )
    mark = marks(step, "samples_per_s", Params())[-1]
    assert mark.flag == "accepted" and mark.baseline == 100.0 and mark.note == "accepted: new GPU"


def test_the_row_shows_the_figures_judged() -> None:
    row = rows(speeds(100.0, 102.0, 90.0))["samples_per_s"]
    assert (row["value"], row["baseline"], row["baseline_n"], row["repeats_n"]) == (90.0, 101.0, 2, 3)
    assert row["change_pct"] == pytest.approx(percent(101.0, 90.0), abs=1e-6)
    assert row["streak"] == "0/2" and row["threshold_pct"] == 5.0 and row["verdict"] == "watch"  # young
    first = judge_run({"id": 1}, [speeds(100.0)], Params())
    assert first.rows["verdict"].tolist() == ["no baseline"] and math.isnan(first.rows["baseline"][0])
    assert first.notes == ("run 1 is the first run stored: nothing to judge it against yet",) and first.exit_code == 0


def percent(base: float, new: float) -> float:
    return (new / base - 1) * 100


def test_a_metric_measured_only_after_the_judged_night_has_no_row() -> None:
    got = rows(speeds(100.0, 100.0, 100.0, energy=[None, None, 2.0]), run_id=2)
    assert "energy_per_sample_j" not in got and got["samples_per_s"]["verdict"] == "unchanged"


def test_a_mark_without_a_baseline_counts_none() -> None:
    got = rows(speeds(100.0, 100.0, energy=[None, 2.0]))
    assert got["energy_per_sample_j"]["baseline_n"] == 0 and got["samples_per_s"]["baseline_n"] == 1


def test_the_counts_of_the_verdicts() -> None:
    s = speeds(100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 80.0, 80.0)
    result = judge_run({"id": 8}, [s], Params(), earlier_gpus=["x"])
    assert result.counts == {"regression": 1} and result.exit_code == 1


def test_a_run_with_history_in_one_of_its_series_is_judged() -> None:
    new = series([point(8, {"samples_per_s": 100.0})])
    old = speeds(100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0)
    result = judge_run({"id": 8}, [new, old], Params(), earlier_gpus=["x"])
    assert result.notes == () and len(result.rows) == 2


def test_the_newest_accepted_step_starts_the_level() -> None:
    values = [100.0, 50.0, 50.0, 200.0, 200.0, 200.0]
    steps = (Step(2, "samples_per_s", "half"), Step(4, None, "double"))
    s = series([point(i + 1, {"samples_per_s": v}) for i, v in enumerate(values)], steps)
    last = marks(s, "samples_per_s", Params())[-1]
    assert (last.flag, last.baseline, last.baseline_n) == ("within", 200.0, 2)


def test_a_change_is_judged_as_shown_to_6_decimals() -> None:
    last = marks(speeds(100.0, 100.0, 94.9999996), "samples_per_s", Params())[-1]
    assert last.change_pct == -5.0 and last.flag == "within"


def test_a_metric_shown_but_not_judged() -> None:
    s = series([point(i + 1, {"final_loss": v}) for i, v in enumerate([2.0, 9.0])])
    last = marks(s, "final_loss", Params())[-1]
    assert (last.flag, last.baseline, last.change_pct) == ("within", 2.0, 350.0)


def test_a_widened_threshold_is_named_only_where_it_mattered() -> None:
    noisy = [100.0, 106.0, 95.0, 104.0, 98.0, 107.0, 94.0, 103.0]  # about 3.5% night to night
    quiet = marks(speeds(*noisy, 101.0), "samples_per_s", Params())[-1]
    assert quiet.threshold_pct is not None and quiet.threshold_pct > 5.0
    assert abs(quiet.change_pct or 0) <= 5.0 and quiet.flag == "within" and quiet.note == ""
    mattered = marks(speeds(*noisy, 112.0), "samples_per_s", Params())[-1]
    assert mattered.flag == "within" and mattered.note.startswith("threshold ")


def test_a_small_floor_still_tells_an_improvement() -> None:
    params = Params(thresholds=Thresholds(speed_pct=0.1))
    last = marks(speeds(100.0, 100.0, 100.0, 100.5), "samples_per_s", params)[-1]
    assert last.flag == "improvement"


def test_a_p_exactly_at_alpha_confirms(monkeypatch: pytest.MonkeyPatch) -> None:
    import bench.history.check as judge

    monkeypatch.setattr(judge, "mann_whitney_p", lambda own, nights, alternative: 0.05 + 5e-13)
    assert marks(speeds(100.0, 100.0, 100.0, 80.0), "samples_per_s", Params())[-1].flag == "beyond"
    monkeypatch.setattr(judge, "mann_whitney_p", lambda own, nights, alternative: 0.05 + 1.5e-12)
    assert marks(speeds(100.0, 100.0, 100.0, 80.0), "samples_per_s", Params())[-1].flag == "noisy"
