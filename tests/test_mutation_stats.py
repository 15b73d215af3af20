"""The statistics every verdict rests on, to many digits, so that a wrong constant or operator in
their arithmetic cannot pass (make mutation): Student's t against its closed forms (1, 2 and 3
degrees of freedom), the Mann-Whitney tails exact and approximate, ranks with ties, and Holm."""

from __future__ import annotations

import math
from itertools import combinations

import pytest

from bench.stats import (
    _doubled_midranks,
    _normal_tail,
    holm,
    mann_whitney_p,
    mann_whitney_u,
    separation,
    t_quantile,
    t_sf,
)


def sf_closed(t: float, df: int) -> float:
    if df == 1:
        return 0.5 - math.atan(t) / math.pi
    if df == 2:
        return 0.5 - t / (2 * math.sqrt(2 + t * t))
    u = t / math.sqrt(3)
    return 0.5 - (math.atan(u) + u / (1 + u * u)) / math.pi


@pytest.mark.parametrize("df", [1, 2, 3])
@pytest.mark.parametrize("t", [-7.0, -1.3, -0.2, 0.0, 0.05, 0.5, 1.0, 2.0, 4.3, 12.7, 60.0])
def test_t_sf_matches_its_closed_form(t: float, df: int) -> None:
    assert t_sf(t, df) == pytest.approx(sf_closed(t, df), rel=1e-10, abs=1e-14)


@pytest.mark.parametrize("p", [0.001, 0.025, 0.2, 0.5, 0.6, 0.8, 0.95, 0.975, 0.9995])
def test_t_quantile_matches_its_closed_form(p: float) -> None:
    assert t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-9, abs=1e-12)
    assert t_quantile(p, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-9, abs=1e-12)


def test_t_at_many_degrees_of_freedom_nears_the_normal() -> None:
    assert t_quantile(0.975, 10_000) == pytest.approx(1.96, abs=1e-3)
    assert t_sf(1.959964, 1e6) == pytest.approx(0.025, abs=1e-5)
    assert t_sf(math.inf, 3) == 0.0 and t_sf(-math.inf, 3) == 1.0
    with pytest.raises(ValueError):
        t_sf(1.0, 0)
    with pytest.raises(ValueError):
        t_sf(math.nan, 3)
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)
    with pytest.raises(ValueError):
        t_quantile(0.0, 3)


def brute_p(x: list[float], y: list[float], greater: bool) -> float:
    """The exact one-sided p by enumerating every split of the pooled values."""
    pooled = [*x, *y]
    observed = mann_whitney_u(x, y)
    count = total = 0
    for idx in combinations(range(len(pooled)), len(x)):
        a = [pooled[i] for i in idx]
        b = [pooled[i] for i in range(len(pooled)) if i not in idx]
        u = mann_whitney_u(a, b)
        count += u >= observed if greater else u <= observed
        total += 1
    return count / total


@pytest.mark.parametrize(
    "x, y",
    [
        ([1.0, 2.0, 3.0, 4.0, 5.0], [3.0, 6.0, 7.0, 8.0, 9.0, 10.0]),
        ([2.0, 2.0, 5.0], [1.0, 2.0, 2.0, 7.0]),
        ([4.0, 1.0], [3.0, 3.0, 3.0]),
    ],
)
def test_the_exact_tails_enumerate_every_split(x: list[float], y: list[float]) -> None:
    assert mann_whitney_p(x, y, "greater") == pytest.approx(brute_p(x, y, True), rel=1e-12)
    assert mann_whitney_p(x, y, "less") == pytest.approx(brute_p(x, y, False), rel=1e-12)
    two = min(1.0, 2 * min(brute_p(x, y, True), brute_p(x, y, False)))
    assert mann_whitney_p(x, y, "two-sided") == pytest.approx(two, rel=1e-12)


def test_doubled_midranks_with_ties() -> None:
    assert _doubled_midranks([10.0, 20.0, 20.0, 5.0]) == [4, 7, 7, 2]
    assert _doubled_midranks([1.0, 1.0, 1.0]) == [4, 4, 4]


def normal_by_hand(x: list[float], y: list[float], greater: bool) -> float:
    n, m = len(x), len(y)
    ties = {v: [*x, *y].count(v) for v in {*x, *y}}
    var = n * m / 12 * ((n + m + 1) - sum(t**3 - t for t in ties.values()) / ((n + m) * (n + m - 1)))
    shift = mann_whitney_u(x, y) - n * m / 2
    z = (shift - 0.5) / math.sqrt(var) if greater else -(shift + 0.5) / math.sqrt(var)
    return min(1.0, 0.5 * math.erfc(z / math.sqrt(2)))


def test_the_normal_tail_with_ties_and_continuity() -> None:
    x = [float(v % 7) for v in range(30)]
    y = [float(v % 5) + 1.5 for v in range(31)]
    for greater in (True, False):
        expected = normal_by_hand(x, y, greater)
        assert _normal_tail(x, y, "greater" if greater else "less") == pytest.approx(expected, rel=1e-12)
        assert mann_whitney_p(x, y, "greater" if greater else "less") == pytest.approx(expected, rel=1e-12)
    assert 0 < normal_by_hand(x, y, False) < 0.5 < normal_by_hand(x, y, True) < 1
    assert _normal_tail([1.0, 1.0], [1.0, 1.0], "greater") == 1.0  # no variance at all


def test_the_exact_rule_ends_at_fifty_values() -> None:
    x, y = [float(v) for v in range(25)], [v + 0.5 for v in range(25)]
    exact = mann_whitney_p(x, y, "less")  # 50 values: exact, not the normal approximation
    assert exact != pytest.approx(_normal_tail(x, y, "less"), rel=1e-6)
    x51 = [*x, 100.0]
    assert mann_whitney_p(x51, y, "less") == pytest.approx(_normal_tail(x51, y, "less"), rel=1e-12)


def test_separation_edges() -> None:
    assert separation([1.0, 2.0], [2.0, 3.0]) == "within"  # touching ranges overlap
    assert separation([1.0, 2.0, 3.0], [3.5, 4.0, 5.0]) == "beyond"
    assert separation([1.0, 2.0, 3.0], [3.5, 4.0]) == "too few"
    assert separation([1.0, 2.0], [3.5, 4.0], min_repeats=2) == "beyond"
    assert separation([1.0, math.nan], [3.0, 4.0, 5.0]) == "too few"
    assert separation([5.0, 6.0, 7.0], [1.0, 2.0, 3.0]) == "beyond"


def test_holm_by_hand() -> None:
    assert holm([0.01, 0.04, 0.03, math.nan]) == pytest.approx([0.03, 0.06, 0.06, math.nan], nan_ok=True)
    assert holm([0.5, 0.4]) == pytest.approx([0.8, 0.8])
    assert holm([0.6, 0.001]) == pytest.approx([0.6, 0.002])
    assert holm([]) == []


@pytest.mark.parametrize("df", [50.0, 400.0])
def test_t_sf_near_zero_at_many_degrees_of_freedom(df: float) -> None:
    """sf(t) = 1/2 - t f(0) + O(t^3), f(0) = Gamma((df + 1) / 2) / (sqrt(df pi) Gamma(df / 2)): the
    continued fraction must switch to the other tail there, or it stops far from the answer."""
    density = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    assert t_sf(0.001, df) == pytest.approx(0.5 - 0.001 * density, abs=1e-9)
    assert t_sf(-0.001, df) == pytest.approx(0.5 + 0.001 * density, abs=1e-9)


def test_the_edges_of_the_normal_tail_and_the_quantile() -> None:
    # one value a side: a variance of 1/4, below 1 but above 0, is still a normal tail
    assert _normal_tail([1.0], [2.0], "greater") == pytest.approx(0.5 * math.erfc(-2 / math.sqrt(2)))
    with pytest.raises(ValueError, match="p = 0.0 must"):
        t_quantile(0.0, 3)
