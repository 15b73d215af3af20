"""The staged search of `gpubench recommend`: one race per group of axes, not one over the product.

The space is the product of its axes (hundreds of candidates for a Llama-style decoder on CUDA). The
staged search races one stage at a time (race.py's rule within each stage), with every axis outside
the stage held at the current leader's choice:

  precision                                         at one memory setting, the reference (below)
  batch x checkpointing x liger x optimizer x adapters   one stage: the memory they save is what lets
                                                    a larger micro-batch fit, so they are raced jointly
  compile                                           at the memory stage's leader

Every stage races each combination of its axes but the micro-batch at the largest micro-batch that
fits: it walks down from the largest not pruned until a first probe does not run out of memory
(frontier(), _fitted()), and the smaller micro-batches of that combination are not raced. At a fixed
global batch a larger micro-batch does the same arithmetic in fewer, larger launches; on llama-1b at
24 GB on an H100 each larger one that fitted ran faster, in every combination where two or more ran.
Before, Liger and the optimizer were raced one axis at a time at micro-batch 4 x 8: Liger ran a third
slower there and lost, and the search ended at 0.577x of its exhaustive twin's best, 32 x 1 with
Liger, which only Liger let fit (results/recommend/llama-1b-24gb-twin/liger/).

The precision stage holds the memory axes at the reference. Given the memory model's predicted peaks,
the reference is chosen among the candidates not pruned with every axis but micro-batch,
checkpointing and optimizer at its first choice: of those predicted to fit with the memory model's
margin to spare, the one whose optimizer is closest to the plain recipe's (the space lists fused
AdamW, 8-bit AdamW, Adafactor in that order), the leanest of them; when none is sure to fit, the
leanest. A reference that runs out of memory would leave the precision stage with nothing measured;
one with Adafactor made every measured candidate an Adafactor one, and Adafactor's loss deviates from
AdamW's on the proxy task. Without predictions: the smallest micro-batch and the first checkpointing
choice (none, then every k layers, then every layer) whose candidate with every other axis at its
first choice is not pruned. When every candidate of the precision stage runs out of memory at the
reference, at every micro-batch, the stage is raced again at the next leaner one (step_down: more
checkpointing, then the next optimizer from AdamW's end), so a model the memory model gives no
activations for (qwen3, the MoE) is not left with nothing measured. Each stage's winner is the leader
the next stage starts from; a stage that measures nothing (every candidate pruned, or the budget
spent) keeps the leader. The rule is exact when each axis but the micro-batch multiplies the figure by
its own factor, a larger micro-batch that fits is never slower, and precision and compile do not
change what fits (tests/test_recommend_race.py); what precision and compile change in memory is not
searched jointly: `--exhaustive` measures every candidate, the twin a staged answer is checked
against. A candidate met again in a later stage (the leader) reuses its figures for the rounds
already measured, and a figure already measured costs no budget. A stage whose survivors are tied
within the noise after every round leads on with the plainest of them (each axis lists its plainest
choice first: no checkpointing, fused AdamW, no compile), not the best mean: on the CPU the MoE's
optimizer stage tied AdamW and Adafactor, and its best mean, Adafactor, left every AdamW recipe at
other micro-batches unmeasured. A stage the budget cuts before its survivors separate leads on with
the plainest survivor within what is left of GIVE_UP (5% over all the stages) of the best mean and
not separated from it (race.plainer_on_cut): a gain measured once and small does not make every later
probe pay for it (the MoE's whole-model compile: 1% on one 90 s probe). With a budget, each stage may
spend the time left times its share of the combinations of the stages left (a stage of 18 after one
of 4 gets 18/22 of it), so the first stage cannot spend what the last one needs. Pure: the caller
measures.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .race import BUDGET_SPENT, Entry, Standing, race
from .space import Candidate

STAGES: tuple[tuple[str, ...], ...] = (
    ("precision",),
    ("batch", "checkpointing", "liger", "optimizer", "adapters"),
    ("compile",),
)
# every stage races each combination of its other axes at the largest micro-batch that fits (frontier());
# the memory stage names it so that a space where only the micro-batch varies still has a stage
FRONTIER = "batch"
LEAN_AXES = ("batch", "checkpointing", "optimizer")  # the axes the reference takes at its leanest
# axes that change what training computes: the reference keeps their first choice that fits
CLOSEST_FIRST = ("optimizer",)
# the most the staged search gives up, all its stages together, to plainer choices a budget cut left
# unseparated from the best (race.plainer_on_cut): the "within 5% of the exhaustive best"
GIVE_UP = 0.05


@dataclass(frozen=True)
class StageReport:
    axes: tuple[str, ...]
    candidates: int  # in the stage and not pruned
    measured: int  # candidates given a new probe in this stage (the leader met again reuses its figures)
    probes: int  # new probes this stage
    leader: str | None  # the stage's winner, where the next stage starts
    stopped: str


def reference(
    candidates: Sequence[Candidate],
    axes: Sequence[str],
    pruned: Container[str],
    lean: Mapping[str, float] | None = None,
    sure: Container[str] | None = None,
) -> dict[str, str]:
    """The start: with `lean` (name -> predicted peak MB), among the candidates not pruned whose axes
    but LEAN_AXES are at their first choice, the one in `sure` (predicted to fit with the margin to
    spare) earliest on the CLOSEST_FIRST axes, the leanest of them; none sure: the leanest. Without
    `lean`: every axis at its first choice, the memory axes at the smallest micro-batch and the first
    checkpointing choice whose candidate is not pruned."""
    order = {a: _choices(candidates, a) for a in axes}
    start = {a: labels[0] for a, labels in order.items()}
    if lean:
        held = [a for a in axes if a not in LEAN_AXES]
        fits = [
            c
            for c in candidates
            if c.name not in pruned and c.name in lean and all(c.axes[a] == start[a] for a in held)
        ]
        rank = {a: {label: i for i, label in enumerate(order[a])} for a in CLOSEST_FIRST if a in order}
        safe = [c for c in fits if sure is not None and c.name in sure]
        if safe:
            return dict(min(safe, key=lambda c: (tuple(rank[a][c.axes[a]] for a in rank), lean[c.name])).axes)
        if fits:
            return dict(min(fits, key=lambda c: lean[c.name]).axes)
    by_axes = {_key(c.axes, axes): c for c in candidates}
    for ckpt in order.get("checkpointing", [""]):
        trial = {**start, **({"batch": order["batch"][-1]} if "batch" in order else {})}
        if "checkpointing" in order:
            trial["checkpointing"] = ckpt
        found = by_axes.get(_key(trial, axes))
        if found is not None and found.name not in pruned:
            return trial
    return {**start, **({"batch": order["batch"][-1]} if "batch" in order else {})}


def staged_race(
    candidates: Sequence[Candidate],
    pruned: Container[str],
    measure: Callable[[str, int], float | str],
    stages: Sequence[Sequence[str]] = STAGES,
    budget_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    lean: Mapping[str, float] | None = None,
    sure: Container[str] | None = None,
    reserve: Callable[[], float] | None = None,
    **options: Any,
) -> tuple[Standing, tuple[StageReport, ...]]:
    """Race stage by stage (`options` go to race(); a stage's tie goes to its plainest choice, each
    axis's first); the merged standing and what each stage did.
    `budget_s`: each stage may spend the time left times its share of the candidates left to race;
    `lean` and `sure`: the predicted peaks and the candidates sure to fit the reference is chosen by
    (reference()); `reserve`: the seconds of the budget to keep for what follows the race (the
    finalists' loss checks), asked again as each stage starts."""
    axes = list(candidates[0].axes) if candidates else []
    options.setdefault("ties_to_first", True)  # the space lists each axis's plainest choice first
    plan = stage_plan(candidates, stages)
    sizes = [math.prod(len(_choices(candidates, a)) for a in s if a != FRONTIER) for s in plan]
    end = None if budget_s is None else clock() + budget_s
    leader = reference(candidates, axes, pruned, lean, sure)
    named = {c.name: c for c in candidates}
    micro = {label: i for i, label in enumerate(_choices(candidates, FRONTIER))} if FRONTIER in axes else {}

    def size(name: str) -> int:  # 0 for the largest micro-batch (the space lists it first)
        return micro.get(named[name].axes.get(FRONTIER, ""), 0)

    memo = _Memo(measure)
    entries: dict[str, Entry] = {}
    reports: list[StageReport] = []
    winner, stopped, rounds = None, "no stage ran", 0
    given_up = 0.0  # log ratio: what the stages so far gave up to plainer choices on a budget cut
    for i, stage in enumerate(plan):
        options["give_up"] = max(0.0, math.log1p(GIVE_UP) - given_up)
        share = left = 0.0
        if end is not None:
            kept = reserve() if reserve is not None else 0.0
            left = max(0.0, end - clock() - kept)
            share = left * sizes[i] / sum(sizes[i:])
            deadline = clock() + share
            # the stage's share, and the whole budget less the reserve asked again before each probe
            # (a compiled leader's check costs what its probe did: known only once it is measured)
            options["spent"] = lambda d=deadline, e=end: clock() > d or _spent(e, clock, reserve)
        before = len(memo.fresh)
        groups = frontier(candidates, pruned, leader, stage)
        standing = _race_stage(groups, memo, size, options)
        while _all_out_of_memory(standing) and not set(stage) & set(LADDER):
            leaner = step_down(leader, candidates, pruned, stage)  # the reference did not fit: a leaner one
            if leaner is None:
                break
            leader = leaner
            rounds += standing.rounds
            groups = frontier(candidates, pruned, leader, stage)
            standing = _race_stage(groups, memo, size, options)
        rounds, stopped = rounds + standing.rounds, standing.stopped
        given_up += _given_up(standing)
        if stopped.startswith(BUDGET_SPENT) and end is not None and not _spent(end, clock, reserve):
            # later stages still race
            stopped = f"{SHARE_SPENT}: {share:.0f} s of the {left:.0f} s left{stopped[len(BUDGET_SPENT) :]}"
        entries.update({n: e for n, e in standing.entries.items() if e.values or e.out or n not in entries})
        if standing.winner is not None:
            winner, leader = standing.winner, dict(named[standing.winner].axes)
        new = memo.fresh[before:]
        in_stage = sum(map(len, groups))
        reports.append(StageReport(stage, in_stage, len({n for n, _ in new}), len(new), standing.winner, stopped))
    survivors = tuple(n for n, e in entries.items() if not e.out and e.values)
    return Standing(winner, survivors, entries, rounds, stopped), tuple(reports)


SHARE_SPENT = "its share of the budget is spent"  # a stage's StageReport.stopped, the budget not yet


def _given_up(standing: Standing) -> float:
    """What a budget cut gave up to a plainer survivor: the log ratio of the best survivor's mean to
    the winner's (0 when the best won, or the race was not cut)."""
    if standing.winner is None or not standing.stopped.startswith(BUDGET_SPENT):
        return 0.0
    means = [e.mean_log for e in standing.entries.values() if e.values and not e.out]
    return max(0.0, max(means) - standing.entries[standing.winner].mean_log) if means else 0.0


def _spent(end: float, clock: Callable[[], float], reserve: Callable[[], float] | None) -> bool:
    """Whether the whole budget, less what is kept for the finalists' checks, is spent."""
    return clock() > end - (reserve() if reserve is not None else 0.0)


def frontier(
    candidates: Sequence[Candidate], pruned: Container[str], leader: Mapping[str, str], stage: Sequence[str]
) -> list[list[str]]:
    """A stage's candidates, one list per combination of its axes but the micro-batch, plainest
    combination first (each axis's order): those not pruned and the leader's on every axis outside
    the stage, largest micro-batch first (the space lists it so). The stage races each combination at
    the first of its list that does not run out of memory (_fitted)."""
    axes = [a for a in (candidates[0].axes if candidates else {}) if a in stage and a != FRONTIER]
    rank = {a: {label: i for i, label in enumerate(_choices(candidates, a))} for a in axes}
    groups: dict[tuple[int, ...], list[str]] = {}
    for c in candidates:
        held = all(label == leader[a] for a, label in c.axes.items() if a not in stage and a != FRONTIER)
        if held and c.name not in pruned:
            groups.setdefault(tuple(rank[a][c.axes[a]] for a in axes), []).append(c.name)
    return [groups[key] for key in sorted(groups)]


def _race_stage(
    groups: list[list[str]], memo: _Memo, size: Callable[[str], int], options: Mapping[str, Any]
) -> Standing:
    """The race over the stage's combinations (frontier()), each at the largest micro-batch that fits."""
    return race(_fitted(groups, memo, options.get("spent"), size), memo, known=memo.known, **options)


def _fitted(
    groups: Sequence[Sequence[str]], memo: _Memo, spent: Callable[[], bool] | None, size: Callable[[str], int]
) -> list[str]:
    """The names a stage races, its combinations in their order (plainest first): each combination
    walked down from its largest micro-batch until one does not run out of memory on its first probe
    (what ran out stays in, out at once; a combination all out of memory stays in as such), while the
    budget lasts. The walk probes the largest micro-batches first, across the combinations (`size`: a
    name's micro-batch rank, 0 the largest): a budget that ends during the walk has measured those
    most likely to be fastest. At a fixed global batch a larger micro-batch does the same arithmetic
    in fewer, larger launches: the walk stops at the first that fits, and the smaller ones of that
    combination are not raced (llama-1b at 24 GB on an H100: in each of the twin's 10 combinations
    where two or more micro-batches ran, each larger one ran faster;
    results/recommend/llama-1b-24gb-twin/liger/)."""
    walked: list[list[str]] = [[] for _ in groups]
    queue = [(size(group[0]), i, 0) for i, group in enumerate(groups) if group]
    heapq.heapify(queue)
    while queue:
        _, i, step = heapq.heappop(queue)
        name = groups[i][step]
        if spent is not None and spent() and not memo.known(name, 0):
            break
        walked[i].append(name)
        if memo(name, 0) == "oom" and step + 1 < len(groups[i]):
            heapq.heappush(queue, (size(groups[i][step + 1]), i, step + 1))
    return [name for names in walked for name in names]


LADDER = ("optimizer", "checkpointing")  # the reference's way down when it runs out of memory: step_down()


def _all_out_of_memory(standing: Standing) -> bool:
    return bool(standing.entries) and all(e.out == "oom" for e in standing.entries.values())


def step_down(
    leader: Mapping[str, str], candidates: Sequence[Candidate], pruned: Container[str], stage: Sequence[str]
) -> dict[str, str] | None:
    """The next leaner reference after `leader` ran out of memory in every candidate of a stage (a
    model the memory model predicts no activations for gives no lean start): more checkpointing
    first (it keeps the training math), then the next optimizer from AdamW's end (the space's order),
    each at its lightest checkpointing first. None when nothing leaner is left."""
    axes = [a for a in LADDER if a in leader]
    if not axes:
        return None
    order = {a: _choices(candidates, a) for a in axes}
    ladder = [
        dict(zip(axes, pair, strict=True))
        for pair in itertools.product(*(order[a] for a in axes))  # optimizer outer, checkpointing inner
    ]
    here = ladder.index({a: leader[a] for a in axes})
    for step in ladder[here + 1 :]:
        trial = {**leader, **step}
        if any(
            c.name not in pruned and all(c.axes[a] == trial[a] for a in trial if a not in stage and a != FRONTIER)
            for c in candidates
        ):
            return trial
    return None


def stage_plan(candidates: Sequence[Candidate], stages: Sequence[Sequence[str]] = STAGES) -> list[tuple[str, ...]]:
    """The stages that have a choice to make here, each as the space's axes it races."""
    axes = list(candidates[0].axes) if candidates else []
    plan = [tuple(a for a in s if a in axes) for s in stages]
    return [s for s in plan if s and any(len(_choices(candidates, a)) > 1 for a in s)]


class _Memo:
    """measure(), once per (candidate, round): the leader met again in a later stage reuses its figures."""

    def __init__(self, measure: Callable[[str, int], float | str]) -> None:
        self.measure = measure
        self.seen: dict[tuple[str, int], float | str] = {}
        self.fresh: list[tuple[str, int]] = []

    def known(self, name: str, rnd: int) -> bool:
        return (name, rnd) in self.seen

    def __call__(self, name: str, rnd: int) -> float | str:
        if (name, rnd) not in self.seen:
            self.seen[(name, rnd)] = self.measure(name, rnd)
            self.fresh.append((name, rnd))
        return self.seen[(name, rnd)]


def _choices(candidates: Sequence[Candidate], axis: str) -> list[str]:
    out: list[str] = []
    for c in candidates:
        if c.axes[axis] not in out:
            out.append(c.axes[axis])
    return out


def _key(axes_map: Mapping[str, str], axes: Sequence[str]) -> tuple[str, ...]:
    return tuple(axes_map[a] for a in axes)
