"""The stopping rule of `gpubench recommend`: a race with elimination on separated intervals.

Every surviving candidate is measured once a round (one short probe: its figure on the objective,
higher is better: samples/s, or samples per joule). From round `min_rounds` on, the figures are
compared on a log scale with a pooled estimate of the measurement noise: every survivor's
deviations from its own mean, pooled over the survivors (the same workload on the same GPU, so one
noise level, and many degrees of freedom after two rounds). A candidate is eliminated when the
best's mean exceeds its own by more than t(1 - alpha / m, df) standard errors, m the number of
comparisons that round and r the rounds that test (Bonferroni over both: alpha / (m * r)): so the
chance that the true best is ever eliminated is at most `alpha` over the whole race, whatever the
others are (tests/test_recommend_race.py checks it on simulated races). The race ends when one
candidate is left, at `max_rounds` (the survivors are then tied within the noise, said so: the best
mean wins, or with `ties_to_first` the survivor listed first, the caller's plainest: a technique
earns its place by a measured gain), or when the caller's budget is spent, which is asked before
each probe not yet measured (a figure the caller already holds, `known`, costs nothing; a round cut
short leaves some candidates with a figure fewer, and no elimination is tested on it). A race the
budget cut with survivors not yet separated may, with `give_up`, lead on with a plainer survivor:
the first in the caller's order whose mean is within `give_up` (a log ratio) of the best's and not
separated from it; so a 1% gain measured once (whole-model compile on the MoE) does not make every
later probe a compiled one, and what is given up is bounded.

An out-of-memory or failed probe removes its candidate at once (a result, not a noise draw).
Pure: the caller measures; race.py only decides.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..stats import t_quantile

ALPHA = 0.05  # over the whole race: the chance of eliminating the true best (docs/recommend.md)
MIN_ROUNDS = 2  # no noise estimate before two measurements each
MAX_ROUNDS = 6
BUDGET_SPENT = "the budget is spent"  # Standing.stopped when the caller's spent() ended the race


@dataclass
class Entry:
    name: str
    values: list[float] = field(default_factory=list)  # the objective, one per round measured
    out: str = ""  # why it left the race ("" while racing)
    round_out: int | None = None

    @property
    def mean_log(self) -> float:
        return statistics.fmean(math.log(v) for v in self.values)


@dataclass(frozen=True)
class Standing:
    winner: str | None
    survivors: tuple[str, ...]
    entries: Mapping[str, Entry]
    rounds: int
    stopped: str  # why the race ended


def pooled_sd(entries: Sequence[Entry]) -> tuple[float, int]:
    """The pooled standard deviation of log figures, and its degrees of freedom."""
    squares, df = 0.0, 0
    for e in entries:
        if len(e.values) >= 2:
            m = e.mean_log
            squares += sum((math.log(v) - m) ** 2 for v in e.values)
            df += len(e.values) - 1
    return (math.sqrt(squares / df) if df else math.nan), df


def eliminate(entries: Sequence[Entry], alpha: float, floor: float = 0.0) -> list[tuple[str, str]]:
    """(name, why) of the racing entries the best's interval separates at level `alpha` this round.
    `floor`: the smallest relative noise assumed (a CPU stand-in can measure identical figures)."""
    racing = [e for e in entries if not e.out and e.values]
    if len(racing) < 2:
        return []
    sd, df = pooled_sd(racing)
    if df == 0 or math.isnan(sd):
        return []
    sd = max(sd, floor)
    best = max(racing, key=lambda e: e.mean_log)
    t = t_quantile(1.0 - alpha / (len(racing) - 1), df)
    gone = []
    for e in racing:
        if e is best:
            continue
        se = sd * math.sqrt(1 / len(e.values) + 1 / len(best.values))
        gap = best.mean_log - e.mean_log
        if gap > t * se:
            slower = 1 - math.exp(-gap)
            low = 1 - math.exp(-(gap - t * se))
            high = 1 - math.exp(-(gap + t * se))
            gone.append((e.name, f"slower than {best.name} by {slower:.1%} (interval {low:.1%} to {high:.1%})"))
    return gone


def race(
    names: Sequence[str],
    measure: Callable[[str, int], float | str],
    *,
    alpha: float = ALPHA,
    min_rounds: int = MIN_ROUNDS,
    max_rounds: int = MAX_ROUNDS,
    floor: float = 0.0,
    spent: Callable[[], bool] = lambda: False,
    ties_to_first: bool = False,
    give_up: float = 0.0,
    known: Callable[[str, int], bool] = lambda _name, _rnd: False,
) -> Standing:
    """Race `names`: measure(name, round) gives the objective (> 0, higher better) or a status
    string (oom, error, ...) that removes the candidate. `ties_to_first`: survivors tied at
    `max_rounds` go to the one earliest in `names` (not the best mean, which the noise can order).
    `give_up`: cut by the budget, the survivor earliest in `names` within that log ratio of the best
    mean and not separated from it leads (plainer_on_cut). `known(name, round)`: that figure is
    already measured (an earlier stage's, a walk down to the largest micro-batch that fits): it costs
    nothing, so the budget does not stop it."""
    entries = {n: Entry(n) for n in names}
    tied = f"{max_rounds} rounds: the survivors are tied within the noise"
    stopped, rounds = tied, 0
    for rnd in range(max_rounds):
        racing = [e for e in entries.values() if not e.out]
        if len(racing) <= 1 and rnd > 0:
            stopped = "one candidate left"
            break
        if spent() and not (racing and known(racing[0].name, rnd)):
            stopped = BUDGET_SPENT
            break
        rounds = rnd + 1
        for e in racing:
            if e is not racing[0] and spent() and not known(e.name, rnd):  # between probes, not only rounds
                stopped = BUDGET_SPENT
                break
            got = measure(e.name, rnd)
            if isinstance(got, str) or not got > 0 or not math.isfinite(got):
                e.out, e.round_out = (got if isinstance(got, str) else "no figure"), rnd
            else:
                e.values.append(float(got))
        if stopped == BUDGET_SPENT:
            break
        if rounds >= min_rounds:
            per_round = alpha / (max_rounds - min_rounds + 1)
            for name, why in eliminate(list(entries.values()), per_round, floor):
                entries[name].out, entries[name].round_out = why, rnd
    else:
        racing = [e for e in entries.values() if not e.out]
        if len(racing) <= 1:
            stopped = "one candidate left"
    survivors = [e for e in entries.values() if not e.out and e.values]
    if not survivors and rounds > 0:
        stopped = "no candidate left: every probe failed or ran out of memory"
    winner = max(survivors, key=lambda e: e.mean_log).name if survivors else None
    if ties_to_first and stopped == tied and len(survivors) > 1:
        winner = survivors[0].name  # tied within the noise after every round: the plainest
        stopped = f"{stopped}; the plainest, {winner}, leads"
    if give_up > 0 and stopped == BUDGET_SPENT and len(survivors) > 1:
        plainer = plainer_on_cut(survivors, give_up, alpha, floor)
        if plainer is not None and plainer.name != winner:
            gain = math.exp(max(survivors, key=lambda e: e.mean_log).mean_log - plainer.mean_log) - 1
            winner = plainer.name
            stopped = f"{stopped}; {winner} leads: the best mean, {gain:.1%} ahead, is not separated from it"
    return Standing(winner, tuple(e.name for e in survivors), entries, rounds, stopped)


def plainer_on_cut(survivors: Sequence[Entry], give_up: float, alpha: float, floor: float = 0.0) -> Entry | None:
    """The first of `survivors` (the caller's order: plainest first) whose mean is within `give_up`
    (a log ratio) of the best's and, where the race has a noise estimate, not separated from it by
    a one-sided t interval at `alpha`; None when none is (the best itself always is, give_up > 0)."""
    best = max(survivors, key=lambda e: e.mean_log)
    sd, df = pooled_sd(survivors)
    for e in survivors:
        gap = best.mean_log - e.mean_log
        if gap >= give_up:
            continue
        if df and not math.isnan(sd):
            se = max(sd, floor) * math.sqrt(1 / len(e.values) + 1 / len(best.values))
            if gap > t_quantile(1.0 - alpha, df) * se:
                continue  # measured slower: the gain is real, however small
        return e
    return None
