"""A model's transformers config and Auto class, by task (transformers imported at call time only):
shared by the worker (bench/worker/model.py) and the meta-device tensor inventory (tensors.py)."""

from __future__ import annotations

import functools
from typing import Any

from ..errors import BadInput
from . import TASK_CLASSES, family_of, read_config, resolve_task
from .base import load


def task_of(model: str, task: str = "auto") -> str:
    """The task a model trains (the scenario's `task`, else its config's architectures, else its
    family's default)."""
    return resolve_task(task, read_config(model), family_of(model), model)


def auto_class(model: str, task: str = "auto") -> Any:
    """The transformers Auto class that builds this model's task, or the family's own builder
    (Family.builder: a class with the same `from_config`)."""
    builder = family_of(model).builder
    if builder is not None:
        return load(builder)
    import transformers

    return getattr(transformers, TASK_CLASSES[task_of(model, task)])


def model_config(model: str, task: str = "auto") -> Any:
    """The transformers config of a preset or a config file (random weights, real dimensions),
    readied for training the task: no key/value cache; a classifier's pad token (a decoder
    classifier needs one to find each row's last token)."""
    from transformers import AutoConfig

    cfg = read_config(model)
    model_type = cfg.pop("model_type")
    for key in ("transformers_version", "auto_map"):
        cfg.pop(key, None)  # auto_map would name remote code, which is never run
    if family_of(model).builder is not None:  # a family transformers does not know: its own config class
        return ready_for_training(auto_class(model, task).config_class(**cfg), task_of(model, task))
    config = AutoConfig.for_model(model_type, **cfg)
    return ready_for_training(config, task_of(model, task))


def ready_for_training(config: Any, task: str) -> Any:
    config.use_cache = False  # training: no key/value cache (a decoder would build one every forward)
    if task == "sequence-classification" and getattr(config, "pad_token_id", None) is None:
        eos = getattr(config, "eos_token_id", None)
        eos = eos[0] if isinstance(eos, list) and eos else eos
        vocab = getattr(config, "vocab_size", 0) or 0
        config.pad_token_id = eos if isinstance(eos, int) and 0 <= eos < vocab else 0
    return config


def build_on_meta(model: str, task: str = "auto", **extra: Any) -> Any:
    """The model built on torch's meta device: every tensor's shape, no memory, no weights read."""
    import torch

    with torch.device("meta"):
        return auto_class(model, task).from_config(model_config(model, task), **extra)


# output heads and mixture-of-experts routers: never LoRA targets (lora_layers)
NOT_TARGETS = ("lm_head", "score", "classifier", "gate", "router")
NOT_TARGETS_SET = frozenset(NOT_TARGETS)
CONV1D = "Conv1D"  # transformers' linear layer of GPT-2 (weight stored in x out): a linear layer to peft


def lora_layers(built: Any) -> tuple[tuple[str, int, int], ...]:
    """(fqn, in, out) of every layer LoRA's "all-linear" adapts in a built model: each nn.Linear
    (bitsandbytes' too) and transformers' Conv1D, but the output head, a classifier and a MoE router
    and any layer inside one of those. A MoE layer's routed experts, held as 3-D parameters in
    transformers 5, are no such layer: left out (a shared expert or a dense MLP is made of Linears:
    adapted). The worker (bench/worker/llm.py)
    adapts exactly these; the memory model counts their adapters; plan time refuses LoRA where there
    are none (bench/families/plancheck.py)."""
    import torch

    found = []
    for fqn, module in built.named_modules():
        if NOT_TARGETS_SET & set(fqn.split(".")):  # a head or router, or a layer inside one (ResNet's classifier.1)
            continue
        if isinstance(module, torch.nn.Linear):
            found.append((fqn, int(module.in_features), int(module.out_features)))
        elif type(module).__name__ == CONV1D and getattr(module, "weight", None) is not None:
            rows, cols = module.weight.shape  # Conv1D keeps its weight as (in, out)
            found.append((fqn, int(rows), int(cols)))
    return tuple(found)


def chosen_layers(layers: tuple[tuple[str, int, int], ...], targets: str) -> tuple[tuple[str, int, int], ...]:
    """The layers a scenario's `lora_targets` picks: every one for "all-linear", else those whose
    leaf name is listed."""
    if targets == "all-linear":
        return layers
    wanted = set(targets.split(","))
    return tuple(layer for layer in layers if layer[0].rsplit(".", 1)[-1] in wanted)


@functools.cache
def inventory(
    model: str, task: str
) -> tuple[tuple[tuple[str, tuple[int, ...]], ...], tuple[tuple[str, int, int], ...], int]:
    """(parameter names and shapes, LoRA's candidate layers as (fqn, in, out) (lora_layers), buffer
    bytes) of the model. BadInput for a family whose package the parent never imports
    (Family.package: torchvision)."""
    fam = family_of(model)
    if fam.package is not None:
        raise BadInput(
            f"{model}: the {fam.name} family's tensors come from {fam.package}, which gpubench imports only in "
            "its workers: its memory is not predicted",
            hint="measure it with gpubench run instead",
        )

    built = build_on_meta(model, task)
    params = tuple((n, tuple(p.shape)) for n, p in built.named_parameters())
    buffers = sum(b.numel() * b.element_size() for b in built.buffers())
    return params, lora_layers(built), buffers


def parameter_shapes(model: str, task: str = "auto") -> dict[str, tuple[int, ...]]:
    """{parameter name: shape} of the model its config builds (on the meta device)."""
    return dict(inventory(model, task)[0])
