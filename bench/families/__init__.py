"""The model-family registry: config.json's model_type -> the Family that builds and models it.

Torch-free: the parent validates models, tasks and techniques with it before starting any worker.
An unknown model_type (neither a family's nor one transformers knows) is bad input, never "BERT".
Adding a family: a module here with a FAMILY row (a folder when it has its own FLOP count or memory
model, which its row names), and one line in FAMILIES (docs/extending.md).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import BadInput, did_you_mean
from ..recipe import mesh
from . import bert, decoder, generic, llama, moe, torchvision, vit
from .base import TASK_CLASSES, TASKS, Family, architectures_named, task_from_architectures

FAMILIES: tuple[Family, ...] = (
    bert.FAMILY,
    llama.FAMILY,
    decoder.FAMILY,
    moe.FAMILY,
    vit.FAMILY,
    torchvision.FAMILY,
    generic.FAMILY,
)
GENERIC = generic.FAMILY
__all__ = ["FAMILIES", "PRESETS", "TASK_CLASSES", "TASKS", "Family", "family_of", "for_config", "read_config"]
BY_TYPE: dict[str, Family] = {t: f for f in FAMILIES for t in f.model_types}
PRESETS: dict[str, dict[str, Any]] = {name: dict(cfg) for f in FAMILIES for name, cfg in f.presets.items()}
CONFIG_NAME = "config.json"


def by_name(name: str) -> Family:
    for fam in FAMILIES:
        if fam.name == name:
            return fam
    raise KeyError(name)


@functools.cache
def transformers_model_types() -> frozenset[str]:
    """Every model_type transformers has a config class for (imports transformers: ~2 s, so only
    asked for a type no family lists)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return frozenset(CONFIG_MAPPING_NAMES)


def for_config(cfg: Mapping[str, Any], origin: str) -> Family:
    """The family of a config (a preset's or a config.json's); BadInput when nothing builds it."""
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise BadInput(
            f"{origin}: no model_type in the model config",
            hint='a Hugging Face config.json names its architecture in "model_type" (e.g. "qwen2")',
        )
    if model_type in BY_TYPE:
        return BY_TYPE[model_type]
    if model_type in transformers_model_types():
        return GENERIC
    known = sorted(BY_TYPE)
    hint = did_you_mean(model_type, known)
    raise BadInput(
        f"{origin}: model_type '{model_type}' is not an architecture transformers knows",
        hint=hint or "check config.json's model_type, or upgrade transformers if the architecture is newer",
    )


def is_inline(model: str) -> bool:
    """A model given as its config's JSON text (a matrix's [model] table, bench/planner/matrix.py)."""
    return model.startswith("{")


def read_config(model: str) -> dict[str, Any]:
    """The config of a resolved model: a preset's dictionary, a directory's config.json, or a JSON
    file holding a config. BadInput naming the file when it cannot be read."""
    if model in PRESETS:
        return dict(PRESETS[model])
    if is_inline(model):
        cfg = json.loads(model)
        if not isinstance(cfg, dict):
            raise BadInput(f"[model]: not a model config (a table): {model[:80]}")
        return cfg
    path = Path(model)
    file = path / CONFIG_NAME if path.is_dir() else path
    try:
        cfg = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BadInput(f"{file}: cannot read the model config: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise BadInput(f"{file}: not valid JSON: {exc}") from None
    if not isinstance(cfg, dict):
        raise BadInput(f"{file}: not a model config (a JSON object, not {type(cfg).__name__})")
    return cfg


def family_of(model: str) -> Family:
    """The family of a resolved model (preset, directory or config file)."""
    return for_config(read_config(model), origin(model))


def resolve_task(task: str, cfg: Mapping[str, Any], fam: Family, origin: str) -> str:
    """The task a scenario trains: its own `task`, else the config's architectures, else the
    family's default. BadInput when the family does not train it."""
    if task != "auto":
        chosen = task
    else:
        named = task_from_architectures(cfg)
        if named is None and architectures_named(cfg) and fam is GENERIC:
            raise BadInput(
                f"{origin}: architectures {', '.join(architectures_named(cfg))} is no task gpubench trains "
                f"({', '.join(TASKS)})",
                hint="set task in the scenario if the model has such a head; seq2seq models are not supported yet",
            )
        chosen = named or fam.default_task
    if chosen not in fam.tasks:
        raise BadInput(
            f"{origin}: the {fam.name} family ({cfg.get('model_type')}) does not train task '{chosen}'",
            hint=f"its tasks are {', '.join(fam.tasks)}",
        )
    return chosen


def origin(model: str) -> str:
    """How messages name a resolved model."""
    if is_inline(model):
        return "the matrix's [model] table"
    return f"preset {model}" if model in PRESETS else model


# model_types Liger ships a patch function for (liger_kernel.transformers.monkey_patch's
# MODEL_TYPE_TO_APPLY_LIGER_FN, liger-kernel 0.6-0.8); `liger = true` on another type is refused.
LIGER_MODEL_TYPES = frozenset(
    {
        "llama",
        "mistral",
        "mixtral",
        "gemma",
        "gemma2",
        "gemma3_text",
        "qwen2",
        "qwen3",
        "qwen2_moe",
        "qwen3_moe",
        "phi3",
        "olmo2",
        "granite",
        "smollm3",
    }
)


def techniques_asked(fields: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    """(technique, scenario field, value) of each technique a scenario's fields turn on."""
    asked = []
    if fields.get("peft", "none") != "none" and fields.get("quantize_base", "none") == "none":
        asked.append(("lora", "peft", fields["peft"]))
    if fields.get("quantize_base", "none") != "none":
        asked.append(("qlora", "quantize_base", fields["quantize_base"]))
    if fields.get("liger", False):
        asked.append(("liger", "liger", True))
    if fields.get("fp8", False):
        asked.append(("fp8", "fp8", True))
    if fields.get("experts_implementation", "default") != "default":
        asked.append(("experts", "experts_implementation", fields["experts_implementation"]))
    return asked


def refusal(model: str, fields: Mapping[str, Any]) -> tuple[str, Any, str] | None:
    """(field, value, why) for the first setting the model's family cannot take, or None; None too
    when the model cannot be read yet (planning resolves and checks it, saying why)."""
    resolved = "tiny" if model == "auto" else model
    try:
        cfg = read_config(resolved)
        fam = for_config(cfg, origin(resolved))
    except BadInput:
        return None
    model_type = cfg.get("model_type")
    task = fields.get("task", "auto")
    if task != "auto" and task not in fam.tasks:
        return (
            "task",
            task,
            f"is not a task of the {fam.name} family ({model_type}): its tasks are {', '.join(fam.tasks)}",
        )
    for key, reason in fam.refuses:
        value = fields.get(key)
        if value and value not in ("default", "none"):
            return key, value, reason
    tp = fields.get("tp", 1)
    if isinstance(tp, int) and (why := mesh.tp_refusal(cfg, tp)):
        return "tp", tp, why
    for technique, key, value in techniques_asked(fields):
        if not fam.takes(technique):
            takers = [f.name for f in FAMILIES if f.takes(technique)]
            return (
                key,
                value,
                (
                    f"does not apply to '{model}' (the {fam.name} family, model_type {model_type}); "
                    f"{technique} applies to the families {', '.join(takers)}"
                ),
            )
        if technique == "liger" and model_type not in LIGER_MODEL_TYPES:
            patched = ", ".join(sorted(LIGER_MODEL_TYPES))
            return key, value, f"has no Liger patch for model_type {model_type} (Liger patches {patched})"
    trains = task if task != "auto" else (task_from_architectures(cfg) or fam.default_task)
    if trains != "causal-lm":
        for technique, key, value in techniques_asked(fields):
            if technique in ("qlora", "liger"):
                return key, value, f"is for causal language models; '{model}' trains {trains}"
    return None
