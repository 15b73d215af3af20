"""Plan-time checks of a model for the task a scenario trains, made before any worker starts
(bench/planner/planning.py runs them for `run`, `fit`, `predict` and `list`): the task is one gpubench
trains (a seq2seq architecture is not, yet), transformers has a class for it, the config's pad id
lies inside its vocabulary, an image classifier's config gives the size of its images, the model
builds on the meta device, and LoRA has a layer to adapt.

A preset is left to its tests (every preset builds: tests/test_families.py), and a family built
by its own package (torchvision) to the worker that imports it; for any other model these import
transformers and torch (a few seconds, once per model and task)."""

from __future__ import annotations

import functools
import warnings
from typing import Any

from ..errors import BadInput
from ..recipe.scenario import Scenario
from . import PRESETS, TASK_CLASSES, for_config, origin, read_config, resolve_task

# task -> the name of transformers' registry of the model types its Auto class builds
TASK_MAPPINGS = {
    "causal-lm": "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "sequence-classification": "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
    "image-classification": "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
}


def check_trainable(sc: Scenario, model: str) -> None:
    """BadInput, naming the scenario and the model, when a worker could not build and train `model`
    (resolved) as `sc` asks."""
    cfg = read_config(model)
    where = origin(model)
    fam = for_config(cfg, where)
    try:
        task = resolve_task(sc.task, cfg, fam, where)
        if model in PRESETS or fam.builder is not None:
            return
        check_built(model, task)
        if sc.peft == "lora":
            check_lora_targets(model, task, sc.lora_targets)
    except BadInput as exc:
        raise BadInput(f"scenario '{sc.name}': {exc.message}", hint=exc.hint) from None


def tasks_of_type(model_type: str) -> list[str]:
    """The tasks transformers has an Auto class for on this model_type."""
    from transformers.models.auto import modeling_auto

    return [task for task, names in TASK_MAPPINGS.items() if model_type in getattr(modeling_auto, names)]


@functools.cache
def check_built(model: str, task: str) -> None:
    """The model's class for `task` exists, its config is usable, and it builds on the meta device;
    transformers' own warnings about the config are kept off the terminal (the refusal says it)."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _check_built(model, task)
    finally:
        hf_logging.set_verbosity(level)


def _check_built(model: str, task: str) -> None:
    from .build import build_on_meta, model_config

    where = origin(model)
    model_type = str(read_config(model).get("model_type"))
    has = tasks_of_type(model_type)
    if task not in has:
        raise BadInput(
            f"{where}: transformers has no {task} class for model_type {model_type} ({TASK_CLASSES[task]})",
            hint=" or ".join(f'set task = "{t}"' for t in has)
            if has
            else "it has none of the tasks gpubench trains (seq2seq is not trained yet)",
        )
    try:
        config = model_config(model, task)
    except (ValueError, TypeError, KeyError) as exc:
        raise BadInput(f"{where}: transformers cannot read the config: {_first_line(exc)}") from None
    _check_pad_id(config, "pad_token_id" in read_config(model), where)
    if task == "image-classification":
        _check_image_size(config, where)
    try:
        build_on_meta(model, task)
    except Exception as exc:  # whatever the model's own code raises: one line, before any worker
        raise BadInput(
            f"{where}: transformers cannot build {type(config).__name__} as {TASK_CLASSES[task]}: "
            f"{type(exc).__name__}: {_first_line(exc)}",
            hint="fix the config (a worker would fail the same way)",
        ) from None


def _check_pad_id(config: Any, given: bool, where: str) -> None:
    """The embedding's padding index (pad_token_id) inside the vocabulary: a config class's default
    (SmolLM3's 128004) with a small vocab_size fails in the embedding's constructor."""
    pad, vocab = getattr(config, "pad_token_id", None), getattr(config, "vocab_size", None)
    if isinstance(pad, int) and isinstance(vocab, int) and not 0 <= pad < vocab:
        raise BadInput(
            f"{where}: pad_token_id {pad} lies outside its vocabulary (vocab_size {vocab}"
            f"{'' if given else f'; the config names none: {type(config).__name__} default'})",
            hint=f'set "pad_token_id" in the config to an id below {vocab}, or to null',
        )


def _check_image_size(config: Any, where: str) -> None:
    """An image classifier is fed images of the config's image_size (bench/worker/dataset.py)."""
    size = getattr(config, "image_size", None)
    square = isinstance(size, int) and not isinstance(size, bool) and size > 0
    pair = isinstance(size, list | tuple) and len(size) == 2 and all(isinstance(s, int) and s > 0 for s in size)
    if not (square or pair):
        raise BadInput(
            f"{where}: an image classifier needs image_size in its config (the images gpubench feeds it); "
            f"{type(config).__name__} has {'none' if size is None else repr(size)}",
            hint='add "image_size" to the config (e.g. 224, or [height, width])',
        )


def check_lora_targets(model: str, task: str, targets: str) -> None:
    """LoRA has layers to adapt (bench/families/build.py lora_layers), and every name in
    `lora_targets` is one of them."""
    from .build import inventory

    layers = inventory(model, task)[1]
    if not layers:
        raise BadInput(
            f'{origin(model)}: peft = "lora" has no layer to adapt (LoRA targets nn.Linear and transformers\' '
            "Conv1D layers, the output head and MoE routers aside: docs/models.md)",
            hint="train this model without peft",
        )
    names = sorted({fqn.rsplit(".", 1)[-1] for fqn, _, _ in layers})
    unknown = [] if targets == "all-linear" else sorted(set(targets.split(",")) - set(names))
    if unknown:
        raise BadInput(
            f"{origin(model)}: lora_targets names {', '.join(unknown)}, which no linear layer of the model is called",
            hint=f"its linear layers are {', '.join(names)}",
        )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:240] if text else type(exc).__name__
