"""Per-scenario figures over a run's repeats, and the failure a scenario is known by."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from ..metrics import metrics_in, names
from ..stats import separation
from .columns import FAILURE_SEVERITY

JUDGED_METRICS = names(metrics_in("summary"))  # each gets a change vs the baseline and its noise
NOISE_COLUMNS = tuple(f"{m}_vs_baseline_noise" for m in JUDGED_METRICS)


def summarize(frame: pd.DataFrame, baseline: str = "baseline") -> pd.DataFrame:
    """One row per scenario (matrix order): medians over ok repeats and change vs baseline.

    `METRIC_vs_baseline_noise` says what that change is worth (bench.stats.separation over the
    ok repeats): "beyond" the noise, "within" it, "1 run" / "2 runs" (too few repeats to tell);
    "" for the baseline itself and where there is no change. A scenario of another model than the
    baseline's (`other_model`) has no change: two models are never compared as one recipe.
    """
    out = []
    repeats: dict[str, dict[str, list[float]]] = {m: {} for m in JUDGED_METRICS}
    for name, group in frame.groupby("scenario", sort=False):
        ok = group[group["status"] == "ok"]
        for metric in JUDGED_METRICS:
            values = ok[metric] if metric in ok else pd.Series(dtype=float)  # a results.csv from before it
            repeats[metric][str(name)] = pd.to_numeric(values, errors="coerce").dropna().tolist()
        statuses = list(group["status"])
        status = "ok" if statuses and all(s == "ok" for s in statuses) else _worst(statuses)
        sps = ok["samples_per_s"].astype(float)
        median = float(sps.median()) if len(ok) else math.nan
        cv = float(sps.std(ddof=1) / sps.mean() * 100) if len(ok) >= 2 and sps.mean() else math.nan
        errors = [str(e) for e in group["error"] if isinstance(e, str) and e]
        first = group.iloc[0].to_dict()
        row: dict[str, Any] = {
            "scenario": name,
            "model": model_label(first),
            "model_key": model_key(first),
            "status": status,
            "repeats": len(group),
            "ok": len(ok),
            "samples_per_s": median,
            "samples_per_s_cv_pct": cv,
            "peak_mem_mb": float(ok["peak_mem_mb"].median()) if len(ok) else math.nan,
            "peak_mem_source": ok["peak_mem_source"].iloc[0] if len(ok) else "",
            "torch_max_allocated_mb": _median(ok, "torch_max_allocated_mb"),
            "final_loss": _median(ok, "final_loss"),
            "eval_accuracy": _median(ok, "eval_accuracy"),
            "mfu": _median(ok, "mfu"),
            "world_size": _median(ok, "world_size"),
            "scaling_efficiency": _median(ok, "scaling_efficiency"),
            "trainer_samples_per_s": _median(ok, "trainer_samples_per_s"),
            "error": errors[0] if errors else "",
            **_bound(ok),
            **_parity(group),
            "training_note": _training_note(ok),
            "flops_note": flops_note(_median(ok, "flops_check_gap_pct")),
        }
        row.update({m: _median(ok, m) for m in JUDGED_METRICS if m not in row})  # one with no column above
        out.append(row)
    summary = pd.DataFrame(out)
    base = summary[summary["scenario"] == baseline]
    summary["other_model"] = summary["model_key"] != base["model_key"].iloc[0] if len(base) else False
    for metric in JUDGED_METRICS:
        ref = float(base[metric].iloc[0]) if len(base) else math.nan
        change = (summary[metric] / ref - 1) * 100 if ref else pd.Series(math.nan, index=summary.index)
        summary[f"{metric}_vs_baseline_pct"] = change.where(~summary["other_model"], math.nan)
        ref_values = repeats[metric].get(baseline, [])
        summary[f"{metric}_vs_baseline_noise"] = [
            "" if name == baseline or math.isnan(change) else noise_label(repeats[metric][str(name)], ref_values)
            for name, change in zip(summary["scenario"], summary[f"{metric}_vs_baseline_pct"], strict=True)
        ]
    return summary


def shown_loss(row: Mapping[str, Any]) -> Any:
    """The loss a table shows: the final window's mean (the figure parity judges and the report
    shows), else the last step's where no curve was kept (a script's row)."""
    window = row.get("final_window_loss")
    if isinstance(window, int | float) and not isinstance(window, bool) and math.isfinite(window):
        return window
    return row.get("final_loss")


def mixed_models(summary: pd.DataFrame) -> bool:
    """Whether the scenarios train more than one model (the table then has a model column)."""
    return "model_key" in summary and summary["model_key"].nunique() > 1


def other_model_note(summary: pd.DataFrame) -> str:
    """What the run table and the report say under a table where rows of another model than the
    baseline's have no change vs the baseline."""
    if "other_model" not in summary or not summary["other_model"].any():
        return ""
    base = summary[~summary["other_model"]]["model"]
    named = f" ({base.iloc[0]})" if len(base) and base.iloc[0] else ""
    return f"vs base: only rows of the baseline's model{named}; another model's rows are not compared with it"


def model_key(row: Mapping[str, Any]) -> str:
    """What tells two rows' models apart: the model as resolved (a command row: its command)."""
    resolved = _text(row.get("model_resolved")) or _text(row.get("model"))
    return _text(row.get("command")) if resolved == "command" else resolved


def model_label(row: Mapping[str, Any]) -> str:
    """A short name for the model of a row: a preset's name, a folder's or file's last part, an
    inline config's model_type, "command" for a command row's script."""
    resolved = _text(row.get("model_resolved")) or _text(row.get("model"))
    if resolved.startswith("{"):
        try:
            return f"[model] {json.loads(resolved).get('model_type', '')}".strip()
        except (ValueError, AttributeError):
            return "[model]"
    return resolved.rstrip("/").rsplit("/", 1)[-1]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _parity(group: pd.DataFrame) -> dict[str, Any]:
    """The scenario's loss verdict (the worst of its rows'; bench/results/parity.py), the median
    delta and the band."""
    from .parity import worst

    judged = (
        group[group["parity"].map(lambda v: isinstance(v, str) and bool(v))] if "parity" in group else group.iloc[:0]
    )
    return {
        "parity": worst(list(judged["parity"])) if len(judged) else "",
        "parity_delta": _median(judged, "parity_delta") if len(judged) else math.nan,
        "parity_band": _median(judged, "parity_band") if len(judged) else math.nan,
        "final_window_loss": _median(group[group["status"] == "ok"], "final_window_loss"),
        "parity_ref": next((str(v) for v in judged.get("parity_ref", []) if isinstance(v, str) and v), ""),
    }


# a Trainer row whose backward saw each micro-batch's whole loss (docs/parity.md, "The Trainer and a
# classifier under accumulation")
UNDIVIDED_NOTE = "Trainer: loss not divided over accumulation (transformers#47688)"


def _training_note(ok: pd.DataFrame) -> str:
    """What the row trained that its settings do not say (UNDIVIDED_NOTE), and why a row that asked
    for held-out scoring has no accuracy (its first repeat's eval_note); "" when neither."""
    seen = [str(v).lower() for v in ok.get("loss_accum_divided", pd.Series(dtype=object)) if not pd.isna(v)]
    unscored = [
        f"no held-out accuracy: {v}" for v in ok.get("eval_note", pd.Series(dtype=object)) if isinstance(v, str) and v
    ]
    return "; ".join([UNDIVIDED_NOTE] * ("false" in seen) + unscored[:1])


def flops_note(gap_pct: float) -> str:
    """The run table's and the report's note of a FLOP cross-check gap over CHECK_NOTE_PCT (the
    median over the ok repeats of flops_check_gap_pct, bench/measure/mfu.py); "" within it."""
    from ..measure.mfu import CHECK_NOTE_PCT, mfu_note

    if math.isnan(gap_pct) or abs(gap_pct) <= CHECK_NOTE_PCT:
        return ""
    return f"FLOP counts differ by {gap_pct:+.1f}% (FlopCounterMode vs the generic count)" + (
        ": no MFU" if mfu_note(gap_pct) else ""
    )


def _bound(ok: pd.DataFrame) -> dict[str, Any]:
    """The label most of the ok repeats got (bench/results/bound.py), and the first steadiness note."""
    from collections import Counter

    from .bound import steadiness

    labels = [str(v) for v in ok.get("bound", pd.Series(dtype=object)) if isinstance(v, str) and v]
    notes = [steadiness(r) for r in ok.to_dict("records")]
    return {
        "bound": Counter(labels).most_common(1)[0][0] if labels else "",
        "steadiness": next((n for n in notes if n), ""),
        "energy_per_sample_j": _median(ok, "energy_per_sample_j"),
        **_per_billion_tokens(ok),
        "gpu_power_mean_w": _median(ok, "gpu_power_mean_w"),
        "gpu_sm_clock_median_mhz": _median(ok, "gpu_sm_clock_median_mhz"),
        "mfu_ceiling": _median(ok, "mfu_ceiling"),
    }


def _per_billion_tokens(ok: pd.DataFrame) -> dict[str, float]:
    """What 1e9 training tokens would take at the median measured rate (the report's cost columns;
    `gpubench cost` projects any amount): hours, GPU-hours and kWh."""
    tokens_per_s, per_token = _median(ok, "tokens_per_s"), _median(ok, "energy_per_token_j")
    gpus = _median(ok, "world_size")
    gpus = 1.0 if math.isnan(gpus) else gpus
    hours = 1e9 / tokens_per_s / 3600 if tokens_per_s and not math.isnan(tokens_per_s) else math.nan
    return {
        "hours_per_1b_tokens": hours,
        "gpu_hours_per_1b_tokens": hours * gpus,
        "kwh_per_1b_tokens": per_token * 1e9 / 3.6e6,
    }


def noise_label(values: list[float], ref: list[float]) -> str:
    """bench.stats.separation of two scenarios' repeats, with "too few" named by its count."""
    judged = separation(values, ref)
    if judged != "too few":
        return judged
    runs = min(len(values), len(ref))
    return f"{runs} run" if runs == 1 else f"{runs} runs"


CPU_LOOP_COLUMNS = ["cpu_loop_start_ms", "cpu_loop_end_ms"]  # the worker's CPU probe around its window


def window_cpu_loop_ms(frame: pd.DataFrame) -> pd.Series:
    """Per row: the worker's CPU probe around its window (mean of its two ends); NaN where absent."""
    if not all(c in frame for c in CPU_LOOP_COLUMNS):
        return pd.Series(math.nan, index=frame.index, dtype=float)
    return frame[CPU_LOOP_COLUMNS].apply(pd.to_numeric, errors="coerce").mean(axis=1, skipna=False)


def row_cpu_loop_ms(row: Mapping[str, Any]) -> float | None:
    """window_cpu_loop_ms for one row as a mapping (a results row, a reference loop's JSON);
    None where either end is missing or not a finite number."""
    try:
        ends = [float(row[c]) for c in CPU_LOOP_COLUMNS]
    except (KeyError, TypeError, ValueError):
        return None
    return sum(ends) / 2 if all(math.isfinite(e) for e in ends) else None


def _median(frame: pd.DataFrame, column: str) -> float:
    if column not in frame or frame[column].isna().all():
        return math.nan
    return float(pd.to_numeric(frame[column], errors="coerce").median())


def worst_failure(statuses: list[str] | set[str]) -> str | None:
    """The most severe failed status among `statuses`, or None when none failed."""
    return next((s for s in FAILURE_SEVERITY if s in statuses), None)


def scenario_status(group: pd.DataFrame | None) -> str:
    """One side's status of a scenario in compare and history, over its repeats: absent (no group);
    the worst failed status when any repeat failed; ok when any ran; else skipped."""
    if group is None:
        return "absent"
    statuses = set(group["status"])
    return worst_failure(statuses) or ("ok" if "ok" in statuses else "skipped")


def _worst(statuses: list[str]) -> str:
    failed = worst_failure(statuses)
    if failed:
        return failed
    return "skipped" if "skipped" in statuses else (statuses[0] if statuses else "missing")
