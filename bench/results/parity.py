"""Does a technique keep training the same? Each row's loss over its final window
(final_window_loss, bench/results/losscurve.py) against the reference scenario's, within a band
measured from the reference's own seed-to-seed spread (docs/parity.md).

The reference (`baseline`, or the matrix's `parity_reference`) runs at its own seed and, with
`parity_seeds = N`, as N - 1 more scenarios REF.seedS at the seeds after it (seed_scenarios). Its
n seeds' final-window losses r_1..r_n (the median over each one's ok repeats) give the band: the
half-width of the 95% prediction interval of one more seed,

    band = t(0.975, n - 1) x sd(r) x sqrt(1 + 1/n),   at least REL_FLOOR x |mean(r)|,

and a row's statistic is delta = its final-window loss - mean(r). Its verdict:

- diverged: a loss that is not finite (in its curve or at its end, or the row's status says so),
  or a final-window loss above EXPLODE x the reference's initial loss;
- deviates: |delta| > band (either way: a loss that falls faster is a different training too);
- equivalent: |delta| <= band;
- reference: the reference's own rows and its seeds' (once there are two seeds);
- "" (no verdict): no band yet (one seed), or no loss to judge (a failed or skipped row).

`judge` is pure; `add_parity` sets the parity columns of a run's rows (as add_scaling does the
scaling columns), after every row, so a resumed run's rows get them from results.csv alone.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import BadInput
from ..planner.matrix import DEFAULT_PARITY_REFERENCE as DEFAULT_REFERENCE
from ..planner.matrix import MAX_PARITY_SEEDS as MAX_SEEDS
from ..stats import t_quantile

VERDICTS = ("equivalent", "deviates", "diverged", "reference")
SEVERITY = ("diverged", "deviates", "equivalent", "reference")  # worst first: a scenario's over its rows
REL_FLOOR = 0.002  # the band is at least 0.2% of the reference's loss: seeds that agree to the last digit
EXPLODE = 1.5  # a final-window loss 1.5x the reference's initial loss has exploded
HUGE = 1e100  # a loss beyond this counts as not finite (its square would overflow the spread)
COLUMNS = ("parity", "parity_delta", "parity_band", "parity_seeds", "parity_ref")


@dataclass(frozen=True)
class Parity:
    verdict: str  # VERDICTS, or "" (no verdict)
    delta: float  # final-window loss - the reference seeds' mean (nan when unknown)
    band: float  # the band's half-width (nan with fewer than 2 seeds)
    seeds: int  # reference seeds the band was measured from
    why: str = ""  # what decided it, or why there is none

    def text(self) -> str:
        """'loss equivalent (delta +0.0031 within ±0.0214, 3 seeds)'."""
        if not self.verdict:
            return f"loss not judged ({self.why})" if self.why else "loss not judged"
        if self.verdict == "reference":
            return "the loss reference"
        figures = []
        if not math.isnan(self.delta):
            figures.append(f"delta {self.delta:+.4g}")
        if not math.isnan(self.band):
            where = "within" if abs(self.delta) <= self.band else "beyond"
            figures[-1:] = [f"{figures[-1]} {where} ±{self.band:.4g}"] if figures else [f"band ±{self.band:.4g}"]
            figures.append(f"{self.seeds} seeds")
        tail = f" ({', '.join(figures)})" if figures else ""
        return f"loss {self.verdict}{tail}" + (f": {self.why}" if self.verdict == "diverged" and self.why else "")


def band(reference: Sequence[float]) -> float:
    """The half-width of the 95% prediction interval of one more seed's final-window loss, from the
    reference seeds' (at least REL_FLOOR of their mean); nan with fewer than two finite values."""
    values = [float(v) for v in reference if _usable(v)]
    if len(values) < 2:
        return math.nan
    n, mean = len(values), statistics.fmean(values)
    half = t_quantile(0.975, n - 1) * statistics.stdev(values) * math.sqrt(1 + 1 / n)
    return max(half, REL_FLOOR * abs(mean))


def judge(candidate: float, reference: Sequence[float], *, start: float = math.nan, finite: bool = True) -> Parity:
    """The verdict of a final-window loss against the reference seeds' (`start`: the reference's
    initial loss; `finite`: the row's every loss was finite)."""
    ref = [float(v) for v in reference if _usable(v)]
    mean = statistics.fmean(ref) if ref else math.nan
    half = band(ref)
    delta = candidate - mean if _usable(candidate) else math.nan
    if not finite or not _usable(candidate):
        return Parity("diverged", delta, half, len(ref), "a loss that is not finite")
    if math.isfinite(start) and start > 0 and candidate > EXPLODE * start:
        return Parity(
            "diverged", delta, half, len(ref), f"final loss above {EXPLODE:g}x the reference's initial {start:.4g}"
        )
    if not ref:
        return Parity("", delta, half, 0, "the reference has no finite loss")
    if math.isnan(half):
        return Parity("", delta, half, len(ref), "the reference ran at one seed: set parity_seeds = 3")
    return Parity("deviates" if abs(delta) > half else "equivalent", delta, half, len(ref))


def _usable(value: float) -> bool:
    return math.isfinite(value) and abs(value) < HUGE


# -- the reference's seeds -----------------------------------------------------------------------
def seed_name(reference: str, seed: int) -> str:
    return f"{reference}.seed{seed}"


def is_reference(name: str, reference: str) -> bool:
    """The reference itself or one of its seed scenarios (REF.seedS)."""
    return name == reference or re.fullmatch(re.escape(reference) + r"\.seed\d+", name) is not None


def seed_scenarios(scenarios: Sequence[Any], reference: str, seeds: int) -> tuple[Any, ...]:
    """The scenarios with the reference's seeds appended: `seeds - 1` copies of it at the seeds
    after its own, named REF.seedS. Bad input when a name is taken or the count is out of range."""
    if not isinstance(seeds, int) or isinstance(seeds, bool) or not 1 <= seeds <= MAX_SEEDS:
        raise BadInput(f"parity_seeds = {seeds!r} must be a whole number from 1 to {MAX_SEEDS}")
    found = [s for s in scenarios if s.name == reference]
    if seeds == 1 or not found:
        return tuple(scenarios)
    ref = found[0]
    names = {s.name for s in scenarios}
    extra = []
    for i in range(1, seeds):
        seed = (ref.seed + i) % 2**32
        name = seed_name(reference, seed)
        if name in names:
            raise BadInput(f"scenario '{name}': the name of the reference's seed {seed} (parity_seeds) is taken")
        description = f"parity: {reference} at seed {seed}"
        extra.append(ref.replace(name=name, seed=seed, description=description))
    return (*scenarios, *extra)


# -- a run's rows ----------------------------------------------------------------------------------
def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


def add_parity(rows: list[dict[str, Any]], reference: str = DEFAULT_REFERENCE) -> None:
    """Set the parity columns of every row from the rows' final_window_loss and initial_loss."""
    refs: dict[str, list[float]] = {}
    starts: list[float] = []
    for r in rows:
        if r.get("status") == "ok" and is_reference(str(r["scenario"]), reference):
            value = _number(r.get("final_window_loss"))
            if math.isfinite(value):
                refs.setdefault(str(r["scenario"]), []).append(value)
            if math.isfinite(_number(r.get("initial_loss"))):
                starts.append(_number(r.get("initial_loss")))
    seeds = [statistics.median(v) for v in refs.values()]
    start = statistics.median(starts) if starts else math.nan
    for r in rows:
        for column in COLUMNS:
            r.pop(column, None)
        status = r.get("status")
        if not refs or status not in ("ok", "diverged"):
            continue
        if is_reference(str(r["scenario"]), reference):
            if len(seeds) < 2:  # one seed: nothing is judged against it, so it is not marked either
                continue
            p = Parity(
                "reference", _number(r.get("final_window_loss")) - statistics.fmean(seeds), band(seeds), len(seeds)
            )
        else:
            finite = status == "ok" and _losses_finite(r)
            p = judge(_number(r.get("final_window_loss")), seeds, start=start, finite=finite)
        r.update(
            {
                "parity": p.verdict,
                "parity_delta": None if math.isnan(p.delta) else p.delta,
                "parity_band": None if math.isnan(p.band) else p.band,
                "parity_seeds": p.seeds,
                "parity_ref": reference,
            }
        )


def _losses_finite(row: dict[str, Any]) -> bool:
    """Was every loss of the row finite? Not when loss_finite is false (a bool, numpy's, or the CSV's
    text) or the worker counted a non-finite loss (nonfinite_losses), one early in the curve too."""
    flag = row.get("loss_finite")
    if flag is False or str(flag).strip().lower() == "false":
        return False
    try:
        counted = float(row.get("nonfinite_losses") or 0)
    except (TypeError, ValueError):
        counted = 0.0
    return not counted > 0


def row_parity(row: dict[str, Any]) -> Parity:
    """A results row's parity columns as a Parity (what compare and the report show)."""
    verdict = row.get("parity")
    verdict = verdict if isinstance(verdict, str) else ""
    seeds = _number(row.get("parity_seeds"))
    return Parity(
        verdict, _number(row.get("parity_delta")), _number(row.get("parity_band")), int(seeds) if seeds == seeds else 0
    )


def worst(verdicts: Sequence[Any]) -> str:
    """A scenario's verdict over its rows: the worst of them; "" when none has one."""
    known = [v for v in verdicts if isinstance(v, str) and v in SEVERITY]
    return min(known, key=SEVERITY.index) if known else ""
