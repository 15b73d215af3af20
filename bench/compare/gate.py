"""The gate's statistics: one quantity (speed or memory) of every scenario judged at once, with the
error controlled across the comparison, and what each judgement could have detected.

The rule, for each scenario that ran ok on both sides:
- the change is that of the medians over the ok repeats (what the table shows);
- the noise is the scenario's spread: the standard deviation of the log figures around each
  side's own mean, pooled over the two sides;
- with at least MIN_DF degrees of freedom in that spread (3 ok repeats a side), a one-sided
  t-test on the mean log figures asks whether the change is more than noise; Holm's step-down
  method adjusts the p-values over every scenario tested, and the quantities judged share alpha
  (Bonferroni), so the chance that an unchanged matrix shows any false verdict stays at alpha for
  the whole comparison, under the test's assumptions (offsets between runs, which the repeats of
  one run cannot show, are left to the floor);
- a change counts when it is beyond the floor (the --threshold) and its adjusted p is at most
  alpha; beyond the floor but not significant is "noisy"; with too little spread to test, the
  floor alone decides (the "threshold only" judgements);
- `detectable_pct`: the larger of the floor and the change in the bad direction that the test
  finds POWER of the time at this spread and these repeats (at the Bonferroni level
  alpha / (m x quantities), a little stricter than Holm's), so an "unchanged" says what it could
  have missed.

Everything here is pure arithmetic on lists of figures, so the power study (validation/power.py)
runs the very rule compare runs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ..stats import MIN_REPEATS, holm, t_quantile, t_sf

MIN_DF = 2 * (MIN_REPEATS - 1)  # the spread's degrees of freedom a test needs: 3 repeats a side
POWER = 0.8  # detectable_pct: the change the test finds this often
MAX_PLAN_REPEATS = 50  # repeats_needed looks no further


@dataclass(frozen=True)
class Rule:
    """How one quantity is judged: its floor in %, which way is better, the family-wise level of the
    whole comparison, and how many quantities share it (Bonferroni across them, Holm within)."""

    floor_pct: float
    direction: int  # +1 when higher is better (samples/s), -1 when lower is (memory)
    alpha: float = 0.05
    quantities: int = 1


@dataclass(frozen=True)
class Sample:
    """One scenario's figures of one quantity: the base's and the new run's ok repeats."""

    base: Sequence[float]
    new: Sequence[float]


@dataclass(frozen=True)
class Judgement:
    change_pct: float  # median new vs median base, rounded to 6 decimals (judged as shown)
    spread_pct: float  # the pooled spread of the log figures x 100 (about the CV in %); nan if none
    df: int  # its degrees of freedom
    p_value: float  # one-sided, in the direction of the change; nan when not tested
    p_holm: float  # Holm-adjusted over the tested scenarios, times the quantities sharing alpha
    detectable_pct: float  # see the module's docstring; nan when not tested
    verdict: str  # regression, improvement, noisy or unchanged
    tested: bool


def judge(samples: Sequence[Sample], rule: Rule) -> list[Judgement]:
    """Judge every sample (each with figures on both sides) as one family."""
    prepared = [_prepare(s) for s in samples]
    adjusted = [p if math.isnan(p) else min(1.0, rule.quantities * p) for p in holm([p for *_, p in prepared])]
    tested = sum(not math.isnan(p) for *_, p in prepared)
    out = []
    for (change, spread, df, se, p), p_holm in zip(prepared, adjusted, strict=True):
        ok = not math.isnan(p)
        detectable = detectable_pct(spread, df, se, tested, rule) if ok else math.nan
        out.append(Judgement(change, 100 * spread, df, p, p_holm, detectable, _verdict(change, p_holm, rule), ok))
    return out


def _prepare(sample: Sample) -> tuple[float, float, int, float, float]:
    """(change %, spread, df, standard error of the mean log difference, one-sided p or nan)."""
    xs, ys = _finite(sample.base), _finite(sample.new)
    if not xs or not ys:
        raise ValueError("a sample needs figures on both sides")
    change = round(percent_change(statistics.median(xs), statistics.median(ys)), 6)
    spread, df = pooled_spread([xs, ys])
    positive = min(xs + ys) > 0
    if df < MIN_DF or not positive or math.isnan(change):
        return change, spread, df, math.nan, math.nan
    se = spread * math.sqrt(1 / len(xs) + 1 / len(ys))
    shift = statistics.fmean(map(math.log, ys)) - statistics.fmean(map(math.log, xs))
    toward = 1.0 if change > 0 else -1.0  # the direction of the change shown
    if se == 0:  # every repeat of both sides identical: any shift is real
        return change, spread, df, se, 0.0 if shift * toward > 0 else 1.0
    return change, spread, df, se, t_sf(shift * toward / se, df)


def _verdict(change: float, p_holm: float, rule: Rule) -> str:
    if not abs(change) > rule.floor_pct:  # exactly at the floor is within it
        return "unchanged"
    word = "improvement" if change * rule.direction > 0 else "regression"
    if math.isnan(p_holm) or p_holm <= rule.alpha + 1e-12:
        return word
    return "noisy"


def pooled_spread(sets: Sequence[Sequence[float]]) -> tuple[float, int]:
    """The standard deviation of the log figures around each set's own mean, pooled over the sets
    (those with 2 or more positive figures), and its degrees of freedom; (nan, 0) without any."""
    squares, df = 0.0, 0
    for values in sets:
        logs = [math.log(v) for v in values if v > 0 and math.isfinite(v)]
        if len(logs) < 2:
            continue
        mean = statistics.fmean(logs)
        squares += sum((v - mean) ** 2 for v in logs)
        df += len(logs) - 1
    return (math.sqrt(squares / df), df) if df else (math.nan, 0)


def detectable_pct(spread: float, df: int, se: float, family: int, rule: Rule) -> float:
    """The larger of the floor and `noise_limit_pct`: the smallest change that counts."""
    return max(float(rule.floor_pct), noise_limit_pct(spread, df, se, family, rule))


def noise_limit_pct(spread: float, df: int, se: float, family: int, rule: Rule) -> float:
    """The change in the bad direction that a one-sided t-test at level alpha / family (df degrees
    of freedom, standard error se of the mean log difference) finds with probability POWER, in %
    of the base; nan without a spread."""
    if math.isnan(spread) or df < 1:
        return math.nan
    level = rule.alpha / (max(family, 1) * rule.quantities)
    shift = (t_quantile(1 - level, df) + t_quantile(POWER, df)) * se
    return 100 * (1 - math.exp(-shift)) if rule.direction > 0 else 100 * math.expm1(shift)


def repeats_needed(spread: float, target_pct: float, family: int, rule: Rule) -> int | None:
    """The fewest repeats a side (the same on both) with which the test would find a change of
    target_pct at this spread (noise_limit_pct, the floor aside) with `family` scenarios judged
    together; None when MAX_PLAN_REPEATS are not enough or there is no spread."""
    if math.isnan(spread):
        return None
    for n in range(MIN_REPEATS, MAX_PLAN_REPEATS + 1):
        df = 2 * (n - 1)
        if df >= MIN_DF and noise_limit_pct(spread, df, spread * math.sqrt(2 / n), family, rule) <= target_pct:
            return n
    return None


def percent_change(base: float, new: float) -> float:
    """(new / base - 1) x 100; a move away from zero is infinite."""
    if base == 0:
        return 0.0 if new == 0 else math.copysign(math.inf, new)
    return (new / base - 1.0) * 100.0


def _finite(values: Sequence[float]) -> list[float]:
    return [float(v) for v in values if math.isfinite(float(v))]
