"""The data behind `gpubench predict`: every scenario of a matrix predicted (bench.memory), with
what fits a given GPU memory, and a calibration run's measurements beside (measured.py).
Rendering is render.py; `parse_memory` reads --gpu-memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..families import family_of
from ..families.memory_model import load_dims, predict
from ..families.resolve import resolve_model
from ..memory.prediction import Prediction
from ..memory.terms import MB
from ..planner import matrix as matrix_mod
from ..planner.planning import plan_scenarios
from ..recipe.engine_registry import precision_half_weights
from ..recipe.scenario import Scenario
from .measured import Calibration, assumed, calibrate, measured_terms, predicted_counterparts, same_setup
from .unmodelled import predict_generic

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


@dataclass(frozen=True)
class ScenarioMemory:
    scenario: Scenario
    model: str
    prediction: Prediction
    need_mb: float  # predicted peak + context (+ slack when calibrated)
    fits: bool | None  # None without --gpu-memory, or when only a lower bound (no activations) fits
    measured: dict[str, float | None]  # empty without a calibration row for this scenario
    predicted: dict[str, float | None]  # the predicted counterparts of `measured`


@dataclass(frozen=True)
class PredictReport:
    matrix: str
    calibration: Calibration
    gpu_memory_mb: float | None
    rows: tuple[ScenarioMemory, ...]


def prediction_of(sc: Scenario, resolved: str, assumed_gpus: int = 2) -> Prediction:
    """A scenario's prediction on a resolved model: its family's memory model where it has one
    (Family.memory: activations too), else the tensors of the model built on the meta device with
    activations not predicted (predict/generic.py). Parameters kept in half precision (Fabric's
    bf16-true, 16-true, transformer-engine) are not in the memory model: BadInput."""
    if precision_half_weights(sc.precision):
        raise BadInput(
            f"scenario '{sc.name}': precision = {sc.precision!r} keeps the parameters in half precision, which "
            "the memory model does not count; predict it with the mixed precision of the same dtype (bf16, fp16)"
        )
    if family_of(resolved).activations:
        return predict(sc, load_dims(resolved), assumed_gpus)
    return predict_generic(sc, resolved, assumed_gpus)


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
    m = matrix_mod.load_matrix(matrix, overrides={"model": model, **(overrides or {})}, only=only)
    scenarios, _ = plan_scenarios(m.scenarios, "cuda")  # what `run` refuses, refused here too
    capacity = parse_memory(gpu_memory) if gpu_memory is not None else None
    cal = calibrate(calibrate_dir) if calibrate_dir is not None else assumed()
    rows = []
    for sc in scenarios:
        resolved = resolve_model(sc.model, "cuda")
        p = prediction_of(sc, resolved)
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
                fits=fits_in(need, capacity, p.activations_predicted),
                measured=measured_terms(row) if row else {},
                predicted=predicted_counterparts(p),
            )
        )
    return PredictReport(matrix=m.name, calibration=cal, gpu_memory_mb=capacity, rows=tuple(rows))


def fits_in(need_mb: float, capacity_mb: float | None, complete: bool) -> bool | None:
    """Whether the need fits the GPU; None without a capacity, or when a lower bound fits."""
    if capacity_mb is None:
        return None
    if need_mb > capacity_mb:
        return False
    return True if complete else None
