"""recommend's stopping rule on synthetic measurements: it never eliminates the true best beyond its
stated error, and it finds a clearly best candidate."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.recommend.race import ALPHA, Entry, eliminate, race


def simulate(means: list[float], sigma: float, seed: int, **options: object):  # noqa: ANN201
    rng = random.Random(seed)
    names = [f"c{i}" for i in range(len(means))]
    truth = dict(zip(names, means, strict=True))
    return race(names, lambda name, _rnd: truth[name] * math.exp(rng.gauss(0, sigma)), **options)  # type: ignore[arg-type]


@settings(max_examples=15, deadline=None)
@given(
    others=st.lists(st.floats(0.90, 1.0), min_size=1, max_size=11),
    sigma=st.floats(0.005, 0.15),
    seed=st.integers(0, 2**31),
)
def test_the_true_best_is_eliminated_at_most_at_the_stated_rate(others: list[float], sigma: float, seed: int) -> None:
    """The hardest case for the rule: the others within 10% of the best (most within the noise)."""
    means = [1.0, *others]  # c0 is the true best (ties at 1.0 count: c0 must not be eliminated)
    runs = 200
    lost = sum(bool(simulate(means, sigma, seed + i).entries["c0"].out) for i in range(runs))
    # binomial: at most ALPHA a race; allow 4 standard deviations of the count above that
    assert lost <= ALPHA * runs + 4 * math.sqrt(runs * ALPHA * (1 - ALPHA)) + 1, lost


@settings(max_examples=15, deadline=None)
@given(k=st.integers(2, 12), sigma=st.floats(0.005, 0.05), seed=st.integers(0, 2**31))
def test_a_clearly_best_candidate_wins_and_the_rest_are_eliminated(k: int, sigma: float, seed: int) -> None:
    means = [1.0] + [0.7] * (k - 1)  # 30% slower: many standard errors apart after two rounds
    standing = simulate(means, sigma, seed)
    assert standing.winner == "c0"
    assert standing.survivors == ("c0",) and standing.stopped == "one candidate left"
    assert all("slower than c0" in standing.entries[f"c{i}"].out for i in range(1, k))


def test_a_failed_probe_leaves_the_race_at_once_and_is_no_noise_draw() -> None:
    standing = race(["a", "b", "c"], lambda n, _r: {"a": 10.0, "b": "oom", "c": 9.0}[n], max_rounds=3)
    assert standing.entries["b"].out == "oom" and standing.entries["b"].round_out == 0
    assert standing.winner == "a" and standing.survivors == ("a",)
    assert standing.entries["c"].round_out == 1  # not before a noise estimate (round 2 = index 1)


def test_no_elimination_before_a_noise_estimate() -> None:
    one = [Entry("a", [10.0]), Entry("b", [1.0])]
    assert eliminate(one, 0.05) == []  # one value each: no degrees of freedom


def test_the_noise_floor_keeps_identical_figures_from_separating_everything() -> None:
    entries = [Entry("a", [10.0, 10.0]), Entry("b", [9.9, 9.9])]
    assert eliminate(entries, 0.05, floor=0.0) != []  # zero noise: any gap separates
    assert eliminate(entries, 0.05, floor=0.05) == []  # 1% apart within a 5% floor


def test_the_budget_stops_the_race() -> None:
    calls: list[str] = []
    standing = race(["a", "b"], lambda n, _r: calls.append(n) or 1.0, spent=lambda: len(calls) >= 2)
    assert standing.rounds == 1 and standing.stopped == "the budget is spent"
