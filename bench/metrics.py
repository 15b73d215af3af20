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
`rank_aggregation` says how a multi-process job's figure comes from its ranks' (bench/worker/
ranks.py combines them; peak memory is the parent's NVML reading of the largest GPU):
sum (the ranks' work adds up), min, max, mean, slowest (the rank with the longest median step),
rank0 (rank 0's). This module imports nothing: `gpubench --help` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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


SAMPLES_PER_S = Metric(
    name="samples_per_s",
    unit="samples/s",
    direction="higher",
    default_threshold_pct=5.0,
    threshold="speed",
    rank_aggregation="sum",  # all ranks' window samples over the one window
    judged_in=frozenset(PLACES),
    columns=("samples_per_s",),
    label="samples/s",
    decimals=2,
    best="Fastest",
    better="faster",
)
STEP_TIME_MEDIAN = Metric(
    name="step_time_median_ms",
    unit="ms",
    direction="lower",
    default_threshold_pct=5.0,
    threshold="speed",
    rank_aggregation="slowest",
    judged_in=frozenset({"history"}),  # compare shows it beside samples_per_s
    columns=("step_time_median_ms",),
    label="step ms",
    decimals=2,
)
PEAK_MEM = Metric(
    name="peak_mem_mb",
    unit="MB",
    direction="lower",
    default_threshold_pct=2.0,
    threshold="memory",
    rank_aggregation="max",  # the largest GPU's (NVML, read by the parent)
    judged_in=frozenset(PLACES),
    columns=("peak_mem_mb", "peak_mem_source"),  # compare refuses a scenario whose source differs
    label="peak MB",
    decimals=0,
    best="Lowest peak memory",
    better="leaner",
)
FINAL_LOSS = Metric(
    name="final_loss",
    unit="",
    direction="lower",
    default_threshold_pct=None,  # compare: finiteness only; history: stored and shown
    threshold=None,
    rank_aggregation="rank0",
    judged_in=frozenset({"compare", "history"}),
    columns=("final_loss", "loss_finite"),
    label="loss",
    decimals=None,  # a loss near 0 stays readable (4.858e-06)
)
ENERGY_PER_SAMPLE = Metric(
    name="energy_per_sample_j",
    unit="J",
    direction="lower",
    # the seed of its noise: docs/methodology.md ("Energy"), measured on the H200 with 3 repeats
    default_threshold_pct=5.0,
    threshold="energy",
    rank_aggregation="sum",  # every GPU's energy over the job's window samples (bench/worker/ranks.py)
    judged_in=frozenset({"compare", "history", "summary"}),
    columns=("energy_per_sample_j", "gpu_energy_j", "gpu_energy_source"),
    label="J/sample",
    decimals=None,
)
PARITY = Metric(
    name="parity",  # the verdict: equivalent, deviates, diverged (bench/results/parity.py, docs/parity.md)
    unit="",
    direction="lower",  # |parity_delta|: nearer the reference is better
    default_threshold_pct=None,  # judged by its verdict against the band, not by the size of a change
    threshold=None,
    rank_aggregation="rank0",  # rank 0's loss curve (the parent judges it)
    judged_in=frozenset({"compare"}),
    columns=("parity", "parity_delta", "parity_band", "parity_seeds", "parity_ref", "final_window_loss"),
    label="loss parity",
    decimals=None,
)
METRICS = (
    SAMPLES_PER_S,
    STEP_TIME_MEDIAN,
    PEAK_MEM,
    FINAL_LOSS,
    ENERGY_PER_SAMPLE,
    PARITY,
)  # the order of every list made from it
BY_NAME = {m.name: m for m in METRICS}


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
