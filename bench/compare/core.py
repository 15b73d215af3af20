"""Compare two result sets (base -> new) scenario by scenario, metric by metric: the nightly gate.

`compare` is pure: frames and env dicts in, a CompareResult out. Reading files is bench.results.load_run;
turning the result into text is bench.compare.render.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..checks import MAX_THRESHOLD_PCT, bounded, is_finite
from ..errors import BadInput, ExitCode
from ..results import CPU_NOTE, FAILED_STATUSES, cpu_run, window_cpu_loop_ms, worst_failure
from ..stats import MIN_REPEATS, mann_whitney_p
from .env import EnvDifference, check_envs

# metric -> +1 when higher is better, -1 when lower is better
DIRECTIONS = {"samples_per_s": +1, "step_time_median_ms": -1, "peak_mem_mb": -1}
LOSS_METRIC = "final_loss"  # compared on finiteness only
METRICS = (*DIRECTIONS, LOSS_METRIC)
# fmt: off
VERDICTS = ("regression", "new failure", "missing", "noisy", "improvement", "fixed", "new",
            "unchanged")
ROW_COLUMNS = ["scenario", "metric", "base", "new", "change_pct", "threshold_pct", "base_n",
               "new_n", "p_value", "verdict", "base_status", "new_status", "note"]
# fmt: on
_ROW_DEFAULTS = {
    "base": math.nan,
    "new": math.nan,
    "change_pct": math.nan,
    "threshold_pct": math.nan,
    "base_n": 0,
    "new_n": 0,
    "p_value": math.nan,
    "verdict": "unchanged",
    "note": "",
}
STATUS_METRIC = "status"  # the metric of a row that judges the whole scenario
SPEED_METRICS = ("samples_per_s", "step_time_median_ms")
THRESHOLD_ONLY = "threshold only"  # the note of a row judged without the test (too few repeats)
CPU_SHIFT_PCT = 15.0  # a CPU this much slower or faster around the windows gets a note


@dataclass(frozen=True)
class Thresholds:
    """How far (in %) a median may move before it counts; and the test's significance level."""

    speed_pct: float = 5.0  # samples_per_s and step_time_median_ms
    memory_pct: float = 2.0  # peak_mem_mb
    alpha: float = 0.05

    def __post_init__(self) -> None:
        for key in ("speed_pct", "memory_pct"):
            value = getattr(self, key)
            bounded(value, f"threshold {key} = {value!r}", 0, MAX_THRESHOLD_PCT)
        if not is_finite(self.alpha) or not 0 < self.alpha < 1:
            raise BadInput(f"alpha = {self.alpha!r} must lie between 0 and 1")

    def for_metric(self, metric: str) -> float:
        return self.memory_pct if metric == "peak_mem_mb" else self.speed_pct


def method_text(alpha: float) -> str:
    return (
        f"one-sided exact Mann-Whitney U test at alpha={alpha:g} (in the direction of the change) "
        f"when both sides have at least {MIN_REPEATS} ok repeats; the threshold alone otherwise"
    )


@dataclass(frozen=True)
class CompareResult:
    rows: pd.DataFrame  # ROW_COLUMNS, one row per scenario x metric (or one status row)
    base_label: str
    new_label: str
    base_gpu: str  # a GPU name, "CPU", or "unknown"
    new_gpu: str
    env_differences: tuple[EnvDifference, ...]
    notes: tuple[str, ...]
    thresholds: Thresholds
    method: str
    allow_missing: bool
    exit_code: int
    cpu_smoke: bool = False  # a run is on the CPU: the comparison tests the harness, not hardware

    @property
    def untested_regressions(self) -> tuple[int, int]:
        """(regressions judged by the threshold alone, all regressions): too few repeats to test."""
        regressions = self.rows[self.rows["verdict"] == "regression"]
        return int(regressions["note"].astype(str).str.startswith(THRESHOLD_ONLY).sum()), len(regressions)

    @property
    def counts(self) -> dict[str, int]:
        counts = Counter(self.rows["verdict"])
        return {v: counts[v] for v in VERDICTS if counts[v]}

    @property
    def failing(self) -> pd.DataFrame:
        """The rows that fail the gate."""
        return self.rows[self.rows["verdict"].map(lambda v: _fails(v, self.allow_missing))]


def compare(
    base_frame: pd.DataFrame,
    new_frame: pd.DataFrame,
    base_env: dict[str, Any] | None,
    new_env: dict[str, Any] | None,
    thresholds: Thresholds | None = None,
    *,
    allow_missing: bool = False,
    allow_env_mismatch: bool = False,
    labels: tuple[str, str] = ("base", "new"),
) -> CompareResult:
    """Judge every scenario of base and new; raise IncomparableRuns when the GPU models differ."""
    thresholds = thresholds or Thresholds()
    env = check_envs(base_env, new_env, allow_mismatch=allow_env_mismatch, labels=labels)
    cpu_smoke = cpu_run(base_env, base_frame) or cpu_run(new_env, new_frame)
    notes = ([CPU_NOTE] if cpu_smoke else []) + list(env.notes)
    rows: list[dict[str, Any]] = []
    base_groups = dict(tuple(base_frame.groupby("scenario", sort=False)))
    new_groups = dict(tuple(new_frame.groupby("scenario", sort=False)))
    for name in [*base_groups, *[n for n in new_groups if n not in base_groups]]:
        base_group, new_group = base_groups.get(name), new_groups.get(name)
        rows.extend(_scenario_rows(str(name), base_group, new_group, thresholds))
    frame = pd.DataFrame(rows, columns=ROW_COLUMNS)
    failing = any(_fails(v, allow_missing) for v in frame["verdict"])
    if any(str(note).startswith(THRESHOLD_ONLY) for note in frame["note"]):
        notes.append(
            f"some scenarios have fewer than {MIN_REPEATS} ok repeats on a side; "
            "there the threshold alone decides (marked 'threshold only')"
        )
    return CompareResult(
        rows=frame,
        base_label=labels[0],
        new_label=labels[1],
        base_gpu=env.base_gpu,
        new_gpu=env.new_gpu,
        env_differences=env.differences,
        notes=tuple(notes),
        thresholds=thresholds,
        method=method_text(thresholds.alpha),
        allow_missing=allow_missing,
        exit_code=int(ExitCode.FAILED if failing else ExitCode.OK),
        cpu_smoke=cpu_smoke,
    )


def _fails(verdict: str, allow_missing: bool) -> bool:
    return verdict in ("regression", "new failure") or (verdict == "missing" and not allow_missing)


# -- scenarios -----------------------------------------------------------------------------------
def side_status(group: pd.DataFrame | None) -> str:
    """absent; the worst failed status when any repeat failed; ok when any ran; else skipped."""
    if group is None:
        return "absent"
    statuses = set(group["status"])
    return worst_failure(statuses) or ("ok" if "ok" in statuses else "skipped")


def _scenario_rows(
    name: str, base: pd.DataFrame | None, new: pd.DataFrame | None, thresholds: Thresholds
) -> list[dict[str, Any]]:
    b, n = side_status(base), side_status(new)
    if base is None or new is None or not b == n == "ok":
        verdict, note = _status_verdict(b, n)
        counts = {"base_n": _ok_count(base), "new_n": _ok_count(new)}
        return [_row(name, b, n, metric=STATUS_METRIC, verdict=verdict, note=note, **counts)]
    ok_base, ok_new = base[base["status"] == "ok"], new[new["status"] == "ok"]
    judged = [_judge_metric(m, ok_base, ok_new, thresholds) for m in DIRECTIONS]
    cpu = _cpu_note(ok_base, ok_new)
    for values in judged:
        if cpu and values and values["metric"] in SPEED_METRICS and values.get("verdict", "unchanged") != "unchanged":
            values["note"] = "; ".join(filter(None, [values.get("note", ""), cpu]))
    judged.append(_judge_loss(ok_base, ok_new))
    return [_row(name, b, n, **values) for values in judged if values]


def _cpu_loop_ms(frame: pd.DataFrame) -> float:
    """The median over repeats of the CPU probe around each window (mean of its two ends); nan if none."""
    return _median([float(v) for v in window_cpu_loop_ms(frame) if not math.isnan(v)])


def _cpu_note(ok_base: pd.DataFrame, ok_new: pd.DataFrame) -> str | None:
    return cpu_shift_note(_cpu_loop_ms(ok_base), _cpu_loop_ms(ok_new), "the new run's windows")


def cpu_shift_note(base_ms: float | None, new_ms: float | None, where: str) -> str | None:
    """A note when the CPU ran CPU_SHIFT_PCT or more slower or faster around `where` than around the
    baseline's windows (a fixed Python loop, bench/worker/clock.py): a launch-bound scenario's speed
    follows it. Never a verdict: the GPU stack may have changed too."""
    if base_ms is None or new_ms is None or math.isnan(base_ms) or math.isnan(new_ms) or base_ms <= 0:
        return None
    change = percent_change(base_ms, new_ms)
    if abs(change) < CPU_SHIFT_PCT:
        return None
    return (
        f"the CPU ran {'slower' if change > 0 else 'faster'} around {where} "
        f"(a fixed Python loop: {new_ms:.1f} vs {base_ms:.1f} ms, {change:+.0f}%); a launch-bound step follows it"
    )


def _row(scenario: str, base_status: str, new_status: str, **values: Any) -> dict[str, Any]:
    """A full output row: the defaults, overridden by values (which name the metric)."""
    ids = {"scenario": scenario, "base_status": base_status, "new_status": new_status}
    return {**_ROW_DEFAULTS, **ids, **values}


def _status_verdict(b: str, n: str) -> tuple[str, str]:
    """The verdict of a scenario that is not ok on both sides."""
    if b == "absent":
        return "new", "only in the new run" + (f" ({n})" if n != "ok" else "")
    if n == "absent":
        return "missing", "not in the new run"
    if n in FAILED_STATUSES and b not in FAILED_STATUSES:
        return "new failure", f"{b} -> {n}"
    if b in FAILED_STATUSES and n == "ok":
        return "fixed", f"{b} -> ok"
    if b == "ok" and n == "skipped":
        return "missing", "skipped in the new run"
    if b == "skipped" and n == "ok":
        return "new", "skipped in base, runs now"
    return "unchanged", "skipped on both sides" if b == n == "skipped" else f"{b} -> {n}"


def _ok_count(group: pd.DataFrame | None) -> int:
    return 0 if group is None else int((group["status"] == "ok").sum())


def _values(frame: pd.DataFrame, metric: str) -> list[float]:
    if metric not in frame:
        return []
    return [float(v) for v in pd.to_numeric(frame[metric], errors="coerce") if not math.isnan(v)]


def _judge_metric(
    metric: str, ok_base: pd.DataFrame, ok_new: pd.DataFrame, thresholds: Thresholds
) -> dict[str, Any] | None:
    """Median change vs the threshold, then (with enough repeats) the one-sided test."""
    xs, ys = _values(ok_base, metric), _values(ok_new, metric)
    if not xs and not ys:
        return None
    out: dict[str, Any] = {
        "metric": metric,
        "base": _median(xs),
        "new": _median(ys),
        "threshold_pct": thresholds.for_metric(metric),
        "base_n": len(xs),
        "new_n": len(ys),
    }
    if not xs or not ys:
        return {**out, "note": f"no values in {'base' if not xs else 'new'}"}
    change = round(percent_change(out["base"], out["new"]), 6)  # judged as shown, no float dust
    out["change_pct"] = change
    testable = len(xs) >= MIN_REPEATS and len(ys) >= MIN_REPEATS
    if testable:  # one-sided, in the direction of the change: does new sit above base or below?
        out["p_value"] = mann_whitney_p(ys, xs, "greater" if change > 0 else "less")
    else:
        out["note"] = f"{THRESHOLD_ONLY}: fewer than {MIN_REPEATS} ok repeats on a side"
    if abs(change) <= out["threshold_pct"]:
        return out
    better = change * DIRECTIONS[metric] > 0
    if not testable or out["p_value"] <= thresholds.alpha + 1e-12:  # 1/20 at 3 vs 3 must pass
        return {**out, "verdict": "improvement" if better else "regression"}
    note = f"beyond the threshold but not significant (p > {thresholds.alpha:g})"
    return {**out, "verdict": "noisy", "note": note}


def _judge_loss(ok_base: pd.DataFrame, ok_new: pd.DataFrame) -> dict[str, Any] | None:
    """final_loss: the medians are shown; only a loss turning non-finite (or back) counts."""
    fb, fn = _finite_flags(ok_base), _finite_flags(ok_new)
    if not fb and not fn:
        return None
    xs = [v for v in _values(ok_base, LOSS_METRIC) if math.isfinite(v)]
    ys = [v for v in _values(ok_new, LOSS_METRIC) if math.isfinite(v)]
    base_bad, new_bad = not all(fb), not all(fn)
    verdict, note = "unchanged", "finiteness only"
    if new_bad and not base_bad:
        verdict, note = "regression", "non-finite loss in the new run"
    elif base_bad and not new_bad:
        verdict, note = "improvement", "loss finite again"
    base, new = _median(xs), _median(ys)
    change = round(percent_change(base, new), 6) if xs and ys else math.nan
    return {
        "metric": LOSS_METRIC,
        "base": base,
        "new": new,
        "change_pct": change,
        "base_n": len(fb),
        "new_n": len(fn),
        "verdict": verdict,
        "note": note,
    }


def _finite_flags(frame: pd.DataFrame) -> list[bool]:
    """Per ok repeat: was the final loss finite? (loss_finite when recorded, else final_loss)"""
    flags = []
    for _, row in frame.iterrows():
        recorded = _as_bool(row.get("loss_finite"))
        if recorded is not None:
            flags.append(recorded)
        elif pd.notna(row.get(LOSS_METRIC)):
            flags.append(math.isfinite(float(row[LOSS_METRIC])))
    return flags


def _as_bool(value: Any) -> bool | None:
    if pd.api.types.is_bool(value):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def _median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else math.nan


def percent_change(base: float, new: float) -> float:
    """(new / base - 1) x 100; a move away from zero is infinite."""
    if base == 0:
        return 0.0 if new == 0 else math.copysign(math.inf, new)
    return (new / base - 1.0) * 100.0
