"""Which family's memory model a model takes: the one place that reads config.json's model_type.

  bert   bert.py (dimensions, tensors), bert_acts.py (saved tensors), bert_phases.py (the phases)
  llama  decoder.py, decoder_weights.py, decoder_acts.py, decoder_phases.py

`family()` is the dispatch; everything else asks it. A model-family registry (bench/families/)
will take its place: then a family gives its tensors and either an activation model or the
explicit "not predicted" (generic.py; docs/extending.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import BadInput
from ..families import origin, read_config
from ..models import PRESETS, resolve_model
from ..scenario import Scenario
from .bert import BertDims, bert_dims_from_config
from .bert_phases import predict_bert
from .decoder import DecoderDims, decoder_dims_from_config
from .decoder_phases import predict_decoder
from .prediction import Prediction

Dims = BertDims | DecoderDims


@dataclass(frozen=True)
class MemoryFamily:
    """What the memory model takes from a family: its dimensions from a config, and its prediction."""

    dims_from_config: Callable[[dict[str, Any], str], Dims]
    predict: Callable[[Scenario, Any, int], Prediction]  # (scenario, that family's dims, assumed GPUs)


def family(model_type: str, origin: str) -> MemoryFamily:
    """The memory model for a config.json's model_type; BadInput names `origin` for any other."""
    if model_type == "llama":
        return MemoryFamily(decoder_dims_from_config, predict_decoder)
    if model_type == "bert":
        return MemoryFamily(bert_dims_from_config, predict_bert)
    raise BadInput(
        f"{origin}: model_type '{model_type}' is not bert or llama; memory prediction knows BERT "
        "classifiers and Llama-style causal LMs"
    )


def dims_from_config(cfg: dict[str, Any], origin: str) -> Dims:
    return family(cfg.get("model_type", "bert"), origin).dims_from_config(cfg, origin)


def load_dims(model: str) -> Dims:
    """A preset's dimensions, or those of a config (a checkpoint directory's config.json, a config
    file, a matrix's [model] table; read, never run)."""
    if model in PRESETS:
        return dims_from_config(PRESETS[model], f"preset {model}")
    return dims_from_config(read_config(model), origin(model))


def predict(sc: Scenario, d: Dims, assumed_gpus: int = 2) -> Prediction:
    """Pure arithmetic on the model's dimensions and the scenario's settings; per GPU for a
    multi-process scenario (sharding.py), gpus = "all" counted as `assumed_gpus`."""
    return family(d.model_type, sc.name).predict(sc, d, assumed_gpus)


def prediction_for(sc: Scenario, model: str) -> Prediction:
    """`model` is a preset or a checkpoint directory ('auto' means the GPU's default, bert-large)."""
    return predict(sc, load_dims(resolve_model(model, "cuda")))
