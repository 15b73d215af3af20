"""The results table: one row per scenario x repeat, written atomically after every scenario."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from .errors import BadInput
from .fsio import atomic_write_text
from .scenario import SETTING_KEYS

RESULTS_CSV, ENV_JSON, SCENARIOS_JSON = "results.csv", "env.json", "scenarios.json"

STATUSES = ("ok", "skipped", "oom", "timeout", "error", "crashed", "diverged", "interrupted")
FINAL_STATUSES = ("ok", "skipped", "oom", "timeout", "error", "crashed", "diverged")
FAILED_STATUSES = ("oom", "timeout", "error", "crashed", "diverged", "interrupted")
FAILURE_SEVERITY = ("interrupted", "crashed", "timeout", "oom", "error", "diverged")  # worst first

ID_COLUMNS = ["scenario", "repeat", "status", "error"]
SETTING_COLUMNS = [k for k in SETTING_KEYS if k not in ("name", "inject_fault")] + ["model_resolved", "device"]
SPEED_COLUMNS = [
    "samples_per_s",  # steady state: samples in the window / window wall time
    "tokens_per_s",
    "step_time_p10_ms",  # per optimizer step, from CUDA events inside the window
    "step_time_median_ms",
    "step_time_p90_ms",
    "window_s",
    "window_steps",
    "window_samples",
    "first_step_s",  # first optimizer step (kernel selection, compilation)
    "warmup_s",  # training start to window start
    "train_loop_s",  # training start to last step end
    "cpu_loop_start_ms",  # a fixed Python loop on the training thread just before the window
    "cpu_loop_end_ms",  # ... and just after it (bench/measure/cpuspeed.py)
    "fp32_matmul_precision",  # CUDA fp32 matmuls after training: ieee (plain fp32) or tf32
    "trainer_runtime_s",  # the Trainer's own train_runtime (whole epoch, warm-up included)
    "trainer_samples_per_s",  # the Trainer's own train_samples_per_second
]
MEMORY_COLUMNS = [
    "peak_mem_mb",  # NVML per-process peak on a GPU, peak RSS on the CPU; see peak_mem_source
    "peak_mem_source",
    "nvml_process_peak_mb",  # NVML: the worker's processes (nvmlDeviceGetComputeRunningProcesses)
    "nvml_device_peak_mb",  # NVML: device-wide used peak minus the idle level before the run
    "nvml_idle_mb",  # NVML: device-wide used before the worker started
    "nvml_sample_hz",
    "torch_max_allocated_mb",  # torch.cuda.max_memory_allocated
    "torch_max_reserved_mb",  # torch.cuda.max_memory_reserved
    "rss_peak_mb",  # the worker's peak resident set size (getrusage)
    "torch_alloc_model_built_mb",
    "torch_alloc_after_forward_mb",
    "torch_alloc_after_backward_mb",
    "torch_alloc_after_optimizer_step_mb",
]
PREDICTED_COLUMNS = [  # bench/memory_model.py: arithmetic on the model config (README: Memory, explained)
    "pred_weights_mb",
    "pred_autocast_copies_mb",
    "pred_grads_mb",
    "pred_optimizer_mb",
    "pred_optimizer_temp_mb",
    "pred_activations_mb",
    "pred_workspace_mb",
    "pred_peak_allocated_mb",  # compare with torch_max_allocated_mb
    "pred_peak_phase",
    "pred_peak_error_pct",  # (predicted - measured torch_max_allocated_mb) / measured x 100
]
FLOP_COLUMNS = ["model_params", "flops_per_sample", "achieved_tflops", "peak_tflops", "mfu", "peak_source"]
OTHER_COLUMNS = [
    "final_loss",
    "loss_finite",
    "nonfinite_losses",
    "worker_wall_s",  # the subprocess's whole life
    "startup_s",  # launch to first training step
    "startup_breakdown",  # JSON: seconds per start-up step (interpreter, imports, CUDA, model, data, engine)
    "overhead_s",  # worker_wall_s - train_loop_s
    "cpu_affinity",  # the CPUs the worker could run on ("0-15"; --cpu-affinity narrows it)
    "exit_code",
    "started_at",
    "stderr_tail",
]
COLUMNS = (
    ID_COLUMNS + SETTING_COLUMNS + SPEED_COLUMNS + MEMORY_COLUMNS + PREDICTED_COLUMNS + FLOP_COLUMNS + OTHER_COLUMNS
)
NUMERIC_COLUMNS = [
    c
    for c in SPEED_COLUMNS + MEMORY_COLUMNS + PREDICTED_COLUMNS + FLOP_COLUMNS + OTHER_COLUMNS
    if c
    not in (
        "peak_mem_source",
        "peak_source",
        "loss_finite",
        "started_at",
        "stderr_tail",
        "fp32_matmul_precision",
        "startup_breakdown",
        "pred_peak_phase",
        "cpu_affinity",
    )
]
NAN_WORDS = ("nan", "-nan", "na", "n/a", "null", "none", "<na>")  # numeric cells that mean missing
REQUIRED_COLUMNS = ["scenario", "repeat", "status", "samples_per_s", "peak_mem_mb"]


def to_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame([{c: row.get(c) for c in COLUMNS} for row in rows], columns=COLUMNS)
    return frame


def write_results(path: Path, rows: list[dict[str, Any]]) -> None:
    buffer = io.StringIO()
    to_frame(rows).to_csv(buffer, index=False)
    atomic_write_text(path, buffer.getvalue())


def read_results(path: Path) -> pd.DataFrame:
    """Read a results.csv (or a result directory); bad files are a BadInput naming the file."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_CSV
    if not path.is_file():
        raise BadInput(f"{path}: no such results file")
    try:
        # Only an empty cell is missing: a scenario may be called "NA", "nan" or "1".
        frame = pd.read_csv(path, keep_default_na=False, na_values=[""], dtype={"scenario": str, "cpu_affinity": str})
    except pd.errors.EmptyDataError:
        raise BadInput(f"{path}: the file is empty") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: not a readable CSV: {str(exc).splitlines()[0]}") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise BadInput(f"{path}: not a gpubench results file (missing columns: {', '.join(missing)})")
    for column in [c for c in NUMERIC_COLUMNS if c in frame.columns]:
        converted = pd.to_numeric(frame[column], errors="coerce")
        spelled_nan = frame[column].astype(str).str.strip().str.lower().isin(NAN_WORDS)
        bad = frame[column].notna() & converted.isna() & ~spelled_nan
        if bad.any():
            row = int(bad.idxmax()) + 2  # header is line 1
            raise BadInput(
                f"{path}: line {row}: column '{column}' holds a non-numeric value {frame[column][bad.idxmax()]!r}"
            )
        frame[column] = converted
    unknown = sorted(set(frame["status"].dropna()) - set(STATUSES))
    if unknown:
        raise BadInput(f"{path}: unknown status {unknown[0]!r}", hint=f"known: {', '.join(STATUSES)}")
    duplicated = frame.duplicated(subset=["scenario", "repeat"], keep=False)
    if duplicated.any():
        first = frame[duplicated].iloc[0]
        raise BadInput(f"{path}: duplicate rows for scenario '{first['scenario']}' repeat {first['repeat']}")
    return frame


def summarize(frame: pd.DataFrame, baseline: str = "baseline") -> pd.DataFrame:
    """One row per scenario (matrix order): medians over ok repeats and change vs baseline."""
    out = []
    for name, group in frame.groupby("scenario", sort=False):
        ok = group[group["status"] == "ok"]
        statuses = list(group["status"])
        status = "ok" if statuses and all(s == "ok" for s in statuses) else _worst(statuses)
        sps = ok["samples_per_s"].astype(float)
        median = float(sps.median()) if len(ok) else math.nan
        cv = float(sps.std(ddof=1) / sps.mean() * 100) if len(ok) >= 2 and sps.mean() else math.nan
        errors = [str(e) for e in group["error"] if isinstance(e, str) and e]
        out.append(
            {
                "scenario": name,
                "status": status,
                "repeats": len(group),
                "ok": len(ok),
                "samples_per_s": median,
                "samples_per_s_cv_pct": cv,
                "peak_mem_mb": float(ok["peak_mem_mb"].median()) if len(ok) else math.nan,
                "peak_mem_source": ok["peak_mem_source"].iloc[0] if len(ok) else "",
                "torch_max_allocated_mb": _median(ok, "torch_max_allocated_mb"),
                "final_loss": _median(ok, "final_loss"),
                "mfu": _median(ok, "mfu"),
                "trainer_samples_per_s": _median(ok, "trainer_samples_per_s"),
                "error": errors[0] if errors else "",
            }
        )
    summary = pd.DataFrame(out)
    base = summary[summary["scenario"] == baseline]
    for metric in ("samples_per_s", "peak_mem_mb"):
        ref = float(base[metric].iloc[0]) if len(base) else math.nan
        summary[f"{metric}_vs_baseline_pct"] = (summary[metric] / ref - 1) * 100 if ref else math.nan
    return summary


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


def _worst(statuses: list[str]) -> str:
    failed = worst_failure(statuses)
    if failed:
        return failed
    return "skipped" if "skipped" in statuses else (statuses[0] if statuses else "missing")
