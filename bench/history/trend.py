"""Robust figures over a series of nights, by hand (no scipy): the noise from night to night (and
the threshold it widens), and a monotonic trend (a drift) with its significance.

Each night is one value (the median of its repeats), so a night of wild repeats weighs as much
as any other night, and no more.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

MAD_TO_SIGMA = 1.4826  # a normal distribution's standard deviation is 1.4826 x its MAD


def mad(values: Sequence[float]) -> float:
    """The median absolute deviation from the median (raw, not scaled)."""
    if not values:
        raise ValueError("no values")
    middle = statistics.median(values)
    return float(statistics.median(abs(v - middle) for v in values))


def night_noise_pct(values: Sequence[float]) -> float | None:
    """The night-to-night noise of a series of nightly values (oldest first), in % of the value:
    robustly, 1.4826 x the MAD of the differences of their logarithms between successive nights,
    over sqrt(2). Differences take out a slow drift, the MAD a step (an accepted one, or a
    regression) or an outlier night, so none of them passes for noise; logarithms make it a
    relative figure that holds across levels. None below 4 values (values <= 0 are left out)."""
    logs = [math.log(v) for v in values if v > 0]
    if len(logs) < 4:
        return None
    steps = [b - a for a, b in zip(logs, logs[1:], strict=False)]
    return 100 * MAD_TO_SIGMA * mad(steps) / math.sqrt(2)


def theil_sen_slope(values: Sequence[float]) -> float:
    """The median of the slopes between every pair of nights (per night; nights equally spaced)."""
    n = len(values)
    if n < 2:
        raise ValueError("a slope needs two values")
    return float(statistics.median((values[j] - values[i]) / (j - i) for i in range(n) for j in range(i + 1, n)))


def kendall_s(values: Sequence[float]) -> int:
    """Mann-Kendall S: pairs (i < j) that rise minus pairs that fall; ties count nothing."""
    n = len(values)
    return sum((values[j] > values[i]) - (values[j] < values[i]) for i in range(n) for j in range(i + 1, n))


def mann_kendall_p(values: Sequence[float], direction: int) -> float:
    """One-sided p-value of a monotonic trend: falling (direction -1) or rising (+1). Exact: under no
    trend every order of the nights is equally likely, and S = pairs - 2 x inversions, whose
    distribution is that of the inversions of a random permutation. Ties make it conservative."""
    if direction not in (-1, 1):
        raise ValueError("direction is -1 or +1")
    n = len(values)
    if n < 3:
        return 1.0
    s = kendall_s(values) * direction  # a rise of S in the asked direction
    pairs = n * (n - 1) // 2
    counts = _inversion_counts(n)
    # S >= s  <=>  inversions <= (pairs - s) / 2
    limit = (pairs - s) // 2
    return float(sum(counts[: limit + 1])) / math.factorial(n)


@functools.cache
def _inversion_counts(n: int) -> tuple[int, ...]:
    """How many permutations of n items have k inversions, for each k (the Mahonian numbers)."""
    counts = [1]
    for m in range(2, n + 1):  # insert the m-th item: it adds 0 .. m-1 inversions
        grown = [0] * (len(counts) + m - 1)
        for k, c in enumerate(counts):
            for extra in range(m):
                grown[k + extra] += c
        counts = grown
    return tuple(counts)


@dataclass(frozen=True)
class Drift:
    slope_pct: float  # per night, in % of the baseline
    total_pct: float  # the slope over the nights' span
    nights: int
    p_value: float  # one-sided Mann-Kendall, in the bad direction


def widened_threshold(nights: Sequence[float], floor_pct: float, factor: float) -> tuple[float, float | None]:
    """The threshold: floor_pct, or factor x the night-to-night noise of these nights where that is
    larger; and that noise (in %) when it widened the threshold, else None."""
    noise_pct = night_noise_pct(nights) if factor else None
    if noise_pct is None or factor * noise_pct <= floor_pct:
        return floor_pct, None
    return round(factor * noise_pct, 6), noise_pct


def drift(nights: Sequence[float], baseline: float, threshold_pct: float, bad: int, alpha: float) -> Drift | None:
    """A steady move the bad way (bad: -1 falling, +1 rising) over these nights: their Theil-Sen slope
    times their span beyond threshold_pct of the baseline, confirmed by a one-sided Mann-Kendall test
    at alpha. None otherwise."""
    if len(nights) < 3 or not baseline:
        return None
    slope_pct = theil_sen_slope(nights) / abs(baseline) * 100
    total = slope_pct * (len(nights) - 1)
    if total * bad <= threshold_pct:
        return None
    p_value = mann_kendall_p(nights, bad)
    if p_value > alpha + 1e-12:
        return None
    return Drift(slope_pct, total, len(nights), p_value)
