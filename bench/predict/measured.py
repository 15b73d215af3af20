"""The measured side: each predicted term's counterpart in a results row, and a calibration run.

The worker records torch.cuda.memory_allocated() the first time each phase is reached
(bench/worker/tracking.py). With the Trainer: model_built after the model is on the GPU;
after_forward from a forward hook on the model (after accelerate's autocast wrapper returned);
after_backward after the whole first training_step (forward + backward, first micro-batch);
after_optimizer_step in on_optimizer_step (after optimizer.step(), before zero_grad). So:
  weights               = model_built
  activations + saved half copies + one workspace = after_forward - model_built
  grads + both workspaces                         = after_backward - model_built
  optimizer states      = after_optimizer_step - after_backward
  peak                  = torch_max_allocated_mb
A calibration run gives what is not predicted: CUDA context + non-torch allocations
(NVML per-process peak - torch reserved peak) and allocator slack (reserved - allocated peak).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..memory.prediction import Prediction
from ..memory.terms import MB
from ..recipe.scenario import Scenario
from ..results import read_env, read_results

DEFAULT_CONTEXT_MB = 750.0  # assumed without a calibration run: an H200, CUDA 13, torch 2.11 measured 742-758


def _num(row: dict[str, Any], key: str) -> float | None:
    value = row.get(key)
    if value is None or isinstance(value, str | bool):
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def measured_terms(row: dict[str, Any]) -> dict[str, float | None]:
    """The measured counterparts (MB) of the predicted terms, from one results row."""
    built = _num(row, "torch_alloc_model_built_mb")
    forward = _num(row, "torch_alloc_after_forward_mb")
    backward = _num(row, "torch_alloc_after_backward_mb")
    step = _num(row, "torch_alloc_after_optimizer_step_mb")
    optimizer = _diff(step, backward)
    if optimizer is not None and optimizer < 1.0 and step_may_be_skipped(row):
        optimizer = None  # marked at a step that created no state: nothing to compare
    return {
        "weights": built,
        "forward": _diff(forward, built),
        "grads_workspace": _diff(backward, built),
        "optimizer": optimizer,
        "peak": _num(row, "torch_max_allocated_mb"),
    }


def step_may_be_skipped(row: dict[str, Any]) -> bool:
    """Whether the first after_optimizer_step mark can come before any optimizer state exists:
    fp16's GradScaler skips optimizer.step() while the loss scale overflows, and accelerate's
    prepared optimizer skips it on micro-batches that only accumulate (the Accelerate engine marks
    the phase on every micro-batch)."""
    accumulating = str(row.get("engine")) == "accelerate" and (_num(row, "grad_accum_steps") or 1) > 1
    return str(row.get("precision")) == "fp16" or accumulating


def predicted_counterparts(p: Prediction) -> dict[str, float | None]:
    """The predicted sums (MB) that measured_terms() measures (None: activations not predicted)."""
    forward = (p.activations + p.autocast_copies + p.workspace / 2) / MB if p.activations_predicted else None
    return {
        "weights": p.weights / MB,
        "forward": forward,
        "grads_workspace": (p.grads + p.workspace) / MB,
        "optimizer": p.optimizer / MB,
        "peak": p.peak / MB,
    }


MEMORY_SETTINGS = (
    "engine",
    "batch_size",
    "grad_accum_steps",
    "grad_checkpointing",
    "precision",
    "optimizer",
    "compile",
    "attn_implementation",
    "seq_len",
)


def same_setup(row: dict[str, Any], sc: Scenario, model: str) -> bool:
    """Whether a calibration row ran what `sc` describes (same model and memory-relevant settings)."""
    if str(row.get("model_resolved")) != model:
        return False
    return all(str(row.get(k)) == str(getattr(sc, k)) for k in MEMORY_SETTINGS)


def error_pct(predicted: float | None, measured: float | None) -> float | None:
    """(predicted - measured) / measured in %: positive means the prediction is too high."""
    if predicted is None or measured is None or measured <= 0:
        return None
    return (predicted - measured) / measured * 100


@dataclass(frozen=True)
class Calibration:
    source: str  # a sentence saying where the figures come from
    context_mb: float  # CUDA context + non-torch allocations
    slack_mb: dict[str, float] = field(default_factory=dict)  # scenario -> reserved - allocated peak
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)  # scenario -> first ok row
    measured: bool = False

    def slack_for(self, scenario: str) -> float:
        if scenario in self.slack_mb:
            return self.slack_mb[scenario]
        return statistics.median(self.slack_mb.values()) if self.slack_mb else 0.0


def assumed() -> Calibration:
    return Calibration(
        source=f"context {DEFAULT_CONTEXT_MB:.0f} MB assumed (no --calibrate; an H200 with CUDA 13 measured "
        "742-758 MB); allocator slack not included",
        context_mb=DEFAULT_CONTEXT_MB,
    )


def calibrate(result_dir: Path) -> Calibration:
    """Context and slack measured in a previous run (a result directory or its results.csv)."""
    frame = read_results(result_dir)
    ok = frame[frame["status"] == "ok"]
    needed = ("nvml_process_peak_mb", "torch_max_reserved_mb", "torch_max_allocated_mb")
    if any(c not in ok.columns for c in needed):
        raise BadInput(f"{result_dir}: no torch/NVML memory columns to calibrate from")
    rows = [r for r in ok.to_dict("records") if all(_num(r, c) is not None for c in needed)]
    if not rows:
        raise BadInput(
            f"{result_dir}: no ok GPU rows with NVML and torch peaks to calibrate from",
            hint="calibrate with a run made on the GPU (not --device cpu)",
        )
    contexts = [float(r["nvml_process_peak_mb"]) - float(r["torch_max_reserved_mb"]) for r in rows]
    slack: dict[str, float] = {}
    first: dict[str, dict[str, Any]] = {}
    for r in rows:
        slack.setdefault(r["scenario"], float(r["torch_max_reserved_mb"]) - float(r["torch_max_allocated_mb"]))
        first.setdefault(r["scenario"], r)
    try:
        env = read_env(result_dir if Path(result_dir).is_dir() else Path(result_dir).parent) or {}
        gpu = str((env.get("gpu") or {}).get("name") or "")
    except (BadInput, OSError, AttributeError):
        gpu = ""
    context = statistics.median(contexts)
    where = f"{result_dir}" + (f" on {gpu}" if gpu else "")
    source = (
        f"context + non-torch {context:.0f} MB measured in {where} (NVML per-process peak - torch "
        f"reserved peak, median of {len(contexts)} rows); allocator slack (reserved - allocated) "
        "from the same scenario there, else the median"
    )
    return Calibration(source=source, context_mb=context, slack_mb=slack, rows=first, measured=True)
