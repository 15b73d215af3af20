"""recommend's stopping rule on synthetic measurements: it never eliminates the true best beyond its
stated error, and it finds a clearly best candidate."""

from __future__ import annotations

import math
import random

from hypothesis import assume, given, settings
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


AXES = {"precision": 3, "compile": 3, "liger": 2, "optimizer": 3, "batch": 4, "checkpointing": 3}


def synthetic_space():  # noqa: ANN201
    from bench.recommend.space import Space

    axes = tuple((a, tuple((f"{a[:3]}{i}", {}) for i in range(n))) for a, n in AXES.items())
    return Space(axes).candidates()


NOT_BATCH = [a for a in AXES if a != "batch"]
MEMORY_STAGE = ("batch", "checkpointing", "liger", "optimizer")  # the space's axes in STAGES' memory stage


def truth_of(candidates, ranks: dict[str, list[int]], batch_gain: float, flat: str = "") -> dict[str, float]:  # noqa: ANN001
    """Each axis but the micro-batch multiplies the figure by its own factor (15% a rank; `flat`: 1 for
    every choice); the micro-batch by `batch_gain` for each step larger (bat0, listed first, is the
    largest): a larger micro-batch is never slower, as measured on llama-1b (results/recommend/)."""
    factor = {(a, f"{a[:3]}{i}"): 1.0 if a == flat else 1.15 ** ranks[a][i] for a in NOT_BATCH for i in range(AXES[a])}
    factor |= {("batch", f"bat{i}"): batch_gain ** (AXES["batch"] - 1 - i) for i in range(AXES["batch"])}
    return {c.name: math.prod(factor[(a, label)] for a, label in c.axes.items()) for c in candidates}


@settings(max_examples=40, deadline=None)
@given(
    ranks=st.fixed_dictionaries({a: st.permutations(range(AXES[a])) for a in NOT_BATCH}),
    batch_gain=st.floats(1.0, 1.6),
    saver=st.fixed_dictionaries(
        {
            a: st.lists(st.floats(0.3, 1.0), min_size=AXES[a], max_size=AXES[a])
            for a in ("checkpointing", "liger", "optimizer")
        }
    ),
    cap=st.floats(1.0, 8.0),
    pruned_share=st.floats(0.0, 1.0),
    sigma=st.floats(0.0, 0.02),
    seed=st.integers(0, 2**31),
)
def test_the_staged_search_finds_the_best_recipe_that_fits(
    ranks: dict[str, list[int]], batch_gain: float, saver: dict[str, list[float]], cap: float,
    pruned_share: float, sigma: float, seed: int,
) -> None:  # fmt: skip
    """Memory couples the micro-batch with checkpointing, Liger and the optimizer: a candidate fits when
    its micro-batch times its savers' factors is under the cap (the twin on llama-1b at 24 GB: Liger
    lost at 4 x 8 and won at 32 x 1, which only Liger let fit). Some that do not fit are pruned, the
    rest run out of memory on their first probe. Each axis's speed factor is separable, and a larger
    micro-batch is never slower: the staged search then ends on the true best of the candidates that
    fit, measuring far fewer than the product."""
    from bench.recommend.stages import staged_race

    rng = random.Random(seed)
    candidates = synthetic_space()
    truth = truth_of(candidates, ranks, batch_gain)
    memory = {
        c.name: 2.0 ** (AXES["batch"] - 1 - int(c.axes["batch"][-1]))
        * math.prod(saver[a][int(c.axes[a][-1])] for a in ("checkpointing", "liger", "optimizer"))
        for c in candidates
    }
    fits = {n for n, mb in memory.items() if mb <= cap}
    pruned = {n for n in memory if n not in fits and rng.random() < pruned_share}
    # the reference's way down (more checkpointing, a leaner optimizer) reaches a recipe that fits
    leanest = min(saver["checkpointing"]) * min(saver["optimizer"]) * saver["liger"][0]
    assume(leanest <= cap)
    ranked = sorted((truth[n] for n in fits), reverse=True)
    assume(len(ranked) == 1 or ranked[0] > 1.1 * ranked[1])
    best = max(fits, key=truth.__getitem__)
    probes: list[str] = []

    def measure(name: str, _rnd: int) -> float | str:
        assert name not in pruned
        probes.append(name)
        return truth[name] * math.exp(rng.gauss(0, sigma)) if name in fits else "oom"

    standing, stages = staged_race(candidates, pruned, measure, floor=0.01)
    assert standing.winner == best
    assert [s.axes for s in stages] == [("precision",), MEMORY_STAGE, ("compile",)]
    assert sum(s.probes for s in stages) == len(probes)  # the answer says what each stage measured
    assert len(set(probes)) < len(candidates) / 4  # not the product (648)


@settings(max_examples=20, deadline=None)
@given(
    tied=st.sampled_from(NOT_BATCH),
    ranks=st.fixed_dictionaries({a: st.permutations(range(AXES[a])) for a in NOT_BATCH}),
    sigma=st.floats(0.0, 0.005),
    seed=st.integers(0, 2**31),
)
def test_a_stage_tied_within_the_noise_leads_on_with_its_plainest_choice(
    tied: str, ranks: dict[str, list[int]], sigma: float, seed: int
) -> None:
    """An axis that changes nothing measurable (every choice the same figure, within the noise): its
    stage ends tied and the search goes on from the axis's first choice, the plainest (on the CPU the
    MoE's optimizer stage tied AdamW with Adafactor, and the best mean, Adafactor, led on), while
    every other axis still ends on its best. Ties at max_rounds go to the best mean without the rule
    (the exhaustive search's ranking)."""
    from bench.recommend.stages import staged_race

    rng = random.Random(seed)
    candidates = synthetic_space()
    truth = truth_of(candidates, ranks, 1.15, flat=tied)

    def measure(name: str, _rnd: int) -> float:
        return truth[name] * math.exp(rng.gauss(0, sigma))

    standing, stages = staged_race(candidates, set(), measure, floor=0.01)
    assert standing.winner is not None
    won = next(c for c in candidates if c.name == standing.winner).axes
    assert won[tied] == f"{tied[:3]}0", (tied, standing.winner)
    assert won["batch"] == "bat0"
    for axis in NOT_BATCH:
        if axis != tied:
            assert won[axis] == f"{axis[:3]}{ranks[axis].index(AXES[axis] - 1)}", axis
    (stage,) = [s for s in stages if tied in s.axes]
    assert "the plainest" in stage.stopped
    plain_race = race(["x", "y"], lambda n, _r: {"x": 1.0, "y": 1.001}[n], floor=0.01)
    assert plain_race.winner == "y"  # no rule: the best mean


def test_out_of_memory_leaves_a_stage_at_once_and_the_leader_is_not_measured_again() -> None:
    """Only the first optimizer fits, at the smallest micro-batch: the memory stage walks each
    combination down to it, and the compile stage reuses the leader's figures."""
    from bench.recommend.stages import staged_race

    candidates = synthetic_space()
    figure = {c.name: 2.0 if c.axes["optimizer"] == "opt0" and c.axes["batch"] == "bat3" else "oom" for c in candidates}
    standing, stages = staged_race(candidates, set(), lambda n, _r: figure[n], floor=0.01)
    memory = next(s for s in stages if s.axes == MEMORY_STAGE)
    assert memory.leader is not None and ".opt0." in memory.leader and ".bat3." in memory.leader
    compile_stage = next(s for s in stages if s.axes == ("compile",))
    assert compile_stage.measured == 2 * 4  # the two others walked down 4 micro-batches; the leader reused
    assert standing.winner is not None and "opt0" in standing.winner and "bat3" in standing.winner


def test_each_stage_spends_only_its_share_of_the_budget() -> None:
    """A first stage tied within the noise would race to its last round: with a budget it stops at
    its share (3 of the 3 + 9 combinations), and the memory stage still runs."""
    from bench.recommend.stages import staged_race

    now = [0.0]
    candidates = [c for c in synthetic_space() if c.axes["compile"] == "com0" and c.axes["liger"] == "lig0"]

    def measure(name: str, rnd: int) -> float:
        now[0] += 1.0  # a probe takes a second
        return 1.0 + 0.05 * (rnd % 2)  # every candidate the same, noisy: the precision stage ties

    standing, stages = staged_race(candidates, set(), measure, budget_s=30.0, clock=lambda: now[0], floor=0.01)
    assert [s.axes for s in stages] == [("precision",), MEMORY_STAGE]
    assert stages[0].probes <= 3 * 30 / 12 + 3  # its share, overrun by at most one round
    assert stages[1].measured == 8  # every one of its 9 combinations: the leader's figures came from the first stage
    # the first stage says its share ended, not the budget (on an H100 every stage said "the budget is
    # spent", and the next one still measured); the last stage's share is the budget
    assert stages[0].stopped.startswith("its share of the budget is spent: 8 s of the 30 s left"), stages[0]
    assert stages[1].stopped == standing.stopped and standing.stopped.startswith("the budget is spent")


def test_the_stages_start_from_the_leanest_recipe_the_memory_model_predicts() -> None:
    """On one H100 capped at 24 GB, llama-1b's first-choice reference (fused AdamW, every-other-layer
    checkpointing) ran out of memory and the precision, compile and Liger stages measured nothing.
    Given the predicted peaks, the stages start from the leanest candidate not pruned."""
    from bench.recommend.stages import reference, staged_race

    candidates = synthetic_space()
    # opt0 and checkpointing chk0 (the first choices) are the heaviest; opt2 + chk2 the leanest
    peak = {
        c.name: 10.0 * (2 - int(c.axes["optimizer"][-1])) + 5.0 * (2 - int(c.axes["checkpointing"][-1]))
        + int(c.axes["batch"][-1]) * 0.0 - int(c.axes["batch"][-1])
        for c in candidates
    }  # fmt: skip
    figure = {c.name: (1.0 + 0.1 * int(c.axes["precision"][-1])) if peak[c.name] <= 0 else "oom" for c in candidates}
    assert reference(candidates, list(AXES), set()) == {a: f"{a[:3]}0" for a in AXES} | {"batch": "bat3"}
    start = reference(candidates, list(AXES), set(), lean=peak)
    assert (start["optimizer"], start["checkpointing"], start["precision"]) == ("opt2", "che2", "pre0")
    standing, stages = staged_race(candidates, set(), lambda n, _r: figure[n], floor=0.01, lean=peak)
    precision = stages[0]
    assert precision.axes == ("precision",) and str(precision.leader).startswith("pre2.")
    first_choice, stages_old = staged_race(candidates, set(), lambda n, _r: figure[n], floor=0.01)
    # the first-choice start ran out of memory in every precision; it now steps down to the same
    # leaner reference, at the cost of the probes the prediction saves
    assert stages_old[0].leader == precision.leader and stages_old[0].probes > precision.probes


def test_the_start_keeps_the_optimizer_closest_to_adamw_that_is_sure_to_fit() -> None:
    """The second H100 run started at the leanest recipe, an Adafactor one: every candidate measured
    after it was Adafactor, whose loss deviates from AdamW's on the proxy task, so nothing could win.
    Of the candidates sure to fit (the margin to spare), the start takes the earliest optimizer (the
    space lists the one closest to the plain recipe's first), the leanest of its recipes."""
    from bench.recommend.stages import reference

    candidates = synthetic_space()
    peak = {
        c.name: 10.0 * (2 - int(c.axes["optimizer"][-1])) + 5.0 * (2 - int(c.axes["checkpointing"][-1]))
        - int(c.axes["batch"][-1])
        for c in candidates
    }  # fmt: skip
    sure = {n for n, p in peak.items() if p <= 8.0}  # opt0 never; opt1 only at che2
    start = reference(candidates, list(AXES), set(), lean=peak, sure=sure)
    assert (start["optimizer"], start["checkpointing"], start["batch"]) == ("opt1", "che2", "bat3")
    assert reference(candidates, list(AXES), set(), lean=peak, sure=set())["optimizer"] == "opt2"  # none sure
    everything = reference(candidates, list(AXES), set(), lean=peak, sure=set(peak))
    assert everything["optimizer"] == "opt0"


def test_the_race_keeps_what_the_finalists_checks_will_take_out_of_its_budget() -> None:
    """The first H100 run's race spent its share of --budget 8m, then the loss checks ran past the
    command's limit: the time the finalists' checks will take (reserve) is kept out of every stage."""
    from bench.recommend.stages import staged_race

    candidates = [c for c in synthetic_space() if c.axes["precision"] == "pre0" and c.axes["compile"] == "com0"]
    candidates = [c for c in candidates if c.axes["liger"] == "lig0"]

    def run(reserve: float) -> int:
        now = [0.0]

        def measure(name: str, rnd: int) -> float:
            now[0] += 1.0
            return 1.0 + 0.05 * (rnd % 2)

        staged_race(
            candidates, set(), measure, budget_s=60.0, clock=lambda: now[0], floor=0.01, reserve=lambda: reserve
        )
        return int(now[0])

    assert run(0.0) > run(40.0)
    assert run(60.0) <= 3 + 12  # nothing left: each stage stops after its first round


@given(st.integers(2, 9), st.integers(0, 30))
def test_the_budget_ends_between_probes_not_only_between_rounds(n: int, after: int) -> None:
    """The H100 runs' compile stage measured both its candidates (56 s and 16 s) past the budget, since
    the race asked only between rounds: now no probe starts once the budget is spent, but a round's first."""
    from bench.recommend.race import race

    probes: list[str] = []

    def measure(name: str, rnd: int) -> float:
        probes.append(name)
        return 1.0 + 0.01 * (hash((name, rnd)) % 7)

    standing = race([f"c{i}" for i in range(n)], measure, spent=lambda: len(probes) > after, floor=0.01)
    assert len(probes) <= after + 1  # no probe starts once the budget is spent
    if standing.stopped == "the budget is spent":
        assert len(probes) == after + 1  # and it is said only when it stopped a probe
    assert standing.winner in set(probes)


def test_a_leader_that_compiles_makes_the_race_keep_more_for_its_check() -> None:
    """The reserve is asked before each probe: once a slow (compiled) candidate leads, the race stops
    sooner, since its loss check will cost what its probe did."""
    from bench.recommend.stages import staged_race

    fixed = {a: f"{a[:3]}0" for a in AXES if a != "compile"} | {"batch": "bat0"}
    candidates = [c for c in synthetic_space() if all(c.axes[a] == v for a, v in fixed.items())]
    assert len(candidates) == 3  # one stage: compile
    now = [0.0]
    walls: dict[str, float] = {}

    def measure(name: str, rnd: int) -> float:
        slow = ".com1" in name or ".com2" in name
        now[0] += 20.0 if slow else 1.0
        walls[name] = 20.0 if slow else 1.0
        return (2.0 if slow else 1.0) * (1.0 + 0.05 * (rnd % 2))

    def reserve() -> float:
        return max(walls.values(), default=1.0)

    staged_race(candidates, set(), measure, budget_s=100.0, clock=lambda: now[0], floor=0.01, reserve=reserve)
    assert now[0] <= 100.0  # asked only as the stage started (reserve 1 s), the race ran on to 103 s


@given(st.integers(0, 2), st.integers(0, 2))
def test_a_reference_that_runs_out_of_memory_steps_down_until_a_stage_measures(opt_fits: int, ckpt_fits: int) -> None:
    """Without predictions (qwen3, the MoE: no activation model) the reference is the first choices,
    which may not fit, as llama-1b's did at 24 GB: every precision then ran out of memory and nothing
    was learned. The stage is raced again at the next leaner reference (more checkpointing, then the
    next optimizer) until a candidate fits; the first that fits is the lightest step that does."""
    from bench.recommend.stages import staged_race

    candidates = synthetic_space()

    def fits(name: str) -> bool:
        axes = next(c for c in candidates if c.name == name).axes
        return (int(axes["optimizer"][-1]), int(axes["checkpointing"][-1])) >= (opt_fits, ckpt_fits)

    figure = {c.name: 1.0 + 0.1 * int(c.axes["precision"][-1]) if fits(c.name) else "oom" for c in candidates}
    standing, stages = staged_race(candidates, set(), lambda n, _r: figure[n], floor=0.01)
    precision = stages[0]
    assert precision.axes == ("precision",) and precision.leader is not None
    leader = next(c for c in candidates if c.name == precision.leader).axes
    assert (leader["optimizer"], leader["checkpointing"]) == (f"opt{opt_fits}", f"che{ckpt_fits}")
    assert standing.winner is not None and fits(standing.winner)


@settings(max_examples=60, deadline=None)
@given(
    figures=st.lists(st.lists(st.floats(0.5, 2.0), min_size=1, max_size=3), min_size=2, max_size=8),
    give_up=st.floats(0.001, 0.2),
)
def test_a_budget_cut_leads_on_with_the_plainest_survivor_within_what_it_may_give_up(
    figures: list[list[float]], give_up: float
) -> None:
    """Cut by the budget: the winner is the earliest survivor whose mean is within `give_up` of the
    best's and not separated from it, so what the cut gives up is never more than `give_up`."""
    from bench.recommend.race import plainer_on_cut

    names = [f"c{i}" for i in range(len(figures))]
    probes = [0]
    budget = sum(len(f) for f in figures)  # every figure measured, then the budget is spent

    def measure(name: str, rnd: int) -> float:
        probes[0] += 1
        values = figures[names.index(name)]
        return values[rnd % len(values)]

    standing = race(names, measure, spent=lambda: probes[0] >= budget, min_rounds=10**6, give_up=give_up)
    assert standing.stopped.startswith("the budget is spent")
    survivors = [standing.entries[n] for n in standing.survivors]
    best = max(e.mean_log for e in survivors)
    won = standing.entries[standing.winner]
    assert best - won.mean_log < give_up or won.mean_log == best
    first = plainer_on_cut(survivors, give_up, ALPHA)
    assert first is not None and standing.winner == first.name
    # no survivor before it was within give_up of the best and unseparated: it is the plainest such
    for e in survivors[: survivors.index(won)]:
        assert plainer_on_cut([e, *[x for x in survivors if x is not e]], give_up, ALPHA) is not e


def test_a_gain_measured_once_and_small_gives_way_to_the_plainer_choice_a_large_one_does_not() -> None:
    """The MoE on an H100: whole-model compile 1.2% ahead of eager on one probe each when the budget
    ended the stage; qwen3: compile 2.1x ahead. Only the first gives way."""
    for compiled, leads in ((27.58, "eager"), (103.5, "compiled")):
        figures = {"eager": 27.25, "compiled": compiled}
        standing = race(
            list(figures), lambda n, _r, f=figures: f[n], spent=iter([False, False, True]).__next__,
            give_up=math.log1p(0.05),
        )  # fmt: skip
        assert standing.winner == leads, standing.stopped
    assert "eager leads: the best mean, 1.2% ahead, is not separated from it" in race(
        ["eager", "compiled"], lambda n, _r: {"eager": 27.25, "compiled": 27.58}[n], spent=iter([0, 0, 1]).__next__,
        give_up=0.05,
    ).stopped  # fmt: skip


def test_a_small_gain_the_noise_separates_is_kept_on_a_cut() -> None:
    """Measured slower by a separated interval, the plainer survivor does not lead, however small the gap."""
    rounds = [0]

    def measure(name: str, rnd: int) -> float:
        rounds[0] = rnd
        return {"plain": 100.0, "fast": 102.0}[name] * (1 + 0.0001 * (rnd % 2))

    spent = iter([False] * 9 + [True] * 100).__next__
    standing = race(["plain", "fast"], measure, spent=spent, min_rounds=10**6, give_up=0.05)
    assert standing.stopped.startswith("the budget is spent") and standing.winner == "fast"


def test_the_stages_together_give_up_at_most_five_percent_on_cuts() -> None:
    """Every stage's second choice 3% faster, each stage cut by its share of the budget after one
    probe each: the first cut gives way to the plainer choice (3% given up), the later ones cannot
    (3% more would pass the 5% in all), so the faster choices lead."""
    from bench.recommend.stages import staged_race

    candidates = [c for c in synthetic_space() if c.axes["batch"] == "bat0" and c.axes["checkpointing"] == "che0"]
    named = {c.name: c for c in candidates}
    now = [0.0]

    def measure(name: str, _rnd: int) -> float:
        now[0] += 1.0  # a probe takes a second
        factor = {"0": 1.0, "1": 1.03, "2": 0.5}
        return math.prod(factor[label[-1]] for label in named[name].axes.values())

    # 11.5 s over 3 + 3 + 2 + 3 + 1 candidates: each stage's share ends after its first round
    standing, stages = staged_race(candidates, set(), measure, budget_s=11.5, clock=lambda: now[0], floor=0.01)
    gave_way = [s.axes for s in stages if "is not separated from it" in s.stopped]
    assert gave_way == [("precision",)], [s.stopped for s in stages]
    assert standing.winner is not None
    assert {a: named[standing.winner].axes[a] for a in ("precision", "compile", "liger", "optimizer")} == {
        "precision": "pre0", "compile": "com1", "liger": "lig1", "optimizer": "opt1"
    }  # fmt: skip


@given(st.integers(1, 6), st.integers(0, 3))
def test_a_figure_already_measured_costs_no_budget(n: int, rounds_known: int) -> None:
    """The budget stops new probes only: with it spent from the start, the figures the caller already
    holds (an earlier stage's, a walk down the micro-batches) still count, and nothing new is measured."""
    names = [f"c{i}" for i in range(n)]
    held = {(name, r): 1.0 + 0.1 * i for i, name in enumerate(names) for r in range(rounds_known)}
    asked: list[tuple[str, int]] = []

    def measure(name: str, rnd: int) -> float:
        asked.append((name, rnd))
        return held.get((name, rnd), 1.0)

    standing = race(names, measure, spent=lambda: True, known=lambda name, rnd: (name, rnd) in held)
    assert set(asked) <= set(held)  # nothing new
    assert standing.stopped.startswith("the budget is spent") or standing.stopped == "one candidate left"
    for entry in standing.entries.values():
        assert (1 if rounds_known else 0) <= len(entry.values) <= rounds_known or entry.out
    if rounds_known and n > 1:
        assert standing.winner == names[-1]  # the best of what was held


def test_the_walk_down_the_micro_batches_stops_when_the_budget_is_spent() -> None:
    """Each combination is walked down from its largest micro-batch until one fits; a spent budget ends
    the walk between probes, and what was measured stays in the race."""
    from bench.recommend.stages import staged_race

    candidates = [c for c in synthetic_space() if c.axes["precision"] == "pre0" and c.axes["compile"] == "com0"]
    candidates = [c for c in candidates if c.axes["liger"] == "lig0" and c.axes["optimizer"] == "opt0"]
    now = [0.0]

    def measure(name: str, _rnd: int) -> float | str:
        now[0] += 1.0
        return 2.0 if ".bat3." in name else "oom"  # only the smallest micro-batch fits

    standing, stages = staged_race(candidates, set(), measure, budget_s=5.5, clock=lambda: now[0], floor=0.01)
    (memory,) = stages
    assert memory.probes <= 6 + 1  # the budget, overrun by at most the probe running when it ended
    assert standing.winner is None or ".bat3." in standing.winner
    assert all(e.out == "oom" for name, e in standing.entries.items() if ".bat3." not in name)
