"""The verdict rules of `gpubench verify`: pure arithmetic on figures, no pandas, no torch.

A claim states a value, a direction and a tolerance, which make the region where it holds:
  higher  at least claimed x (1 - tolerance)            (a speed-up "of 2x or more")
  lower   at most claimed x (1 + tolerance)             (a memory cut "to 40% or less")
  equal   within claimed x (1 -/+ tolerance)            ("about 20-30% slower", "the same")
A measured ratio comes with its two-sided (1 - ALPHA) interval (Student's t on the log figures of
the two scenarios' repeats, their spread pooled as compare's gate pools it: bench/compare/gate.py);
an arithmetic figure is exact (its interval is the figure itself). Then:
  holds           the interval lies inside the region
  does not hold   the interval lies wholly outside it
  inconclusive    the interval straddles an edge (or there is no interval: fewer than 2 repeats a
                  side); the repeats a side that would decide it are those compare --detect gives
                  for a change as large as the distance from the measured figure to that edge.
A true effect inside the region is called "does not hold" only when the interval misses it, which
happens at most ALPHA of the time (less: one tail of it), whatever the noise and the repeats.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ..compare.gate import MAX_PLAN_REPEATS, Rule, pooled_spread, repeats_needed
from ..stats import t_quantile

DIRECTIONS = ("higher", "lower", "equal")
VERDICTS = ("holds", "does not hold", "inconclusive", "not comparable here")
ALPHA = 0.05  # the interval's error rate, and so the bound on a wrong "does not hold"


@dataclass(frozen=True)
class Effect:
    """What a claim says: a value (in its quantity's unit), which way, and how loosely (in %)."""

    claimed: float
    direction: str
    tolerance_pct: float

    def region(self) -> tuple[float, float]:
        """(low, high): where the claim holds; an open side is 0 or infinity."""
        below, above = self.claimed * (1 - self.tolerance_pct / 100), self.claimed * (1 + self.tolerance_pct / 100)
        if self.direction == "higher":
            return below, math.inf
        if self.direction == "lower":
            return 0.0, above
        return below, above

    def describe(self) -> str:
        low, high = self.region()
        if self.direction == "higher":
            return f">= {low:.3g}"
        if self.direction == "lower":
            return f"<= {high:.3g}"
        return f"{low:.3g}-{high:.3g}"


@dataclass(frozen=True)
class Measurement:
    """A measured figure and its interval (nan without one); spread and repeats when it is a ratio
    of repeats (for the repeats that would decide)."""

    value: float
    low: float = math.nan
    high: float = math.nan
    spread: float = math.nan  # the pooled standard deviation of the log figures
    repeats: int = 0  # the fewer ok repeats of the two sides (0: arithmetic, exact)

    @staticmethod
    def exact(value: float) -> Measurement:
        return Measurement(value, value, value)


def ratio(reference: Sequence[float], treatment: Sequence[float], alpha: float = ALPHA) -> Measurement:
    """treatment / reference as the ratio of the geometric means of the repeats, with its two-sided
    (1 - alpha) t interval; no interval with fewer than 2 positive figures a side."""
    xs = [float(v) for v in reference if math.isfinite(v) and v > 0]
    ys = [float(v) for v in treatment if math.isfinite(v) and v > 0]
    if not xs or not ys:
        raise ValueError("a ratio needs a positive figure on each side")
    shift = statistics.fmean(map(math.log, ys)) - statistics.fmean(map(math.log, xs))
    n = min(len(xs), len(ys))
    spread, df = pooled_spread([xs, ys])
    if min(len(xs), len(ys)) < 2 or df < 1:
        return Measurement(math.exp(shift), repeats=n)
    half = t_quantile(1 - alpha / 2, df) * spread * math.sqrt(1 / len(xs) + 1 / len(ys))
    return Measurement(math.exp(shift), math.exp(shift - half), math.exp(shift + half), spread, n)


@dataclass(frozen=True)
class Verdict:
    verdict: str  # one of VERDICTS
    repeats_needed: int | None = None  # inconclusive: the repeats a side that would decide
    why: str = ""  # inconclusive: why, and what would decide it


def judge(effect: Effect, m: Measurement) -> Verdict:
    """holds, does not hold or inconclusive (see the module's docstring)."""
    low, high = effect.region()
    if math.isnan(m.low) or math.isnan(m.high):
        return Verdict(
            "inconclusive",
            None,
            f"{m.repeats} repeat a side gives no interval: run with --repeats 3 or more",
        )
    if low <= m.low and m.high <= high:
        return Verdict("holds")
    if m.high < low or m.low > high:
        return Verdict("does not hold")
    edge = low if m.low < low else high  # the edge the interval straddles
    needed = decide_repeats(m, edge)
    more = (
        f"about {needed} repeats a side would decide it"
        if needed is not None
        else f"more than {MAX_PLAN_REPEATS} repeats a side would be needed (the figure sits at the edge {edge:.3g})"
    )
    return Verdict("inconclusive", needed, f"the interval straddles {edge:.3g}: {more}")


def decide_repeats(m: Measurement, edge: float) -> int | None:
    """The repeats a side at which a change as large as measured-to-edge is found POWER of the time
    (bench.compare.gate.repeats_needed, as `compare --detect` plans); None beyond MAX_PLAN_REPEATS."""
    if math.isnan(m.spread) or edge <= 0 or m.value == edge:
        return None
    if m.value > edge:  # the figure must be shown above the edge: a drop of that size from the figure
        target, direction = 100 * (1 - edge / m.value), 1
    else:
        target, direction = 100 * (edge / m.value - 1), -1
    return repeats_needed(m.spread, target, 1, Rule(floor_pct=0.0, direction=direction, alpha=ALPHA))
