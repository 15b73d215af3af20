"""The hand-written Mann-Whitney U test, checked against brute-force enumeration."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from bench import stats
from bench.stats import mann_whitney_p, mann_whitney_u


def brute_force_p(x: list[float], y: list[float], alternative: str) -> float:
    """P(U >= observed) ("greater") or P(U <= observed) ("less") over every relabelling."""
    pooled, n = [*x, *y], len(x)
    observed = mann_whitney_u(x, y)
    hits = total = 0
    for chosen in itertools.combinations(range(len(pooled)), n):
        xs = [pooled[i] for i in chosen]
        ys = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        u = mann_whitney_u(xs, ys)
        hits += u >= observed if alternative == "greater" else u <= observed
        total += 1
    return hits / total


def test_u_counts_pairs_and_half_ties() -> None:
    assert mann_whitney_u([3, 4], [1, 2]) == 4.0
    assert mann_whitney_u([1, 2], [3, 4]) == 0.0
    assert mann_whitney_u([2, 5], [2, 1]) == 3.5  # 2>1, 5>2, 5>1, 2=2 counts a half


def test_three_against_three_fully_separated() -> None:
    # the smallest one-sided exact p at 3 vs 3 is 1 / C(6, 3) = 0.05; two-sided it is 0.1
    assert mann_whitney_p([1, 2, 3], [4, 5, 6], "less") == 0.05
    assert mann_whitney_p([4, 5, 6], [1, 2, 3], "greater") == 0.05
    assert mann_whitney_p([1, 2, 3], [4, 5, 6], "two-sided") == pytest.approx(0.1)
    assert mann_whitney_p([1, 2, 3], [4, 5, 6], "greater") == 1.0


def test_known_exact_values() -> None:
    assert mann_whitney_p([1, 2, 3, 4], [5, 6, 7, 8], "less") == pytest.approx(1 / 70)
    # U = 2 at 3 vs 3: 4 of the 20 splits give U <= 2 (U = 0, 1, 2, 2)
    assert mann_whitney_p([1, 2, 5], [3, 4, 6], "less") == pytest.approx(0.2)


def test_identical_samples_are_never_significant() -> None:
    same = [100.0, 100.0, 100.0]
    assert mann_whitney_p(same, same, "greater") == 1.0
    assert mann_whitney_p(same, same, "less") == 1.0


def test_symmetry() -> None:
    x, y = [1.0, 4.0, 4.0, 7.0], [2.0, 3.0, 4.0, 9.0, 9.5]
    assert mann_whitney_p(x, y, "greater") == pytest.approx(mann_whitney_p(y, x, "less"))


def test_exact_matches_brute_force_with_ties() -> None:
    rng = random.Random(7)
    for _ in range(200):
        x = [rng.choice([1.0, 2.0, 3.0, 3.0, 5.0]) for _ in range(rng.randint(1, 6))]
        y = [rng.choice([1.0, 2.0, 4.0, 5.0]) for _ in range(rng.randint(1, 6))]
        for alternative in ("greater", "less"):
            assert mann_whitney_p(x, y, alternative) == pytest.approx(brute_force_p(x, y, alternative), abs=1e-12), (
                x,
                y,
                alternative,
            )


def test_normal_approximation_is_close_to_exact_at_moderate_size() -> None:
    rng = random.Random(3)
    x = [rng.gauss(100, 5) for _ in range(20)]
    y = [rng.gauss(103, 5) for _ in range(20)]
    exact = mann_whitney_p(x, y, "less")
    assert 0 < exact < 0.2
    assert stats._normal_tail(x, y, "less") == pytest.approx(exact, abs=0.01)


def test_large_samples_use_the_normal_approximation() -> None:
    x = [float(v) for v in range(40)]
    y = [v + 100.0 for v in x]
    p = mann_whitney_p(x, y, "less")
    assert 0 < p < 1e-12
    assert mann_whitney_p(y, x, "less") == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("x", "y", "message"),
    [([], [1.0], "at least one value"), ([1.0, math.nan], [1.0], "NaN")],
)
def test_bad_samples(x: list[float], y: list[float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        mann_whitney_p(x, y, "less")


def test_unknown_alternative() -> None:
    with pytest.raises(ValueError, match="unknown alternative"):
        mann_whitney_p([1.0], [2.0], "sideways")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("a", "b", "judged"),
    [
        ([10.0, 11.0, 12.0], [13.0, 14.0, 15.0], "beyond"),  # every repeat of one beat every repeat of the other
        ([13.0, 14.0, 15.0], [10.0, 11.0, 12.0], "beyond"),
        ([10.0, 11.0, 12.0], [12.0, 14.0, 15.0], "within"),  # touching ranges overlap
        ([14.2, 20.1, 27.6], [19.0, 29.5, 33.0], "within"),  # the noisy CPU case: +47% by median, noise
        ([10.0, 11.0], [10.5, 20.0], "within"),  # two repeats are enough to see overlap...
        ([10.0, 11.0], [13.0, 14.0], "too few"),  # ...not to call separate ranges a difference (1 in 3)
        ([10.0, 11.0, 12.0], [13.0, 14.0], "too few"),
        ([10.0], [20.0, 21.0, 22.0], "too few"),  # one repeat: cannot tell
        ([10.0], [10.0], "too few"),
        ([], [1.0, 2.0, 3.0], "too few"),
        ([10.0, math.nan, 11.0, 12.0], [13.0, 14.0, 15.0], "beyond"),  # NaN dropped
        ([10.0, math.nan, 11.0], [13.0, 14.0, 15.0], "too few"),
        ([5.0] * 3, [5.0] * 3, "within"),  # identical figures (peak memory to the MB)
    ],
)
def test_separation_by_ranges(a: list[float], b: list[float], judged: str) -> None:
    assert stats.separation(a, b) == judged
    assert stats.separation(b, a) == judged  # symmetric


def test_separation_at_three_repeats_matches_compares_test() -> None:
    """At 3 against 3, beyond the noise is exactly a one-sided Mann-Whitney p of 0.05 or less."""
    rng = random.Random(11)
    for _ in range(300):
        a = [rng.choice(range(10)) + rng.random() for _ in range(3)]
        b = [rng.choice(range(10)) + rng.random() for _ in range(3)]
        p = min(mann_whitney_p(a, b, "greater"), mann_whitney_p(a, b, "less"))
        assert (stats.separation(a, b) == "beyond") == (p <= 0.05 + 1e-12), (a, b)


def test_separation_asks_for_more_repeats_when_told() -> None:
    assert stats.separation([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], min_repeats=5) == "too few"
    assert stats.separation([1.0, 2.0], [4.0, 5.0], min_repeats=2) == "beyond"


# -- Student's t and Holm --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("p", "df", "t"),
    [  # from printed tables of Student's t
        (0.975, 4, 2.776445),
        (0.95, 10, 1.812461),
        (0.995, 1, 63.656741),
        (0.8, 4, 0.940965),
        (0.999, 30, 3.385185),
    ],
)
def test_t_quantiles_match_the_tables(p: float, df: int, t: float) -> None:
    assert stats.t_quantile(p, df) == pytest.approx(t, abs=1e-5)
    assert stats.t_quantile(1 - p, df) == pytest.approx(-t, abs=1e-5)
    assert stats.t_sf(t, df) == pytest.approx(1 - p, abs=1e-7)


def test_t_tails_at_the_edges() -> None:
    assert stats.t_sf(0.0, 3) == pytest.approx(0.5)
    assert stats.t_sf(math.inf, 3) == 0.0 and stats.t_sf(-math.inf, 3) == 1.0
    assert stats.t_sf(-1.0, 5) == pytest.approx(1 - stats.t_sf(1.0, 5))
    assert stats.t_sf(1.96, 100_000) == pytest.approx(0.025, abs=1e-4)  # the normal, far out
    with pytest.raises(ValueError, match="df must be above 0"):
        stats.t_sf(1.0, 0)
    with pytest.raises(ValueError, match="must lie between 0 and 1"):
        stats.t_quantile(1.0, 4)


def test_holm_steps_down_and_keeps_the_order() -> None:
    # sorted 0.01, 0.03, 0.04 get x3, x2, x1, each at least the one before
    assert stats.holm([0.04, 0.01, math.nan, 0.03]) == pytest.approx([0.06, 0.03, math.nan, 0.06], nan_ok=True)
    assert stats.holm([0.5, 0.9]) == [1.0, 1.0]
    assert stats.holm([]) == []
