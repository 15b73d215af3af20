"""The verdict rules of `gpubench verify` (bench/verify/verdict.py) on synthetic measurements."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.verify.verdict import ALPHA, Effect, Measurement, judge, ratio

TRIALS = 300


def binomial_ceiling(n: int, p: float, sigmas: float = 4.0) -> float:
    """An upper bound on the count of a Binomial(n, p) that it passes with a chance far below 1e-4."""
    return n * p + sigmas * math.sqrt(n * p * (1 - p)) + 1


@settings(max_examples=25)
@given(
    claimed=st.floats(0.2, 5.0),
    direction=st.sampled_from(["higher", "lower", "equal"]),
    tolerance=st.floats(0.0, 30.0),
    where=st.floats(0.0, 1.0),  # where the true effect lies inside the region
    noise=st.floats(0.005, 0.3),  # the repeats' spread (about their CV)
    repeats=st.integers(2, 8),
    seed=st.integers(0, 2**31),
)
def test_a_true_effect_inside_the_tolerance_is_rarely_called_does_not_hold(
    claimed: float, direction: str, tolerance: float, where: float, noise: float, repeats: int, seed: int
) -> None:
    effect = Effect(claimed, direction, tolerance)
    low, high = effect.region()
    high = min(high, low * 4 if direction == "higher" else high)
    low = max(low, high / 4) if direction == "lower" else low
    true = math.exp(math.log(low) + where * (math.log(high) - math.log(low)))
    rng = np.random.default_rng(seed)
    wrong = 0
    for _ in range(TRIALS):
        ref = 100 * np.exp(rng.normal(0, noise, repeats))
        new = 100 * true * np.exp(rng.normal(0, noise, repeats))
        wrong += judge(effect, ratio(list(ref), list(new))).verdict == "does not hold"
    assert wrong <= binomial_ceiling(TRIALS, ALPHA), (wrong, true, effect)


def test_an_effect_far_outside_the_tolerance_does_not_hold_with_few_repeats() -> None:
    rng = np.random.default_rng(1)
    effect = Effect(2.1, "higher", 10)
    held = [
        judge(effect, ratio(list(100 * np.exp(rng.normal(0, 0.02, 3))), list(131 * np.exp(rng.normal(0, 0.02, 3)))))
        for _ in range(50)
    ]
    assert all(v.verdict == "does not hold" for v in held)


def test_each_rule_on_exact_figures() -> None:
    assert judge(Effect(16, "equal", 5), Measurement.exact(16.0)).verdict == "holds"
    assert judge(Effect(16, "equal", 5), Measurement.exact(18.0)).verdict == "does not hold"
    assert judge(Effect(2.0, "higher", 10), Measurement.exact(3.0)).verdict == "holds"  # beyond, the claimed way
    assert judge(Effect(0.4, "lower", 10), Measurement.exact(0.2)).verdict == "holds"
    assert judge(Effect(0.4, "lower", 10), Measurement.exact(0.45)).verdict == "does not hold"
    assert Effect(2.0, "higher", 10).region() == (1.8, math.inf)


def test_an_interval_across_an_edge_is_inconclusive_and_says_the_repeats_that_would_decide() -> None:
    m = ratio([100, 105, 95], [190, 200, 180])  # about 1.9x, its interval across 1.8
    v = judge(Effect(2.0, "higher", 10), m)
    assert v.verdict == "inconclusive" and m.low < 1.8 < m.high
    assert v.repeats_needed is not None and v.repeats_needed > 3
    assert f"about {v.repeats_needed} repeats a side would decide it" in v.why


def test_one_repeat_a_side_gives_no_interval_and_asks_for_more() -> None:
    m = ratio([100], [300])
    assert math.isnan(m.low) and math.isclose(m.value, 3.0)
    v = judge(Effect(2.0, "higher", 10), m)
    assert (v.verdict, v.repeats_needed) == ("inconclusive", None)
    assert "--repeats 3" in v.why


def test_the_ratio_is_that_of_the_geometric_means() -> None:
    m = ratio([1, 4], [2, 8])
    assert math.isclose(m.value, 2.0) and m.low < 2.0 < m.high
