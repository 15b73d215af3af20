"""Compare two result sets (base -> new) scenario by scenario: the nightly gate.

Each scenario gets one verdict per quantity: its failure status (a scenario not ok on both sides
gets that row alone), then one per metric judged in compare (bench.metrics): its speed
(samples_per_s judged, the median step time shown beside it), its peak memory, and whether its
loss stayed finite. Those with a threshold (speed and memory) are judged by bench.compare.gate over
all scenarios at once, with the error controlled across the comparison.

`compare` is pure: frames and env dicts in, a CompareResult out. Reading files is
bench.results.load_run; turning the result into text is bench.compare.tables.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..checks import MAX_THRESHOLD_PCT, bounded, is_finite
from ..errors import BadInput, ExitCode, IncomparableRuns
from ..measure import cpuspeed, kernels
from ..metrics import (
    BY_NAME,
    FINAL_LOSS,
    PARITY,
    PEAK_MEM,
    SAMPLES_PER_S,
    STEP_TIME_MEDIAN,
    default_threshold_pct,
    in_group,
    metrics_in,
    names,
)
from ..results import CPU_NOTE, FAILED_STATUSES, cpu_run, scenario_status, window_cpu_loop_ms
from ..results.identity import SettingDifference, setting_differences
from ..results.parity import row_parity, worst
from ..stats import MIN_REPEATS
from .env import EnvDifference, check_envs
from .gate import Judgement, Rule, Sample, judge, percent_change
from .settings import refusal

# bench.metrics says which metrics compare judges; the rules here name the ones treated apart
SPEED_METRIC, STEP_METRIC, MEMORY_METRIC = SAMPLES_PER_S.name, STEP_TIME_MEDIAN.name, PEAK_MEM.name
JUDGED = names(metrics_in("compare", thresholded=True))  # by the gate; step time is shown beside samples/s
LOSS_METRIC = FINAL_LOSS.name  # compared on finiteness only
PARITY_METRIC = PARITY.name  # compared by its verdict vs each run's loss reference
METRICS = names(metrics_in("compare"))
# fmt: off
VERDICTS = ("regression", "new failure", "missing", "noisy", "improvement", "fixed", "new",
            "unchanged", "not gated")
ROW_COLUMNS = ["scenario", "metric", "base", "new", "change_pct", "base_step_ms", "new_step_ms",
               "threshold_pct", "detectable_pct", "spread_pct", "base_n", "new_n", "p_value", "p_holm",
               "verdict", "base_status", "new_status", "note"]
# fmt: on
_ROW_DEFAULTS = {
    "base": math.nan,
    "new": math.nan,
    "change_pct": math.nan,
    "base_step_ms": math.nan,
    "new_step_ms": math.nan,
    "threshold_pct": math.nan,
    "detectable_pct": math.nan,
    "spread_pct": math.nan,
    "base_n": 0,
    "new_n": 0,
    "p_value": math.nan,
    "p_holm": math.nan,
    "verdict": "unchanged",
    "note": "",
}
STATUS_METRIC = "status"  # the metric of a row that judges the whole scenario
SPEED_METRICS = names(in_group("speed"))  # judged with the speed threshold; a CPU note may explain them
THRESHOLD_ONLY = "threshold only"  # the note of a row judged without the test (too little spread)
NOT_GATED = "not gated"  # the verdict of a row shown and never judged: host RSS (HOST_RSS_NOTE)
# A CPU row's peak_mem_mb is the worker's peak resident set (peak_mem_source "rss"). It moves between
# two runs of the same matrix by more than the memory threshold, which is a GPU memory's (an A/A on
# the CPU: +11% in issue 58, +2.8% on a tiny matrix), while one run's repeats agree to a fraction of
# a percent: their spread cannot measure that noise, so the t-test would call the offset real.
HOST_RSS_NOTE = "host RSS: shown, not gated (it moves between runs; one run's repeats cannot measure that)"


@dataclass(frozen=True)
class Thresholds:
    """The floors (in %) a median must move beyond to count, and the family-wise level of the test."""

    speed_pct: float = default_threshold_pct("speed")  # samples_per_s (and, in bench.history, step_time_median_ms)
    memory_pct: float = default_threshold_pct("memory")  # peak_mem_mb
    energy_pct: float = default_threshold_pct("energy")  # energy_per_sample_j
    alpha: float = 0.05

    def __post_init__(self) -> None:
        for key in ("speed_pct", "memory_pct", "energy_pct"):
            value = getattr(self, key)
            bounded(value, f"threshold {key} = {value!r}", 0, MAX_THRESHOLD_PCT)
        if not is_finite(self.alpha) or not 0 < self.alpha < 1:
            raise BadInput(f"alpha = {self.alpha!r} must lie between 0 and 1")

    def for_metric(self, metric: str) -> float:
        """The threshold of the metric's group (bench.metrics); a metric without one (final_loss)
        gets the speed threshold."""
        found = BY_NAME.get(metric)
        group = found.threshold if found is not None else None
        return {"memory": self.memory_pct, "energy": self.energy_pct}.get(group or "", self.speed_pct)

    def rule(self, metric: str, quantities: int = len(JUDGED)) -> Rule:
        """How compare judges this quantity: alpha is shared by the quantities judged (those of JUDGED
        that some scenario has on both sides: energy per sample only where both runs read NVML's energy)."""
        return Rule(self.for_metric(metric), BY_NAME[metric].sign, self.alpha, quantities=max(quantities, 1))


def method_text(alpha: float) -> str:
    return (
        f"per scenario, {_judged_text()}: the median change must pass "
        f"the threshold and a one-sided t-test on the log figures (the spread pooled over both sides' repeats), "
        "Holm-adjusted over the scenarios and Bonferroni over the quantities judged, must reach "
        f"alpha={alpha:g} for the whole comparison; the test needs "
        f"{MIN_REPEATS} ok repeats a side; "
        "the threshold alone decides otherwise"
    )


def _judged_text() -> str:
    """'samples_per_s (step time shown beside it) and peak_mem_mb'."""
    shown = [f"{m} (step time shown beside it)" if m == SPEED_METRIC else m for m in JUDGED]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


@dataclass(frozen=True)
class CompareResult:
    rows: pd.DataFrame  # ROW_COLUMNS, one row per scenario x quantity (or one status row)
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
    setting_differences: tuple[SettingDifference, ...] = ()  # compared anyway (--allow-env-mismatch)

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
    """Judge every scenario of base and new. Raise IncomparableRuns when the GPU models, the numbers
    of GPUs, or a scenario's settings or memory source differ, unless allow_env_mismatch."""
    thresholds = thresholds or Thresholds()
    env = check_envs(base_env, new_env, allow_mismatch=allow_env_mismatch, labels=labels)
    differences = setting_differences(base_frame, new_frame)
    if differences and not allow_env_mismatch:
        raise IncomparableRuns(
            refusal(differences), hint="compare runs made with the same settings, or pass --allow-env-mismatch"
        )
    cpu_smoke = cpu_run(base_env, base_frame) or cpu_run(new_env, new_frame)
    notes = ([CPU_NOTE] if cpu_smoke else []) + list(env.notes)
    if differences:
        notes.append(f"{refusal(differences)}; compared anyway")
    rows = _rows(base_frame, new_frame, thresholds)
    for r in rows:
        differing = [d.text() for d in differences if d.scenario == r["scenario"]]
        if differing:
            r["note"] = "; ".join(filter(None, [r["note"], "settings differ: " + ", ".join(dict.fromkeys(differing))]))
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
        setting_differences=differences,
    )


def _fails(verdict: str, allow_missing: bool) -> bool:
    return verdict in ("regression", "new failure") or (verdict == "missing" and not allow_missing)


# -- scenarios -----------------------------------------------------------------------------------
def _rows(base_frame: pd.DataFrame, new_frame: pd.DataFrame, thresholds: Thresholds) -> list[dict[str, Any]]:
    """Every scenario's rows in order: a status row, or its speed, memory and loss rows, the speed
    and memory rows of all scenarios judged together (one family per quantity)."""
    base_groups = dict(tuple(base_frame.groupby("scenario", sort=False)))
    new_groups = dict(tuple(new_frame.groupby("scenario", sort=False)))
    rows: list[dict[str, Any]] = []
    pending: dict[str, list[tuple[dict[str, Any], Sample, str | None]]] = {m: [] for m in JUDGED}
    profiles: dict[str, tuple[pd.DataFrame, pd.DataFrame]] = {}
    for name in [*base_groups, *[n for n in new_groups if n not in base_groups]]:
        base, new = base_groups.get(name), new_groups.get(name)
        b, n = scenario_status(base), scenario_status(new)
        if base is None or new is None or not b == n == "ok":
            verdict, note = _status_verdict(b, n)
            counts = {"base_n": _ok_count(base), "new_n": _ok_count(new)}
            rows.append(_row(str(name), b, n, metric=STATUS_METRIC, verdict=verdict, note=note, **counts))
            continue
        ok_base, ok_new = base[base["status"] == "ok"], new[new["status"] == "ok"]
        cpu = _cpu_note(ok_base, ok_new)
        profiles[str(name)] = (ok_base, ok_new)
        for metric in JUDGED:
            xs, ys = _values(ok_base, metric), _values(ok_new, metric)
            if not xs and not ys:
                continue
            row = _row(str(name), b, n, metric=metric, base=_median(xs), new=_median(ys), base_n=len(xs), new_n=len(ys))
            row["threshold_pct"] = thresholds.for_metric(metric)
            if metric == SPEED_METRIC:
                row["base_step_ms"] = _median(_values(ok_base, STEP_METRIC))
                row["new_step_ms"] = _median(_values(ok_new, STEP_METRIC))
            rows.append(row)
            if metric == MEMORY_METRIC and host_rss(ok_base, ok_new):
                change = round(percent_change(row["base"], row["new"]), 6) if xs and ys else math.nan
                row.update(change_pct=change, threshold_pct=math.nan, verdict=NOT_GATED, note=HOST_RSS_NOTE)
                continue
            if not xs or not ys:
                row["note"] = f"no values in {'base' if not xs else 'new'}"
                continue
            pending[metric].append((row, Sample(xs, ys), cpu))
        loss = _judge_loss(ok_base, ok_new)
        if loss:
            rows.append(_row(str(name), b, n, **loss))
        parity = judge_parity(ok_base, ok_new)
        if parity:
            rows.append(_row(str(name), b, n, **parity))
    quantities = sum(1 for items in pending.values() if items)
    for metric, items in pending.items():
        judged = judge([sample for _, sample, _ in items], thresholds.rule(metric, quantities)) if items else []
        for (row, _, cpu), judgement in zip(items, judged, strict=True):
            row.update(_judged(judgement, thresholds.alpha))
            if cpu and metric == SPEED_METRIC and judgement.verdict != "unchanged":
                row["note"] = "; ".join(filter(None, [row["note"], cpu]))
            if metric == SPEED_METRIC and judgement.verdict != "unchanged":
                row["note"] = "; ".join(filter(None, [row["note"], profile_note(*profiles[row["scenario"]])]))
    return rows


def host_rss(ok_base: pd.DataFrame, ok_new: pd.DataFrame) -> bool:
    """Whether a scenario's peak memory is the host's resident set on a side (peak_mem_source "rss")."""
    return any(
        "peak_mem_source" in frame and (frame["peak_mem_source"].astype(str) == "rss").any()
        for frame in (ok_base, ok_new)
    )


def _judged(j: Judgement, alpha: float) -> dict[str, Any]:
    """A row's figures and verdict from the gate's judgement, with the note that explains it."""
    note = ""
    if not j.tested:
        note = f"{THRESHOLD_ONLY}: fewer than {MIN_REPEATS} ok repeats on a side"
    elif j.verdict == "noisy":
        note = f"beyond the threshold but not significant (Holm-adjusted p > {alpha:g})"
    return {
        "change_pct": j.change_pct,
        "spread_pct": j.spread_pct,
        "detectable_pct": j.detectable_pct,
        "p_value": j.p_value,
        "p_holm": j.p_holm,
        "verdict": j.verdict,
        "note": note,
    }


def _cpu_loop_ms(frame: pd.DataFrame) -> float:
    """The median over repeats of the CPU probe around each window (mean of its two ends); nan if none."""
    return _median([float(v) for v in window_cpu_loop_ms(frame) if not math.isnan(v)])


def _cpu_note(ok_base: pd.DataFrame, ok_new: pd.DataFrame) -> str | None:
    return cpuspeed.shift_note(_cpu_loop_ms(ok_base), _cpu_loop_ms(ok_new), "the new run's windows")


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


def profile_note(ok_base: pd.DataFrame, ok_new: pd.DataFrame) -> str:
    """Where a speed change went, when both sides were profiled (`--profile`): the kernel-time
    categories that moved most per step ("profiled step +52 ms: +40 ms optimizer, +12 ms idle"); ""
    when a side has no profile."""

    def medians(frame: pd.DataFrame) -> dict[str, float | None]:
        return {
            n: _median(_values(frame, f"prof_{n}_ms")) if _values(frame, f"prof_{n}_ms") else None
            for n in kernels.NAMES
        }

    base, new = medians(ok_base), medians(ok_new)
    if any(v is None for v in [*base.values(), *new.values()]):
        return ""
    moved = kernels.attribute(base, new)
    step = sum(v for v in new.values() if v is not None) - sum(v for v in base.values() if v is not None)
    if not moved:
        return f"profiled step {step:+.1f} ms, no category moved by 2% of the step or more"
    return f"profiled step {step:+.1f} ms: " + ", ".join(f"{ms:+.1f} ms {name}" for name, ms in moved)


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


GOOD_PARITY = ("equivalent", "reference")


def judge_parity(ok_base: pd.DataFrame, ok_new: pd.DataFrame) -> dict[str, Any] | None:
    """The loss verdict of each side against its own run's reference (bench/results/parity.py):
    a regression when it turns from equivalent to deviates or diverged, an improvement the other
    way; base and new are the median parity_delta; None when neither side has a verdict."""
    sides = []
    for frame in (ok_base, ok_new):
        rows = [r for r in frame.to_dict("records") if row_parity(r).verdict] if "parity" in frame else []
        verdict = worst([r["parity"] for r in rows])
        shown = next((row_parity(r) for r in rows if r["parity"] == verdict), None)
        sides.append((verdict, shown, _median(_values(pd.DataFrame(rows), "parity_delta")) if rows else math.nan))
    (bv, bp, bd), (nv, np_, nd) = sides
    if not bv and not nv:
        return None
    verdict = "unchanged"
    if nv and bv in GOOD_PARITY and nv not in GOOD_PARITY:
        verdict = "regression"
    elif bv and bv not in GOOD_PARITY and nv in GOOD_PARITY:
        verdict = "improvement"
    # the note starts with the new run's verdict ("loss equivalent (...)"): compare's headlines read it there
    new_text = np_.text() if np_ is not None else "loss not judged in the new run"
    note = new_text if bv == nv else f"{new_text}; base: {bp.text() if bp is not None else 'loss not judged'}"
    return {
        "metric": PARITY_METRIC,
        "base": bd,
        "new": nd,
        "base_n": len(ok_base),
        "new_n": len(ok_new),
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
