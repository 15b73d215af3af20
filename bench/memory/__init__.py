"""Memory, explained: predict each scenario's GPU memory before running it, and set the prediction
beside what a run measured. No torch import: `gpubench predict` needs no GPU. This is the package's
face; the runner and the CLI call only these:

  predicted_columns(sc, model, figures)  the pred_* columns of a results row (bench/run/runner.py)
  predict_matrix(...)                    the data behind `gpubench predict`
  parse_memory("24GB")                   a memory size in MB (2**20 bytes)

tensors.py    a parameter tensor (name, shape), from a family's config or a built model's parameters
prediction.py what a prediction is (terms, phases, peak) and the notes every family shares
dispatch.py   which family's model a config takes (model_type): the one place that decides
bert.py       BERT's dimensions and exact parameter tensors (bert_phases.py: its phases)
decoder*.py   the same for Llama-style causal LMs
terms.py      bytes per term: weights, gradients, optimizer states and temporaries, activations, ...
measured.py the measured counterparts from a results row, and a calibration from a previous run
render.py   the `gpubench predict` table and JSON
docs/memory.md cites the sources.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import matrix as matrix_mod
from ..errors import BadInput, GpubenchError
from ..models import resolve_model
from ..scenario import Scenario
from .dispatch import load_dims, predict, prediction_for
from .measured import (
    Calibration,
    assumed,
    calibrate,
    error_pct,
    measured_terms,
    predicted_counterparts,
    same_setup,
)
from .prediction import Prediction
from .terms import MB

_UNITS = {"mb": 1.0, "mib": 1.0, "gb": 1024.0, "gib": 1024.0, "tb": 1024.0**2, "tib": 1024.0**2}
MAX_GPU_MEMORY_MB = 1024.0**3  # a petabyte: beyond it (infinity included) is a typo


def parse_memory(text: str) -> float:
    """'24GB', '24 GiB', '80000MB' -> MB. Like nvidia-smi and the *_mb columns, 1 GB = 1024 MB here."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]+)\s*", text or "")
    if not match or match.group(2).lower() not in _UNITS:
        raise BadInput(
            f"--gpu-memory {text!r} is not a memory size", hint="write a number and a unit: 24GB, 24GiB, 80000MB"
        )
    value = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if value <= 0:
        raise BadInput(f"--gpu-memory {text!r} must be more than zero")
    if value > MAX_GPU_MEMORY_MB:
        raise BadInput(f"--gpu-memory {text!r} is more than a petabyte")
    return value


def predicted_columns(sc: Scenario, model: str, figures: dict[str, Any]) -> dict[str, Any]:
    """The pred_* columns of one results row; empty when the model cannot be predicted (not BERT)."""
    if sc.strategy == "deepspeed" and sc.offload != "none":
        return {}  # DeepSpeed's offload buffers are not predicted (sharding.py)
    try:
        p = prediction_for(sc, model)
    except GpubenchError:
        return {}
    peak = p.peak / MB
    return {
        "pred_weights_mb": p.weights / MB,
        "pred_autocast_copies_mb": p.autocast_copies / MB,
        "pred_grads_mb": p.grads / MB,
        "pred_optimizer_mb": p.optimizer / MB,
        "pred_optimizer_temp_mb": p.optimizer_temp / MB,
        "pred_activations_mb": p.activations / MB,
        "pred_workspace_mb": p.workspace / MB,
        "pred_peak_allocated_mb": peak,
        "pred_peak_phase": p.peak_phase,
        "pred_peak_error_pct": error_pct(peak, measured_terms(figures)["peak"]),
    }


@dataclass(frozen=True)
class ScenarioMemory:
    scenario: Scenario
    model: str
    prediction: Prediction
    need_mb: float  # predicted peak + context (+ slack when calibrated)
    fits: bool | None  # None without --gpu-memory
    measured: dict[str, float | None]  # empty without a calibration row for this scenario
    predicted: dict[str, float]  # the predicted counterparts of `measured`


@dataclass(frozen=True)
class PredictReport:
    matrix: str
    calibration: Calibration
    gpu_memory_mb: float | None
    rows: tuple[ScenarioMemory, ...]


def predict_matrix(
    matrix: str,
    *,
    model: str | None = None,
    only: list[str] | None = None,
    overrides: dict[str, Any] | None = None,
    gpu_memory: str | None = None,
    calibrate_dir: Path | None = None,
) -> PredictReport:
    """Predict every scenario of a matrix; with a calibration run, set its measurements beside."""
    m = matrix_mod.load_matrix(matrix)
    scenarios = matrix_mod.apply_overrides(m.scenarios, {"model": model, **(overrides or {})})
    scenarios = matrix_mod.select(scenarios, only, str(m.path))
    capacity = parse_memory(gpu_memory) if gpu_memory is not None else None
    cal = calibrate(calibrate_dir) if calibrate_dir is not None else assumed()
    rows = []
    for sc in scenarios:
        resolved = resolve_model(sc.model, "cuda")
        p = predict(sc, load_dims(resolved))
        row = cal.rows.get(sc.name)
        row = row if row is not None and same_setup(row, sc, resolved) else None
        slack = cal.slack_for(sc.name if row is not None else "") if cal.measured else 0.0
        need = p.peak / MB + cal.context_mb + slack
        rows.append(
            ScenarioMemory(
                scenario=sc,
                model=resolved,
                prediction=p,
                need_mb=need,
                fits=None if capacity is None else need <= capacity,
                measured=measured_terms(row) if row else {},
                predicted=predicted_counterparts(p),
            )
        )
    return PredictReport(matrix=m.name, calibration=cal, gpu_memory_mb=capacity, rows=tuple(rows))
