"""The judged metrics, one row each: torch-free data that compare, history, summarize and the
report read instead of lists of their own.

A metric is a figure of the results table (its `name` is its results.csv column) that some stage
judges. Where it is judged (`judged_in`):

- compare: one row per scenario in `gpubench compare`. With a threshold, the gate judges its
  median change (bench.compare.gate); without one it is the loss, judged on finiteness only, or
  its parity verdict, judged on turning from equivalent to deviates or diverged (and back).
- history: a column of the history store, per result (median and spread) and per repeat, shown by
  `history show --metric`; with a threshold, `history check` judges it against the series'
  baseline, without one it is stored and shown only.
- summary: bench.results.summarize gives its change vs the baseline scenario and what that change
  is worth against the noise of the repeats (METRIC_vs_baseline_pct, METRIC_vs_baseline_noise).
- report: the report's findings name the best scenario on it (`best`, `better`); it must be
  judged in the summary too.

A threshold is set per group (`threshold`): "speed" is --threshold, "memory" --memory-threshold,
"energy" --energy-threshold (bench.compare.Thresholds' speed_pct, memory_pct and energy_pct); the
metrics of a group share its default.
`rank_aggregation` says how a multi-process job's figure comes from its ranks': sum (the ranks'
work adds up), min, max, mean, slowest (the rank with the longest median step), rank0 (rank 0's).
It is read off the column's rank rule, the one bench/worker/ranks.py applies (peak memory's is the
parent's NVML reading of the largest GPU).

A metric is declared once, as the `metric=` of its column in bench/catalogue.py (its name, unit and
rank rule are the column's); METRICS is made from those rows. This module imports only the
catalogue, torch-free: `gpubench --help` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .catalogue import RANK_RULES, Column, judged

PLACES = ("compare", "history", "summary", "report")
DIRECTIONS = ("higher", "lower")  # which way is better
RANK_AGGREGATIONS = ("sum", "min", "max", "mean", "slowest", "rank0")
THRESHOLD_GROUPS = ("speed", "memory", "energy")  # bench.compare.Thresholds: speed_pct, memory_pct, energy_pct

Place = Literal["compare", "history", "summary", "report"]


@dataclass(frozen=True)
class Metric:
    name: str  # its results.csv column, and its name in compare's and history's rows
    unit: str
    direction: str  # "higher" or "lower" is better
    default_threshold_pct: float | None  # the smallest change that counts; None: not judged on its size
    threshold: str | None  # the group whose threshold applies ("speed", "memory"); None with no threshold
    rank_aggregation: str  # how a multi-process job's figure comes from its ranks' (RANK_AGGREGATIONS)
    judged_in: frozenset[str]  # PLACES
    columns: tuple[str, ...]  # the results.csv columns it reads, its own first
    label: str  # its short name in terminal tables
    decimals: int | None  # shown with this many decimals; None: 4 significant digits
    best: str = ""  # the report's finding on it ("Fastest"); judged in the report only
    better: str = ""  # the comparative the findings use ("faster")

    def __post_init__(self) -> None:
        problems = []
        if self.direction not in DIRECTIONS:
            problems.append(f"direction {self.direction!r} is not one of {', '.join(DIRECTIONS)}")
        if self.rank_aggregation not in RANK_AGGREGATIONS:
            problems.append(f"rank_aggregation {self.rank_aggregation!r} is not one of {', '.join(RANK_AGGREGATIONS)}")
        unknown = sorted(set(self.judged_in) - set(PLACES))
        if unknown:
            problems.append(f"judged_in {', '.join(unknown)}: not one of {', '.join(PLACES)}")
        if self.threshold is not None and self.threshold not in THRESHOLD_GROUPS:
            problems.append(f"threshold {self.threshold!r} is not one of {', '.join(THRESHOLD_GROUPS)}")
        if (self.threshold is None) != (self.default_threshold_pct is None):
            problems.append("a threshold group and a default threshold go together")
        if not self.columns or self.columns[0] != self.name:
            problems.append(f"columns must start with its own column {self.name!r}")
        if "report" in self.judged_in and not ("summary" in self.judged_in and self.best and self.better):
            problems.append("judged in the report: judged in the summary too, with its best and better words")
        if problems:
            raise ValueError(f"metric {self.name!r}: " + "; ".join(problems))

    @property
    def sign(self) -> int:
        """+1 when higher is better, -1 when lower is better."""
        return 1 if self.direction == "higher" else -1


def _metric(column: Column) -> Metric:
    """The Metric of a judged column: its name, unit and rank rule the column's, the rest its `metric=`."""
    traits = column.metric
    if traits is None:
        raise ValueError(f"column {column.name!r} is not judged")
    return Metric(
        name=column.name,
        unit=column.unit,
        direction=traits.direction,
        default_threshold_pct=traits.default_threshold_pct,
        threshold=traits.threshold,
        rank_aggregation=str(RANK_RULES[column.ranks or "rank0"][0]),
        judged_in=traits.judged_in,
        columns=(column.name, *traits.reads),
        label=traits.label,
        decimals=traits.decimals,
        best=traits.best,
        better=traits.better,
    )


METRICS = tuple(_metric(c) for c in judged())  # the order of every list made from it (the rows' `order`)
BY_NAME = {m.name: m for m in METRICS}
# the metrics that compare and history name (the rules they treat apart, a default --metric)
SAMPLES_PER_S, STEP_TIME_MEDIAN = BY_NAME["samples_per_s"], BY_NAME["step_time_median_ms"]
PEAK_MEM, FINAL_LOSS = BY_NAME["peak_mem_mb"], BY_NAME["final_loss"]
ENERGY_PER_SAMPLE, PARITY = BY_NAME["energy_per_sample_j"], BY_NAME["parity"]


def metrics_in(place: Place, *, thresholded: bool = False) -> tuple[Metric, ...]:
    """The metrics judged in `place`, in METRICS' order; thresholded: only those with a threshold."""
    return tuple(m for m in METRICS if place in m.judged_in and (m.threshold is not None or not thresholded))


def names(metrics: tuple[Metric, ...]) -> tuple[str, ...]:
    return tuple(m.name for m in metrics)


def in_group(group: str) -> tuple[Metric, ...]:
    """The metrics whose threshold is the group's ("speed": samples_per_s, step_time_median_ms)."""
    return tuple(m for m in METRICS if m.threshold == group)


def default_threshold_pct(group: str) -> float:
    """The group's default threshold, in %: its metrics' (a contract test checks that they agree)."""
    found = [m.default_threshold_pct for m in in_group(group) if m.default_threshold_pct is not None]
    if not found:
        raise KeyError(f"no metric has the threshold group {group!r}")
    return found[0]
