"""A model's transformers config and Auto class, by task (transformers imported at call time only):
shared by the worker (bench/worker/model.py) and the meta-device tensor inventory (tensors.py)."""

from __future__ import annotations

import functools
import importlib
from typing import Any

from ..errors import BadInput
from . import TASK_CLASSES, family_of, read_config, resolve_task


def task_of(model: str, task: str = "auto") -> str:
    """The task a model trains (the scenario's `task`, else its config's architectures, else its
    family's default)."""
    return resolve_task(task, read_config(model), family_of(model), model)


def auto_class(model: str, task: str = "auto") -> Any:
    """The transformers Auto class that builds this model's task, or the family's own builder
    (Family.builder: a class with the same `from_config`)."""
    builder = family_of(model).builder
    if builder is not None:
        module, name = builder.split(":")
        return getattr(importlib.import_module(module), name)
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


# output heads and mixture-of-experts routers: never LoRA targets (bench/worker/llm.py lora_targets)
NOT_TARGETS = ("lm_head", "score", "classifier", "gate", "router")


@functools.cache
def inventory(
    model: str, task: str
) -> tuple[tuple[tuple[str, tuple[int, ...]], ...], tuple[tuple[str, int, int], ...], int]:
    """(parameter names and shapes, linear layers as (fqn, in, out), buffer bytes) of the model.
    BadInput for a family whose package the parent never imports (Family.package: torchvision)."""
    import torch

    fam = family_of(model)
    if fam.package is not None:
        raise BadInput(
            f"{model}: the {fam.name} family's tensors come from {fam.package}, which gpubench imports only in "
            "its workers: its memory is not predicted",
            hint="measure it with gpubench run instead",
        )

    built = build_on_meta(model, task)
    params = tuple((n, tuple(p.shape)) for n, p in built.named_parameters())
    linears = tuple(
        (fqn, m.in_features, m.out_features)
        for fqn, m in built.named_modules()
        if isinstance(m, torch.nn.Linear) and fqn.rsplit(".", 1)[-1] not in NOT_TARGETS
    )
    buffers = sum(b.numel() * b.element_size() for b in built.buffers())
    return params, linears, buffers


def parameter_shapes(model: str, task: str = "auto") -> dict[str, tuple[int, ...]]:
    """{parameter name: shape} of the model its config builds (on the meta device)."""
    return dict(inventory(model, task)[0])
