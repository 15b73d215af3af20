"""Which memory model a model takes: its family's own, the one its row names (Family.memory, a
MemoryModel in the family's folder: bench/families/), found by config.json's model_type.

Family-free: the families with a memory model are read from the registry, never named here. A
family without one is predicted from its built model's tensors (generic.py, bench/predict/predictions.py).
"""

from __future__ import annotations

from typing import Any

from ..errors import BadInput
from ..memory.prediction import MemoryModel, Prediction
from ..recipe.scenario import Scenario
from . import BY_TYPE, FAMILIES, origin, read_config
from .base import load
from .resolve import PRESETS, resolve_model

Dims = Any  # a family's own dimensions (its MemoryModel's), with the config's model_type as a class variable


def model_of(spec: str) -> MemoryModel:
    """The MemoryModel a family's row names ("module:attribute")."""
    found = load(spec)
    if not isinstance(found, MemoryModel):
        raise TypeError(f"{spec} is a {type(found).__name__}, not a MemoryModel")
    return found


def family(model_type: str, origin: str) -> MemoryModel:
    """The memory model for a config.json's model_type; BadInput names `origin` for any other."""
    fam = BY_TYPE.get(model_type)
    if fam is not None and fam.memory is not None:
        return model_of(fam.memory)
    modelled = [f for f in FAMILIES if f.memory is not None]
    types = " or ".join(t for f in modelled for t in f.model_types)
    names = " and ".join(f.name for f in modelled)
    raise BadInput(
        f"{origin}: model_type '{model_type}' is not {types}; memory prediction knows the {names} families only"
    )


def dims_from_config(cfg: dict[str, Any], origin: str) -> Dims:
    """A config's dimensions, by its family's memory model; BadInput naming `origin` for a config
    whose family has none."""
    return family(str(cfg.get("model_type", "")), origin).dims_from_config(cfg, origin)


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
    """`model` is a preset or a checkpoint directory ('auto' means the GPU's default preset)."""
    return predict(sc, load_dims(resolve_model(model, "cuda")))
