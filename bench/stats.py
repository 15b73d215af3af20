"""The Mann-Whitney U test, by hand (no scipy): exact for small samples, normal beyond; and the
rule that says whether two scenarios' repeats differ beyond their noise (`separation`).

The exact distribution is that of the rank sum of the first sample over every way of choosing
its members from the pooled values, ties given mid-ranks, so it stays exact with ties.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Literal

import numpy as np

Alternative = Literal["greater", "less", "two-sided"]
Separation = Literal["beyond", "within", "too few"]

MIN_REPEATS = 3  # values a side needs before a difference can be told from noise (here and in compare)

# Counts of subsets stay exact in float64 while C(n + m, n) < 2**53, which holds up to 50 values.
EXACT_MAX_TOTAL = 50


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> float:
    """U of x: the pairs (xi, yj) with xi > yj, ties counted one half."""
    return sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)


def mann_whitney_p(x: Sequence[float], y: Sequence[float], alternative: Alternative) -> float:
    """The p-value of U for x against y.

    "greater": the alternative is that x tends to be larger than y; "less": smaller;
    "two-sided": either (twice the smaller one-sided p, at most 1).
    """
    if not x or not y:
        raise ValueError("both samples need at least one value")
    values = [float(v) for v in (*x, *y)]
    if any(math.isnan(v) for v in values):
        raise ValueError("the samples hold NaN")
    if alternative == "two-sided":
        smaller = min(mann_whitney_p(x, y, "greater"), mann_whitney_p(x, y, "less"))
        return min(1.0, 2.0 * smaller)
    if alternative not in ("greater", "less"):
        raise ValueError(f"unknown alternative {alternative!r}")
    doubled = _doubled_midranks(values)
    observed = sum(doubled[: len(x)])
    if len(values) <= EXACT_MAX_TOTAL:
        return _exact_tail(doubled, len(x), observed, upper=alternative == "greater")
    return _normal_tail(x, y, alternative)


def _doubled_midranks(values: list[float]) -> list[int]:
    """Twice each value's mid-rank (1-based), so ties stay whole numbers."""
    order = sorted(values)
    first: dict[float, int] = {}
    for i, v in enumerate(order):
        first.setdefault(v, i + 1)
    counts = Counter(values)
    return [2 * first[v] + counts[v] - 1 for v in values]


def _exact_tail(doubled: list[int], n: int, observed: int, *, upper: bool) -> float:
    """P(rank sum >= observed) (upper) or <= observed, over all size-n subsets of the ranks."""
    total = sum(doubled)
    ways = np.zeros((n + 1, total + 1))  # ways[k, s]: subsets of size k with doubled rank sum s
    ways[0, 0] = 1.0
    for rank in doubled:
        ways[1:, rank:] += ways[:-1, : total + 1 - rank].copy()
    sums = ways[n]
    tail = sums[observed:].sum() if upper else sums[: observed + 1].sum()
    return float(min(1.0, tail / sums.sum()))


def _normal_tail(x: Sequence[float], y: Sequence[float], alternative: Alternative) -> float:
    """Normal approximation with the tie correction and a continuity correction."""
    n, m = len(x), len(y)
    total = n + m
    u = mann_whitney_u(x, y)
    ties = sum(t**3 - t for t in Counter([*x, *y]).values())
    variance = n * m / 12 * ((total + 1) - ties / (total * (total - 1)))
    if variance <= 0:
        return 1.0
    shift = u - n * m / 2
    z = (shift - 0.5) / math.sqrt(variance) if alternative == "greater" else (-(shift + 0.5) / math.sqrt(variance))
    return min(1.0, 0.5 * math.erfc(z / math.sqrt(2)))


def separation(a: Sequence[float], b: Sequence[float], min_repeats: int = MIN_REPEATS) -> Separation:
    """Do two scenarios' repeats differ beyond their noise? The rule: their ranges (min to max).

    "within": both have 2 or more values and the ranges overlap (touching counts): the repeats
    cannot tell the two apart. "beyond": the ranges do not overlap and each side has at least
    `min_repeats` values: every repeat of one beat every repeat of the other. At 3 against 3 that
    is exactly when compare's one-sided exact Mann-Whitney test reaches p = 0.05; with 2 against 2,
    separate ranges happen by chance one time in three, so they are "too few". "too few": a side
    with fewer than 2 values, or separate ranges with fewer than `min_repeats` values on a side.
    NaN values are dropped.
    """
    xs = [float(v) for v in a if not math.isnan(float(v))]
    ys = [float(v) for v in b if not math.isnan(float(v))]
    if min(len(xs), len(ys)) < 2:
        return "too few"
    if min(xs) <= max(ys) and min(ys) <= max(xs):
        return "within"
    return "beyond" if min(len(xs), len(ys)) >= min_repeats else "too few"
