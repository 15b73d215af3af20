"""The steady-state window's rule (bench/worker/window.py): the batch-means interval, the check
points, and why an "auto" or fixed window stops. Pure arithmetic, no torch."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.worker import window
from bench.worker.window import WindowRule, ci_pct


def test_the_interval_is_a_t_interval_over_ten_batch_means() -> None:
    # 20 steps, two a batch: batch means 1.0, 1.1, ..., 1.9
    steps = [1.0 + i // 2 / 10 for i in range(20)]
    means = [1.0 + i / 10 for i in range(10)]
    expected = 2.262 * statistics.stdev(means) / math.sqrt(10) / statistics.mean(means) * 100
    assert ci_pct(steps) == pytest.approx(expected)
    assert ci_pct(steps) == pytest.approx(14.94, abs=0.01)  # by hand: 2.262 x 0.3028 / 3.162 / 1.45


def test_batch_means_absorb_the_spread_of_single_steps() -> None:
    """Alternating 0.8 / 1.2 s steps spread by 20%, but every batch of two means 1.0 s: the mean
    step time is known exactly, and the interval says so."""
    assert ci_pct([0.8, 1.2] * 10) == 0.0


def test_the_oldest_steps_that_do_not_fill_a_batch_are_left_out() -> None:
    assert ci_pct([50.0] * 3 + [1.0] * 20) == 0.0  # 23 steps: the first 3 (nearest the warm-up) dropped
    assert ci_pct([1.0] * 20 + [50.0]) != 0.0  # the newest step always counts


def test_too_few_steps_or_no_time_give_no_interval() -> None:
    assert ci_pct([1.0] * 9) is None
    assert ci_pct([0.0] * 20) is None


def test_auto_decides_at_fixed_window_steps_from_the_minimum_on() -> None:
    rule = WindowRule("auto")
    checks = [n for n in range(1, 41) if rule.is_check_point(n)]
    assert checks == [window.MIN_STEPS + k * window.CHECK_EVERY for k in range(len(checks))]
    assert checks[0] == 10 and checks[:3] == [10, 15, 20]
    assert not any(WindowRule(s).is_check_point(n) for s in ("epoch", 30) for n in range(1, 41))


def test_auto_stops_on_a_narrow_interval_else_at_max_time_else_goes_on() -> None:
    rule = WindowRule("auto")
    steady, noisy = [0.1] * 20, [0.1, 0.1, 0.1, 0.1, 0.5] * 4  # noisy: batch means 0.1, 0.3, 0.1, ...
    assert rule.auto_stop(steady, elapsed_s=2.0) == "ci"
    assert rule.auto_stop(noisy, elapsed_s=2.0) is None
    assert rule.auto_stop(noisy, elapsed_s=window.MAX_S) == "max_time"
    assert rule.auto_stop(steady, elapsed_s=window.MAX_S) == "ci"  # a narrow interval is the reason given


def test_auto_needs_two_steps_a_batch_before_it_trusts_an_interval() -> None:
    """On a GPU the newest steps' events may not have completed at a check point: the interval of the
    steps known so far only counts once there are CI_MIN_STEPS of them."""
    rule = WindowRule("auto")
    assert rule.auto_stop([0.1] * (window.CI_MIN_STEPS - 1), elapsed_s=1.0) is None
    assert rule.auto_stop([0.1] * window.CI_MIN_STEPS, elapsed_s=1.0) == "ci"


def test_a_slow_step_ends_the_window_at_max_time_from_the_first_check_point() -> None:
    """A row at 0.5 s a step has passed MAX_S at its 10th step: it stops there, by time, not by an
    interval of one step a batch."""
    rule = WindowRule("auto")
    assert window.MIN_STEPS * 0.5 >= window.MAX_S
    assert rule.auto_stop([0.5] * window.MIN_STEPS, elapsed_s=window.MIN_STEPS * 0.5) == "max_time"


@given(st.lists(st.floats(min_value=1e-4, max_value=10.0), max_size=19), st.floats(min_value=0.0, max_value=100.0))
def test_fewer_than_ci_min_steps_never_stop_on_the_interval(step_s: list[float], elapsed_s: float) -> None:
    assert len(step_s) < window.CI_MIN_STEPS
    assert WindowRule("auto").auto_stop(step_s, elapsed_s) in (None, "max_time")


def test_a_fixed_window_stops_at_its_step_count_and_epoch_never_does() -> None:
    assert [WindowRule(3).fixed_stop(n) for n in (1, 2, 3)] == [None, None, "steps"]
    assert WindowRule("epoch").fixed_stop(10**6) is None
    assert WindowRule("auto").fixed_stop(10**6) is None  # auto stops only through auto_stop
