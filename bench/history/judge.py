"""Judge a run against its history: pure functions over series of points; no database here.

A series is one scenario with fixed settings on one GPU model and model, run after run. Each
point of a series is judged on each metric against a baseline: the median of the last `window`
earlier points, counted from the last accepted step (an accepted step starts a new level).
A point is flagged when its median is beyond the metric's threshold (bench.compare.Thresholds:
5% speed, 2% peak memory) in the bad direction and, when it has 3 or more ok repeats, a
one-sided Mann-Whitney U test of its repeats against the baseline points' repeats confirms it.
A series fails the gate when its newest `consecutive` points are all flagged, so one noisy
night alone does not. A scenario that fails (oom, crash, ...) after ok runs is flagged the same way.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pandas as pd

from ..checks import bounded
from ..compare.core import DIRECTIONS, MIN_REPEATS, SPEED_METRICS, Thresholds, cpu_shift_note, percent_change
from ..errors import ExitCode, IncomparableRuns
from ..results import FAILED_STATUSES
from ..stats import mann_whitney_p

METRICS = tuple(DIRECTIONS)  # samples_per_s, step_time_median_ms, peak_mem_mb
MAX_WINDOW = 1000  # --window, --consecutive: runs
STATUS_METRIC = "status"
# what one point got on one metric
BEYOND, NOISY, IMPROVED, WITHIN = "beyond", "noisy", "improvement", "within"
ACCEPTED, NO_BASELINE, NO_VALUE = "accepted", "no baseline", "no value"
FAILED, STILL_FAILING, OK, SKIPPED = "failed", "still failing", "ok", "skipped"
FLAGGED = (BEYOND, FAILED)
# what the judged run's newest point means for its series
VERDICT_OF_FLAG = {
    WITHIN: "unchanged",
    IMPROVED: "improvement",
    NOISY: "noisy",
    ACCEPTED: "accepted",
    NO_BASELINE: "no baseline",
    NO_VALUE: "no value",
    OK: "unchanged",
    SKIPPED: "skipped",
    STILL_FAILING: "still failing",
}
VERDICTS = (
    "regression",
    "new failure",
    "watch",
    "noisy",
    "improvement",
    "accepted",
    "no baseline",
    "no value",
    "still failing",
    "skipped",
    "unchanged",
)
GATE_FAILS = ("regression", "new failure")
CHECK_COLUMNS = [
    "scenario",
    "gpu_model",
    "model",
    "series_key",
    "metric",
    "value",
    "baseline",
    "change_pct",
    "threshold_pct",
    "baseline_n",
    "repeats_n",
    "p_value",
    "streak",
    "verdict",
    "note",
]


@dataclass(frozen=True)
class Params:
    window: int = 7  # earlier points in a baseline
    consecutive: int = 2  # flagged newest points that fail the gate
    thresholds: Thresholds = field(default_factory=Thresholds)

    def __post_init__(self) -> None:
        for key in ("window", "consecutive"):
            value = getattr(self, key)
            bounded(value, f"--{key} = {value!r}", 1, MAX_WINDOW, whole=True)


@dataclass(frozen=True)
class Point:
    run_id: int
    created_at: datetime
    status: str  # the scenario's status in that run
    values: Mapping[str, float | None]  # metric -> median over ok repeats
    repeats: Mapping[str, tuple[float, ...]]  # metric -> the ok repeats' values
    info: Mapping[str, Any] = field(default_factory=dict)  # for display: git commit, torch, ...
    cpu_loop_ms: float | None = None  # the CPU probe around its windows (median over ok repeats)


@dataclass(frozen=True)
class Step:
    """An accepted change: from run_id on, the series' level is the new normal."""

    run_id: int
    metric: str | None  # None: every metric and the status
    note: str

    def covers(self, metric: str) -> bool:
        return self.metric is None or self.metric == metric


@dataclass(frozen=True)
class Series:
    key: str
    scenario: str
    gpu_model: str
    model: str
    settings: Mapping[str, Any]
    points: tuple[Point, ...]  # oldest first
    steps: tuple[Step, ...] = ()

    def index_of(self, run_id: int) -> int | None:
        return next((i for i, p in enumerate(self.points) if p.run_id == run_id), None)


@dataclass(frozen=True)
class Mark:
    """One point judged on one metric."""

    run_id: int
    metric: str
    flag: str
    value: float | None = None
    baseline: float | None = None
    change_pct: float | None = None
    baseline_n: int = 0
    p_value: float | None = None
    note: str = ""

    @property
    def flagged(self) -> bool:
        return self.flag in FLAGGED


@dataclass(frozen=True)
class CheckResult:
    run: Mapping[str, Any]  # the judged run, as stored
    rows: pd.DataFrame  # CHECK_COLUMNS, one row per series x metric (one status row if not ok)
    params: Params
    notes: tuple[str, ...]
    exit_code: int

    @property
    def counts(self) -> dict[str, int]:
        counts = Counter(self.rows["verdict"])
        return {v: counts[v] for v in VERDICTS if counts[v]}


def marks(series: Series, metric: str, params: Params) -> list[Mark]:
    """Every point of the series judged on metric (or on its status), oldest first."""
    judge = _status_mark if metric == STATUS_METRIC else _metric_mark
    return [judge(series, i, metric, params) for i in range(len(series.points))]


def judge_run(
    run: Mapping[str, Any],
    series: Sequence[Series],
    params: Params,
    *,
    metrics: Sequence[str] = METRICS,
    earlier_gpus: Sequence[str] = (),
) -> CheckResult:
    """Judge the run's point in each of its series. earlier_gpus: the GPU models of the other
    runs stored before it; when there are some but none shares a series, the run is incomparable."""
    run_id = int(run["id"])
    rows = [row for s in series for row in _series_rows(s, run_id, params, metrics)]
    frame = pd.DataFrame(rows, columns=CHECK_COLUMNS)
    notes = []
    if not any((s.index_of(run_id) or 0) > 0 for s in series):
        if earlier_gpus:
            gpus = ", ".join(sorted(set(earlier_gpus)))
            raise IncomparableRuns(
                f"run {run_id} ({run.get('gpu_model')}) has no history: none of its "
                f"{len(series)} series (scenario, settings, GPU model, model) was run before; "
                f"the {len(earlier_gpus)} earlier runs are on {gpus}",
                hint="judge a run of the same GPU and settings, or let this one start the series",
            )
        notes.append(f"run {run_id} is the first run stored: nothing to judge it against yet")
    failing = frame["verdict"].isin(GATE_FAILS).any()
    return CheckResult(run, frame, params, tuple(notes), int(ExitCode.FAILED if failing else ExitCode.OK))


# -- one series ----------------------------------------------------------------------------------
def _series_rows(series: Series, run_id: int, params: Params, metrics: Sequence[str]) -> list[dict[str, Any]]:
    j = series.index_of(run_id)
    if j is None:
        return []
    point = series.points[j]
    judged = [STATUS_METRIC] if point.status != OK else list(metrics)
    return [_verdict_row(series, j, metric, params) for metric in judged]


def _verdict_row(series: Series, j: int, metric: str, params: Params) -> dict[str, Any]:
    judged = marks(series, metric, params)[: j + 1]
    last = judged[-1]
    streak = 0
    for mark in reversed(judged):
        if not mark.flagged:
            break
        streak += 1
    note = last.note
    if last.flagged and streak >= params.consecutive:
        verdict = "new failure" if metric == STATUS_METRIC else "regression"
        note = f"{note}; flagged in the newest {streak} runs" if note else f"flagged in the newest {streak} runs"
    elif last.flagged:
        verdict = "watch"
        note = f"flagged in the newest {streak} of the {params.consecutive} runs that fail the gate" + (
            f"; {last.note}" if last.note else ""
        )
    else:
        verdict = VERDICT_OF_FLAG[last.flag]
    point = series.points[j]
    return {
        "scenario": series.scenario,
        "gpu_model": series.gpu_model,
        "model": series.model,
        "series_key": series.key,
        "metric": metric,
        "value": _nan(last.value),
        "baseline": _nan(last.baseline),
        "change_pct": _nan(last.change_pct),
        "threshold_pct": math.nan if metric == STATUS_METRIC else params.thresholds.for_metric(metric),
        "baseline_n": last.baseline_n,
        "repeats_n": len(point.repeats.get(metric, ())) if metric != STATUS_METRIC else 0,
        "p_value": _nan(last.p_value),
        "streak": f"{streak}/{params.consecutive}",
        "verdict": verdict,
        "note": note,
    }


def _level_start(series: Series, i: int, metric: str) -> tuple[int, Step | None]:
    """Where the level of point i began: the newest accepted step at or before it (or 0)."""
    positions = {p.run_id: k for k, p in enumerate(series.points)}
    start, found = 0, None
    for step in series.steps:
        k = positions.get(step.run_id)
        if k is not None and k <= i and step.covers(metric) and (found is None or k >= start):
            start, found = k, step
    return start, found


def _baseline_points(series: Series, i: int, metric: str, params: Params) -> tuple[list[Point], Step | None]:
    """The earlier points that make point i's baseline, and the step accepted at i (if any).
    At an accepted point the baseline is the old level, to show the step's size."""
    start, step = _level_start(series, i, metric)
    accepted = step if step is not None and start == i else None
    if accepted is not None:
        start = _level_start(series, i - 1, metric)[0] if i > 0 else 0
    return list(series.points[start:i]), accepted


def _metric_mark(series: Series, i: int, metric: str, params: Params) -> Mark:
    point = series.points[i]
    value = point.values.get(metric)
    earlier, accepted = _baseline_points(series, i, metric, params)
    earlier = [p for p in earlier if p.values.get(metric) is not None][-params.window :]
    if value is None:
        return Mark(point.run_id, metric, NO_VALUE, note=f"no ok repeat ({point.status})")
    if not earlier:
        flag = ACCEPTED if accepted else NO_BASELINE
        note = f"accepted: {accepted.note}" if accepted else "no earlier run at this level"
        return Mark(point.run_id, metric, flag, value=value, note=note)
    baseline = float(statistics.median(float(p.values[metric]) for p in earlier))  # type: ignore[arg-type]
    change = round(percent_change(baseline, value), 6)  # judged as shown, no float dust
    found: dict[str, Any] = {"value": value, "baseline": baseline, "change_pct": change, "baseline_n": len(earlier)}
    if accepted:
        return Mark(point.run_id, metric, ACCEPTED, note=f"accepted: {accepted.note}", **found)
    if metric not in DIRECTIONS:  # shown, not judged (final_loss: a non-finite one is "diverged")
        return Mark(point.run_id, metric, WITHIN, **found)
    if abs(change) <= params.thresholds.for_metric(metric):
        return Mark(point.run_id, metric, WITHIN, **found)
    cpu = _cpu_note(point, earlier) if metric in SPEED_METRICS else None
    if change * DIRECTIONS[metric] > 0:
        return Mark(point.run_id, metric, IMPROVED, note=_join(cpu), **found)
    own = point.repeats.get(metric, ())
    pool = [v for p in earlier for v in p.repeats.get(metric, ())]
    if len(own) < MIN_REPEATS or len(pool) < MIN_REPEATS:
        note = f"threshold only: fewer than {MIN_REPEATS} ok repeats to test"
        return Mark(point.run_id, metric, BEYOND, note=_join(note, cpu), **found)
    alpha = params.thresholds.alpha
    p_value = mann_whitney_p(own, pool, "greater" if change > 0 else "less")
    if p_value <= alpha + 1e-12:  # 1/20 at 3 vs 3 must pass, as in compare
        return Mark(point.run_id, metric, BEYOND, p_value=p_value, note=_join(cpu), **found)
    note = f"beyond the threshold, but its repeats do not confirm it (p > {alpha:g})"
    return Mark(point.run_id, metric, NOISY, p_value=p_value, note=_join(note, cpu), **found)


def _cpu_note(point: Point, earlier: list[Point]) -> str | None:
    """compare's CPU note: this run's CPU probe against the median of its baseline runs'."""
    loops = [p.cpu_loop_ms for p in earlier if p.cpu_loop_ms is not None]
    base = float(statistics.median(loops)) if loops else None
    return cpu_shift_note(base, point.cpu_loop_ms, "this run's windows than around its baseline's")


def _join(*notes: str | None) -> str:
    return "; ".join(n for n in notes if n)


def _status_mark(series: Series, i: int, metric: str, params: Params) -> Mark:
    point = series.points[i]
    if point.status not in FAILED_STATUSES:
        return Mark(point.run_id, metric, OK if point.status == OK else SKIPPED, note=point.status)
    earlier, accepted = _baseline_points(series, i, metric, params)
    if accepted:
        return Mark(point.run_id, metric, ACCEPTED, note=f"{point.status}; accepted: {accepted.note}")
    earlier = earlier[-params.window :]
    if any(p.status == OK for p in earlier):
        return Mark(point.run_id, metric, FAILED, baseline_n=len(earlier), note=f"{point.status}; ok before")
    why = "failing before too" if earlier else "no earlier run at this level"
    return Mark(point.run_id, metric, STILL_FAILING, baseline_n=len(earlier), note=f"{point.status}; {why}")


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)
