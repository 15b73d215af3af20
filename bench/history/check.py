"""Judge a run against its history: pure functions over series of points; no database here.

A series is one scenario with fixed settings on one GPU model and model, run after run; nights
(points), not pooled repeats, are the unit. Each point is judged on each metric against a
baseline: the median of the last `window` earlier *clean* points of its level. A level starts at
the last accepted step; a clean point is one that was not beyond the threshold the wrong way, so a
regression never becomes its own baseline: it stays flagged until `accept`, or until a night is
back within the threshold of the old level (a recovery).

The threshold is the metric's (bench.compare.Thresholds: 5% speed, 2% peak memory), widened to
`noise_factor` x the series' night-to-night noise where that is larger (bench.history.trend:
robust, from successive nights, so neither a drift nor a step passes for noise). A point is flagged
when its median is beyond it in the bad direction and, with 3 or more ok repeats, a one-sided
Mann-Whitney U test of its repeats against the baseline nights' medians confirms it; or when the
last `drift_nights` nights of its level fall steadily (a Theil-Sen slope whose total is beyond
the threshold, confirmed by a one-sided Mann-Kendall test), so a slow drift is caught too.
A series fails the gate when its newest `consecutive` points are all flagged, so one noisy
night alone does not; its first MIN_NOISE_NIGHTS points, whose noise is not known yet, only warn.
A scenario that fails (oom, crash, ...) after ok runs is flagged the same way, until it runs ok
again or is accepted.
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
from ..compare.comparison import MIN_REPEATS, SPEED_METRICS, Thresholds, percent_change
from ..errors import ExitCode, IncomparableRuns
from ..measure import cpuspeed
from ..metrics import BY_NAME, metrics_in, names
from ..results import FAILED_STATUSES
from ..stats import mann_whitney_p
from .trend import drift, widened_threshold

METRICS = names(metrics_in("history", thresholded=True))  # judged (bench.metrics); the others are shown
MAX_WINDOW = 1000  # --window, --consecutive, --drift-nights: runs
MAX_NOISE_FACTOR = 100.0
NOISE_NIGHTS = 30  # the newest nights of a series that estimate its night-to-night noise
MIN_NOISE_NIGHTS = 5  # fewer earlier runs in a series: the threshold alone, and the gate cannot fail yet
STATUS_METRIC = "status"
# what one point got on one metric
BEYOND, NOISY, IMPROVED, WITHIN = "beyond", "noisy", "improvement", "within"
DRIFT = "drift"
ACCEPTED, NO_BASELINE, NO_VALUE = "accepted", "no baseline", "no value"
FAILED, STILL_FAILING, OK, SKIPPED = "failed", "still failing", "ok", "skipped"
FLAGGED = (BEYOND, DRIFT, FAILED)
OUT_OF_BASELINE = (BEYOND, DRIFT, NOISY)  # wrong-way points that no later baseline counts
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
    window: int = 7  # earlier clean points in a baseline
    consecutive: int = 2  # flagged newest points that fail the gate
    thresholds: Thresholds = field(default_factory=Thresholds)
    drift_nights: int = 10  # the newest points of a level the drift check reads; 0: no drift check
    noise_factor: float = 3.0  # threshold: at least this x the night-to-night noise; 0: the threshold alone

    def __post_init__(self) -> None:
        for key in ("window", "consecutive"):
            value = getattr(self, key)
            bounded(value, f"--{key} = {value!r}", 1, MAX_WINDOW, whole=True)
        if self.drift_nights != 0:
            bounded(self.drift_nights, f"--drift-nights = {self.drift_nights!r}", 3, MAX_WINDOW, whole=True)
        bounded(self.noise_factor, f"--noise-factor = {self.noise_factor!r}", 0, MAX_NOISE_FACTOR)


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
    threshold_pct: float | None = None  # the threshold applied (widened by the noise), when judged
    young: bool = False  # its series had too few earlier runs to measure the noise: it cannot fail yet

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
    """Every point of the series judged on metric (or on its status), oldest first. Each point's
    baseline leaves out the earlier points judged beyond the threshold, so they are judged in order."""
    if metric == STATUS_METRIC:
        return [_status_mark(series, i, metric, params) for i in range(len(series.points))]
    out: list[Mark] = []
    for i in range(len(series.points)):
        out.append(_metric_mark(series, i, metric, params, out))
    return out


def streak(judged: Sequence[Mark]) -> int:
    """How many of the newest marks are flagged in a row; a flagged mark of a young series (its noise
    not yet measured) keeps the row going but does not count in it."""
    count = 0
    for mark in reversed(judged):
        if not mark.flagged:
            break
        count += not mark.young
    return count


def verdict_of(judged: Sequence[Mark], metric: str, params: Params) -> tuple[str, str]:
    """What the newest of a series' marks (oldest first) means for the gate, and its note."""
    last = judged[-1]
    run_of = streak(judged)
    if last.flagged and last.young:
        return "watch", _join(last.note, f"a series' first {MIN_NOISE_NIGHTS} runs only warn: its noise is unknown")
    if last.flagged and run_of >= params.consecutive:
        verdict = "new failure" if metric == STATUS_METRIC else "regression"
        return verdict, _join(last.note, f"flagged in the newest {run_of} runs")
    if last.flagged:
        return "watch", _join(
            f"flagged in the newest {run_of} of the {params.consecutive} runs that fail the gate", last.note
        )
    before = streak(judged[:-1])
    if before and last.flag in (WITHIN, IMPROVED):
        return VERDICT_OF_FLAG[last.flag], _join(
            last.note, f"recovered: back within the threshold after {before} flagged runs"
        )
    return VERDICT_OF_FLAG[last.flag], last.note


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
    # a metric the series never measured up to this run (energy on the CPU, or before the GPU probe) has no row
    measured = [m for m in metrics if any(p.values.get(m) is not None for p in series.points[: j + 1])]
    judged = [STATUS_METRIC] if point.status != OK else measured
    return [_verdict_row(series, j, metric, params) for metric in judged]


def _verdict_row(series: Series, j: int, metric: str, params: Params) -> dict[str, Any]:
    judged = marks(series, metric, params)[: j + 1]
    last = judged[-1]
    run_of = streak(judged)
    verdict, note = verdict_of(judged, metric, params)
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
        "threshold_pct": _threshold_shown(last, metric, params),
        "baseline_n": last.baseline_n,
        "repeats_n": len(point.repeats.get(metric, ())) if metric != STATUS_METRIC else 0,
        "p_value": _nan(last.p_value),
        "streak": f"{run_of}/{params.consecutive}",
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


def _metric_mark(series: Series, i: int, metric: str, params: Params, before: Sequence[Mark]) -> Mark:
    """Point i on metric; before: the marks of the points before it (the same metric)."""
    point = series.points[i]
    value = point.values.get(metric)
    level, accepted = _baseline_points(series, i, metric, params)
    first = i - len(level)
    clean = [p for k, p in enumerate(level, start=first) if p.values.get(metric) is not None and _clean(before[k])]
    earlier = clean[-params.window :]
    if value is None:
        return Mark(point.run_id, metric, NO_VALUE, note=f"no ok repeat ({point.status})")
    if not earlier:
        flag = ACCEPTED if accepted else NO_BASELINE
        note = f"accepted: {accepted.note}" if accepted else "no earlier run at this level"
        return Mark(point.run_id, metric, flag, value=value, note=note)
    nights = [float(p.values[metric]) for p in earlier]  # type: ignore[arg-type]
    baseline = float(statistics.median(nights))
    change = round(percent_change(baseline, value), 6)  # judged as shown, no float dust
    found: dict[str, Any] = {"value": value, "baseline": baseline, "change_pct": change, "baseline_n": len(earlier)}
    if accepted:
        return Mark(point.run_id, metric, ACCEPTED, note=f"accepted: {accepted.note}", **found)
    if metric not in METRICS:  # shown, not judged (final_loss: a non-finite one is "diverged")
        return Mark(point.run_id, metric, WITHIN, **found)
    measured = [float(v) for v in (p.values.get(metric) for p in series.points[:i]) if v is not None]
    limit, widened = _threshold(measured[-NOISE_NIGHTS:], metric, params)
    found["threshold_pct"] = limit
    found["young"] = len(measured) < MIN_NOISE_NIGHTS
    if abs(change) <= limit:
        drift = _drift(series, first, i, metric, baseline, limit, params)
        if drift:
            note, p_value = drift
            return Mark(point.run_id, metric, DRIFT, p_value=p_value, note=_join(note, widened), **found)
        mattered = abs(change) > params.thresholds.for_metric(metric)  # within only by the widening
        return Mark(point.run_id, metric, WITHIN, note=widened if mattered and widened else "", **found)
    cpu = _cpu_note(point, earlier) if metric in SPEED_METRICS else None
    if change * BY_NAME[metric].sign > 0:
        return Mark(point.run_id, metric, IMPROVED, note=_join(widened, cpu), **found)
    own = point.repeats.get(metric, ())
    if len(own) < MIN_REPEATS or len(nights) < MIN_REPEATS:
        note = f"threshold only: fewer than {MIN_REPEATS} ok repeats or baseline runs to test"
        return Mark(point.run_id, metric, BEYOND, note=_join(note, widened, cpu), **found)
    alpha = params.thresholds.alpha
    p_value = mann_whitney_p(own, nights, "greater" if change > 0 else "less")
    if p_value <= alpha + 1e-12:  # 1/20 at 3 vs 3 must pass, as in compare
        return Mark(point.run_id, metric, BEYOND, p_value=p_value, note=_join(widened, cpu), **found)
    note = f"beyond the threshold, but its repeats do not confirm it (p > {alpha:g})"
    return Mark(point.run_id, metric, NOISY, p_value=p_value, note=_join(note, widened, cpu), **found)


def _clean(mark: Mark) -> bool:
    """May a later baseline count this point? Not when it was beyond the threshold the wrong way."""
    return mark.flag not in OUT_OF_BASELINE


def _threshold(nights: Sequence[float], metric: str, params: Params) -> tuple[float, str | None]:
    """The metric's threshold, widened by the series' night-to-night noise (over its newest nights,
    whatever their level) where that is larger; and a note saying so."""
    floor = params.thresholds.for_metric(metric)
    if len(nights) < MIN_NOISE_NIGHTS:
        return floor, None
    limit, noise_pct = widened_threshold(nights, floor, params.noise_factor)
    if noise_pct is None:
        return floor, None
    note = (
        f"threshold {limit:.1f}%: {params.noise_factor:g} x this series' night-to-night noise "
        f"({noise_pct:.1f}% over {len(nights)} runs)"
    )
    return limit, note


def _drift(
    series: Series, first: int, i: int, metric: str, baseline: float, limit: float, params: Params
) -> tuple[str, float] | None:
    """(a note, the test's p) when the newest drift_nights points of the level (up to i) move
    steadily the wrong way (bench.history.trend.drift); None otherwise, or when there are fewer."""
    if not params.drift_nights:
        return None
    values = [p.values.get(metric) for p in series.points[first : i + 1]]
    nights = [float(v) for v in values if v is not None][-params.drift_nights :]
    if len(nights) < params.drift_nights:
        return None
    found = drift(nights, baseline, limit, -BY_NAME[metric].sign, params.thresholds.alpha)
    if found is None:
        return None
    note = (
        f"drift: {found.slope_pct:+.2f}% a run over the newest {found.nights} runs ({found.total_pct:+.1f}% "
        f"in all; Mann-Kendall p = {found.p_value:.3g})"
    )
    return note, found.p_value


def _threshold_shown(mark: Mark, metric: str, params: Params) -> float:
    if metric == STATUS_METRIC:
        return math.nan
    return mark.threshold_pct if mark.threshold_pct is not None else params.thresholds.for_metric(metric)


def _cpu_note(point: Point, earlier: list[Point]) -> str | None:
    """compare's CPU note: this run's CPU probe against the median of its baseline runs'."""
    loops = [p.cpu_loop_ms for p in earlier if p.cpu_loop_ms is not None]
    base = float(statistics.median(loops)) if loops else None
    return cpuspeed.shift_note(base, point.cpu_loop_ms, "this run's windows than around its baseline's")


def _join(*notes: str | None) -> str:
    return "; ".join(n for n in notes if n)


def _status_mark(series: Series, i: int, metric: str, params: Params) -> Mark:
    point = series.points[i]
    if point.status not in FAILED_STATUSES:
        return Mark(point.run_id, metric, OK if point.status == OK else SKIPPED, note=point.status)
    earlier, accepted = _baseline_points(series, i, metric, params)
    if accepted:
        return Mark(point.run_id, metric, ACCEPTED, note=f"{point.status}; accepted: {accepted.note}")
    # ok at any time since the level began: a failure stays new (and red) until it is accepted or
    # the scenario runs ok again
    if any(p.status == OK for p in earlier):
        return Mark(point.run_id, metric, FAILED, baseline_n=len(earlier), note=f"{point.status}; ok before")
    why = "failing before too" if earlier else "no earlier run at this level"
    return Mark(point.run_id, metric, STILL_FAILING, baseline_n=len(earlier), note=f"{point.status}; {why}")


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)
