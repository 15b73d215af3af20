"""The compare gate's arithmetic where a wrong operator would go unseen (make mutation): a zero
figure (no log of it), the change and its sign, the pooled spread by hand, the t-test's p and its
Holm adjustment across quantities, the detectable change in each direction, and the repeats asked."""

from __future__ import annotations

import math
import statistics

import pytest

from bench.compare.gate import (
    MIN_DF,
    Rule,
    Sample,
    detectable_pct,
    judge,
    noise_limit_pct,
    percent_change,
    pooled_spread,
    repeats_needed,
)
from bench.stats import t_quantile, t_sf

SPEED = Rule(floor_pct=5.0, direction=1)
MEMORY = Rule(floor_pct=2.0, direction=-1)


@pytest.mark.parametrize(
    "base, new",
    [
        ([0.0, 0.0, 0.0], [1.0, 2.0, 3.0]),
        ([1.0, 2.0, 3.0], [0.0, 0.0, 0.0]),
        ([0.0, 1.0, 2.0], [1.0, 2.0, 3.0]),
        ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0]),
        ([5.0, 5.0, 5.0], [0.0, 5.0, 5.0]),
        ([-1.0, 1.0, 2.0], [1.0, 2.0, 3.0]),
        ([0.0, 1.0, 2.0, 3.0], [1.0, 2.0, 3.0]),  # spread enough to test without the zero
        ([5.0, 5.1, 5.2, 5.3], [0.0, 5.0, 5.1, 5.2]),
    ],
)
def test_a_zero_or_negative_figure_is_judged_by_the_floor_never_a_log(base: list[float], new: list[float]) -> None:
    (j,) = judge([Sample(base, new)], SPEED)
    assert not j.tested and math.isnan(j.p_value) and math.isnan(j.detectable_pct)
    assert j.verdict in ("regression", "improvement", "unchanged")


def test_a_move_from_zero_is_infinite_and_to_zero_is_minus_100() -> None:
    assert percent_change(0.0, 0.0) == 0.0
    assert percent_change(0.0, 3.0) == math.inf and percent_change(0.0, -3.0) == -math.inf
    assert percent_change(4.0, 0.0) == -100.0 and percent_change(4.0, 5.0) == 25.0
    (j,) = judge([Sample([0.0, 0.0, 0.0], [1.0, 2.0, 3.0])], SPEED)
    assert j.change_pct == math.inf and j.verdict == "improvement"
    (j,) = judge([Sample([1.0, 2.0, 3.0], [0.0, 0.0, 0.0])], SPEED)
    assert j.change_pct == -100.0 and j.verdict == "regression"


def test_the_pooled_spread_by_hand() -> None:
    a, b = [10.0, 11.0, 12.0, 0.0], [20.0, 22.0, math.inf]
    la, lb = [math.log(v) for v in a[:3]], [math.log(v) for v in b[:2]]
    squares = sum((v - statistics.fmean(la)) ** 2 for v in la) + sum((v - statistics.fmean(lb)) ** 2 for v in lb)
    spread, df = pooled_spread([a, b, [7.0]])
    assert df == 3 and spread == pytest.approx(math.sqrt(squares / 3), rel=1e-12)
    assert pooled_spread([[1.0], [2.0]]) == (pytest.approx(math.nan, nan_ok=True), 0)


def test_the_t_test_by_hand() -> None:
    base, new = [100.0, 102.0, 98.0], [90.0, 91.0, 89.5]
    spread, df = pooled_spread([base, new])
    se = spread * math.sqrt(1 / 3 + 1 / 3)
    shift = statistics.fmean(map(math.log, new)) - statistics.fmean(map(math.log, base))
    (j,) = judge([Sample(base, new)], SPEED)
    assert j.df == df == MIN_DF and j.spread_pct == pytest.approx(100 * spread)
    assert j.change_pct == pytest.approx(-10.0) and j.tested
    assert j.p_value == pytest.approx(t_sf(-shift / se, df), rel=1e-12)  # one-sided, toward the change
    assert j.p_holm == pytest.approx(j.p_value) and j.verdict == "regression"
    level = 0.05
    limit = 100 * (1 - math.exp(-(t_quantile(1 - level, df) + t_quantile(0.8, df)) * se))
    assert j.detectable_pct == pytest.approx(max(5.0, limit), rel=1e-9)


def test_holm_and_the_quantities_sharing_alpha() -> None:
    samples = [Sample([100.0, 101.0, 99.0], [93.0, 94.0, 92.5]), Sample([100.0, 101.0, 99.0], [90.0, 110.0, 100.0])]
    one = judge(samples, SPEED)
    two = judge(samples, Rule(5.0, 1, quantities=2))
    assert two[0].p_holm == pytest.approx(min(1.0, 2 * one[0].p_holm))
    assert one[0].p_holm == pytest.approx(min(1.0, 2 * one[0].p_value))  # two tested: Holm's factor 2 for the smallest
    loose, strict = judge(samples, Rule(0.0, 1)), judge(samples, Rule(0.0, 1, quantities=2))
    assert strict[0].detectable_pct > loose[0].detectable_pct  # a stricter level: a larger change to find
    se = loose[0].spread_pct / 100 * math.sqrt(2 / 3)
    assert loose[0].detectable_pct == pytest.approx(noise_limit_pct(loose[0].spread_pct / 100, 4, se, 2, SPEED))


def test_identical_repeats_on_each_side_decide_by_the_shift() -> None:
    (up,) = judge([Sample([100.0] * 3, [110.0] * 3)], SPEED)
    assert up.p_value == 0.0 and up.verdict == "improvement" and up.tested
    (down,) = judge([Sample([100.0] * 3, [90.0] * 3)], SPEED)
    assert down.p_value == 0.0 and down.verdict == "regression"
    (same,) = judge([Sample([100.0] * 3, [100.0] * 3)], SPEED)
    assert same.p_value == 1.0 and same.verdict == "unchanged"


def test_a_significant_change_within_the_floor_or_a_noisy_one_beyond() -> None:
    (small,) = judge([Sample([100.0, 100.1, 99.9], [96.0, 96.1, 95.9])], SPEED)
    assert small.verdict == "unchanged" and small.p_holm < 0.05
    (noisy,) = judge([Sample([100.0, 130.0, 80.0], [90.0, 60.0, 110.0])], SPEED)
    assert noisy.verdict == "noisy" and noisy.p_holm > 0.05
    (mem,) = judge([Sample([1000.0, 1001.0, 999.0], [1100.0, 1101.0, 1099.0])], MEMORY)
    assert mem.verdict == "regression"


def test_the_detectable_change_in_each_direction() -> None:
    se = 0.02
    shift = (t_quantile(1 - 0.05 / 3, 4) + t_quantile(0.8, 4)) * se
    assert noise_limit_pct(0.02, 4, se, 3, SPEED) == pytest.approx(100 * (1 - math.exp(-shift)))
    assert noise_limit_pct(0.02, 4, se, 3, MEMORY) == pytest.approx(100 * math.expm1(shift))
    assert noise_limit_pct(0.02, 4, se, 0, SPEED) == noise_limit_pct(0.02, 4, se, 1, SPEED)
    assert math.isnan(noise_limit_pct(math.nan, 4, se, 1, SPEED)) and math.isnan(noise_limit_pct(0.02, 0, se, 1, SPEED))
    assert not math.isnan(noise_limit_pct(0.02, 1, se, 1, SPEED))
    assert detectable_pct(0.0, 4, 0.0, 1, SPEED) == 5.0


def test_the_repeats_needed() -> None:
    n = repeats_needed(0.02, 5.0, 1, SPEED)
    assert n is not None and n >= 3
    assert noise_limit_pct(0.02, 2 * (n - 1), 0.02 * math.sqrt(2 / n), 1, SPEED) <= 5.0
    assert noise_limit_pct(0.02, 2 * (n - 2), 0.02 * math.sqrt(2 / (n - 1)), 1, SPEED) > 5.0 or n == 3
    assert repeats_needed(0.0001, 5.0, 1, SPEED) == 3
    assert repeats_needed(math.nan, 5.0, 1, SPEED) is None
    assert repeats_needed(1.0, 0.1, 1, SPEED) is None
    with pytest.raises(ValueError):
        judge([Sample([], [1.0])], SPEED)


def test_the_test_looks_toward_the_change_shown() -> None:
    base, new = [100.0, 100.1, 99.9], [100.5, 100.6, 100.4]  # +0.5%: within 1%, toward a rise
    (j,) = judge([Sample(base, new)], SPEED)
    assert j.change_pct == pytest.approx(0.5) and j.p_value < 0.01
    flat_base, flat_new = [100.0, 100.0, 100.0], [90.0, 100.0, 110.0]  # no change shown: a fall is asked
    spread, df = pooled_spread([flat_base, flat_new])
    shift = statistics.fmean(map(math.log, flat_new)) - statistics.fmean(map(math.log, flat_base))
    (flat,) = judge([Sample(flat_base, flat_new)], SPEED)
    assert flat.change_pct == 0.0 and flat.p_value == pytest.approx(t_sf(-shift / (spread * math.sqrt(2 / 3)), df))


def test_an_adjusted_p_exactly_at_alpha_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    import bench.compare.gate as gate

    monkeypatch.setattr(gate, "t_sf", lambda t, df: 0.025)  # Holm: 2 x 0.025 = 0.05 for both
    samples = [Sample([100.0, 101.0, 99.0], [90.0, 91.0, 89.0])] * 2
    assert [(j.p_holm, j.verdict) for j in judge(samples, SPEED)] == [(0.05, "regression")] * 2


def test_figures_below_one_count_in_the_spread() -> None:
    logs = [math.log(v) for v in (0.5, 0.6, 0.7)]
    spread, df = pooled_spread([[0.5, 0.6, 0.7]])
    assert df == 2 and spread == pytest.approx(statistics.stdev(logs), rel=1e-12)


def test_repeats_needed_stops_at_50() -> None:
    def limit(spread: float, n: int) -> float:
        return noise_limit_pct(spread, 2 * (n - 1), spread * math.sqrt(2 / n), 1, SPEED)

    low, high = 0.01, 1.0
    for _ in range(60):  # the spread at which 51 repeats would just do
        mid = (low + high) / 2
        low, high = (mid, high) if limit(mid, 51) <= 5.0 else (low, mid)
    assert limit(low, 50) > 5.0 >= limit(low, 51)
    assert repeats_needed(low, 5.0, 1, SPEED) is None
    assert repeats_needed(low * 0.98, 5.0, 1, SPEED) == 50 or repeats_needed(low * 0.98, 5.0, 1, SPEED) == 49
