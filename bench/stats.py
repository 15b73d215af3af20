"""The Mann-Whitney U test, by hand (no scipy): exact for small samples, normal beyond; the rule
that says whether two scenarios' repeats differ beyond their noise (`separation`); and what
compare's gate needs besides: Student's t distribution (`t_sf`, `t_quantile`) and Holm's
step-down adjustment of p-values across a family of tests (`holm`).

The exact distribution is that of the rank sum of the first sample over every way of choosing
its members from the pooled values, ties given mid-ranks, so it stays exact with ties.
"""

from __future__ import annotations

import functools
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
    is exactly when a one-sided exact Mann-Whitney test reaches p = 0.05; with 2 against 2,
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


# -- Student's t and Holm --------------------------------------------------------------------------
def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with df degrees of freedom (df > 0); t may be infinite."""
    if not df > 0 or math.isnan(t):
        raise ValueError(f"t = {t!r} with df = {df!r}: df must be above 0 and t a number")
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))  # P(|T| > |t|) / 2
    return tail if t >= 0 else 1.0 - tail


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p (0 < p < 1), by bisection on t_sf (monotone); cached, as a gate
    asks for the same few levels again and again."""
    if not 0 < p < 1:
        raise ValueError(f"p = {p!r} must lie between 0 and 1")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    low, high = 0.0, 1.0
    while t_sf(high, df) > 1.0 - p:
        low, high = high, high * 2.0
    for _ in range(200):
        mid = (low + high) / 2.0
        if t_sf(mid, df) > 1.0 - p:
            low = mid
        else:
            high = mid
        if high - low < 1e-12 * max(1.0, high):
            break
    return (low + high) / 2.0


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction (Lentz)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):  # the fraction converges fast below this point
        return 1.0 - _betainc(b, a, 1.0 - x)
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            fraction *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return math.exp(log_front) * fraction / a


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: reject a test at family-wise level
    alpha exactly when its adjusted p <= alpha. NaN (no test) stays NaN and does not count."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if not math.isnan(p))
    adjusted = [math.nan] * len(p_values)
    running, m = 0.0, len(tested)
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted
