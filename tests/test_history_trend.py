"""bench.history.trend: the night-to-night noise, the Theil-Sen slope and the Mann-Kendall test."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import pytest

from bench.history.trend import (
    drift,
    kendall_s,
    mad,
    mann_kendall_p,
    night_noise_pct,
    theil_sen_slope,
    widened_threshold,
)


def test_mann_kendall_p_is_exact_against_every_order_of_the_nights() -> None:
    """For 6 nights, p is the share of the 720 orders whose S is at least as extreme."""
    values = [5.0, 3.0, 4.0, 1.0, 2.0, 0.5]  # mostly falling
    orders = list(itertools.permutations(range(6)))
    s = kendall_s(values)
    falling = Fraction(sum(kendall_s(o) <= s for o in orders), len(orders))
    rising = Fraction(sum(kendall_s(o) >= s for o in orders), len(orders))
    assert mann_kendall_p(values, -1) == pytest.approx(float(falling))
    assert mann_kendall_p(values, +1) == pytest.approx(float(rising))
    assert mann_kendall_p([3.0, 2.0, 1.0], -1) == pytest.approx(1 / 6)
    assert mann_kendall_p([float(10 - k) for k in range(10)], -1) == pytest.approx(1 / math.factorial(10))
    with pytest.raises(ValueError, match="direction"):
        mann_kendall_p(values, 0)


def test_theil_sen_slope_ignores_an_outlier_night() -> None:
    line = [100.0 - 1.5 * k for k in range(10)]
    line[4] = 30.0  # one night 3x slower
    assert theil_sen_slope(line) == pytest.approx(-1.5)


def test_night_noise_is_relative_and_blind_to_a_drift_and_a_step() -> None:
    rng = random.Random(1)
    noisy = [100.0 * (1 + rng.gauss(0, 0.03)) for _ in range(400)]
    assert night_noise_pct(noisy) == pytest.approx(3.0, rel=0.15)
    assert night_noise_pct([2 * v for v in noisy]) == pytest.approx(night_noise_pct(noisy))  # in % of the level
    drift = [100.0 * 0.985**k for k in range(20)]
    assert night_noise_pct(drift) == pytest.approx(0.0, abs=1e-9)
    step = [100.0] * 10 + [90.0] * 10
    assert night_noise_pct(step) == 0.0
    assert night_noise_pct([100.0, 101.0, 99.0]) is None
    assert night_noise_pct([100.0, 0.0, 101.0, 99.0]) is None  # a value <= 0 is left out


def test_mad() -> None:
    assert mad([1.0, 2.0, 3.0, 4.0, 100.0]) == 1.0
    assert mad([5.0]) == 0.0
    with pytest.raises(ValueError):
        mad([])


def test_the_threshold_widens_only_where_the_noise_is_larger() -> None:
    steady = [100.0, 101.0, 99.5, 100.5, 99.0, 100.0]
    assert widened_threshold(steady, 5.0, 3.0) == (5.0, None)
    rng = random.Random(2)
    noisy = [100.0 * (1 + rng.gauss(0, 0.05)) for _ in range(30)]
    limit, noise = widened_threshold(noisy, 5.0, 3.0)
    assert noise is not None and limit == pytest.approx(3 * noise) and limit > 5.0
    assert widened_threshold(noisy, 5.0, 0.0) == (5.0, None)


def test_a_drift_is_a_steady_move_beyond_the_threshold_the_bad_way() -> None:
    falling = [100.0 - 1.0 * k for k in range(10)]
    found = drift(falling, 100.0, 5.0, -1, 0.05)
    assert found is not None and found.slope_pct == pytest.approx(-1.0) and found.total_pct == pytest.approx(-9.0)
    assert found.p_value == pytest.approx(1 / math.factorial(10))
    assert drift(falling, 100.0, 10.0, -1, 0.05) is None  # 9% in all: inside a 10% threshold
    assert drift(falling, 100.0, 5.0, +1, 0.05) is None  # falling is not a regression of a lower-is-better figure
    shuffled = [100.0, 91.0, 97.0, 95.0, 99.0, 92.0, 98.0, 94.0, 96.0, 93.0]  # the same spread, no order
    assert drift(shuffled, 100.0, 0.5, -1, 0.05) is None
