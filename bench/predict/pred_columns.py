"""The pred_* columns of a results row (bench/run/runner.py): the prediction beside the measurement."""

from __future__ import annotations

from typing import Any

from ..errors import GpubenchError
from ..families.resolve import resolve_model
from ..memory.terms import MB
from ..recipe.scenario import Scenario
from .measured import error_pct, measured_terms
from .predictions import prediction_of


def predicted_columns(sc: Scenario, model: str, figures: dict[str, Any]) -> dict[str, Any]:
    """The pred_* columns of one results row; empty when the model cannot be predicted (a model_type
    the memory model does not know, DeepSpeed's offload)."""
    if sc.strategy == "deepspeed" and sc.offload != "none":
        return {}  # DeepSpeed's offload buffers are not predicted (sharding.py)
    try:
        p = prediction_of(sc, resolve_model(sc.model, "cuda") if model == "auto" else model)
    except GpubenchError:
        return {}
    peak = p.peak / MB
    return {
        "pred_weights_mb": p.weights / MB,
        "pred_autocast_copies_mb": None if p.term("autocast_copies") is None else p.autocast_copies / MB,
        "pred_grads_mb": p.grads / MB,
        "pred_optimizer_mb": p.optimizer / MB,
        "pred_optimizer_temp_mb": p.optimizer_temp / MB,
        "pred_activations_mb": None if p.term("activations") is None else p.activations / MB,
        "pred_workspace_mb": p.workspace / MB,
        # a family without predicted activations gets a lower bound, never a peak to compare
        "pred_peak_allocated_mb": peak if p.activations_predicted else None,
        "pred_peak_min_mb": None if p.activations_predicted else peak,
        "pred_peak_phase": p.peak_phase,
        "pred_peak_error_pct": error_pct(peak, measured_terms(figures)["peak"]) if p.activations_predicted else None,
    }
