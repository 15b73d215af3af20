"""bench/compare/gate.py: one quantity of every scenario judged at once (floor, t-test, Holm), what
each judgement could detect, and the repeats a target needs."""

from __future__ import annotations

import math

import pytest

from bench.compare.gate import Rule, Sample, judge, pooled_spread, repeats_needed

SPEED = Rule(floor_pct=5.0, direction=+1)
MEMORY = Rule(floor_pct=2.0, direction=-1)
TIGHT = [100.0, 100.5, 99.5]


def test_pooled_spread_is_the_sd_of_the_logs_around_each_sides_mean() -> None:
    spread, df = pooled_spread([[100.0, 100.0], [50.0, 50.0 * math.e**0.2]])
    assert df == 2
    assert spread == pytest.approx(math.sqrt(0.02 / 2))  # squares 0 and 2 x 0.1^2 over 2 df
    none, zero = pooled_spread([[1.0], [2.0]])  # one value a side: no spread
    assert math.isnan(none) and zero == 0


def test_a_tight_slowdown_is_a_regression_and_a_tight_growth_of_memory_too() -> None:
    (slow,) = judge([Sample(TIGHT, [90.0, 90.4, 89.6])], SPEED)
    assert (slow.verdict, slow.tested, slow.change_pct) == ("regression", True, -10.0)
    (grown,) = judge([Sample([1000.0] * 3, [1050.0] * 3)], MEMORY)
    assert grown.verdict == "regression" and grown.p_value == 0.0  # identical repeats: any shift is real
    assert grown.detectable_pct == 2.0


def test_the_direction_decides_regression_or_improvement() -> None:
    (faster,) = judge([Sample([90.0, 90.4, 89.6], TIGHT)], SPEED)
    (smaller,) = judge([Sample([1050.0] * 3, [1000.0] * 3)], MEMORY)
    assert faster.verdict == smaller.verdict == "improvement"


def test_exactly_at_the_floor_is_unchanged_and_beyond_needs_the_test() -> None:
    (at,) = judge([Sample(TIGHT, [95.0, 95.5, 94.5])], SPEED)
    assert at.change_pct == -5.0 and at.verdict == "unchanged"
    (loud,) = judge([Sample([100.0, 80.0, 120.0], [90.0, 72.0, 108.0])], SPEED)
    assert loud.verdict == "noisy" and loud.p_holm > 0.05


def test_too_few_repeats_leave_the_floor_alone_to_decide() -> None:
    (once,) = judge([Sample([100.0], [90.0])], SPEED)
    assert (once.verdict, once.tested) == ("regression", False)
    assert math.isnan(once.p_value) and math.isnan(once.p_holm) and math.isnan(once.detectable_pct)
    (two,) = judge([Sample([100.0, 100.4], [90.0, 72.0, 108.0])], SPEED)  # 3 df: still too few
    assert not two.tested and two.df == 3


def test_holm_adjusts_over_the_tested_samples_only() -> None:
    slow = Sample([100.0, 102.0, 98.0], [92.0, 95.0, 89.0])
    (alone,) = judge([slow], SPEED)
    judged = judge([slow, Sample([100.0], [100.0]), *[Sample(TIGHT, TIGHT)] * 3], SPEED)
    assert judged[0].p_value == alone.p_value
    assert judged[0].p_holm == pytest.approx(4 * alone.p_value)  # 4 tested; the single repeat is not
    shared = judge([slow], Rule(5.0, +1, quantities=2))[0]
    assert shared.p_holm == pytest.approx(2 * alone.p_value)  # two quantities share alpha


def test_repeats_needed_grow_with_the_spread_and_the_family() -> None:
    assert repeats_needed(0.01, 5.0, 13, SPEED) == 3
    assert repeats_needed(0.03, 10.0, 13, SPEED) == 4
    assert repeats_needed(0.03, 10.0, 1, SPEED) == 3
    assert repeats_needed(0.03, 5.0, 13, SPEED) == 11
    assert repeats_needed(0.2, 5.0, 13, SPEED) is None  # more than 50
    assert repeats_needed(math.nan, 5.0, 13, SPEED) is None
