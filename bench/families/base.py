"""What a model family is: a torch-free row of data that the parent reads to validate a scenario
and the worker reads to build the model (bench/worker/model.py).

A family names the transformers classes it builds by string, the tasks it trains, its own FLOP
count and memory model (as "module:attribute" strings, imported where they are used: `load`), and
which techniques apply to it. Nothing here imports torch or transformers.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# task -> the transformers Auto class that builds it (by name: the parent never imports transformers)
TASK_CLASSES: dict[str, str] = {
    "causal-lm": "AutoModelForCausalLM",
    "sequence-classification": "AutoModelForSequenceClassification",
    "image-classification": "AutoModelForImageClassification",
}
TASKS = tuple(TASK_CLASSES)
# what an `architectures` entry of config.json ends with -> the task it is trained as
ARCHITECTURE_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("ForCausalLM", "causal-lm"),
    ("LMHeadModel", "causal-lm"),
    ("ForSequenceClassification", "sequence-classification"),
    ("ForImageClassification", "image-classification"),
    ("ForImageClassificationWithTeacher", "image-classification"),
)
# The techniques a scenario can ask for, by the field that turns each on (Family.techniques)
TECHNIQUES = ("lora", "qlora", "liger", "fp8", "experts")


@dataclass(frozen=True)
class Family:
    """One model family. `flops`: "module:function" of its analytic FLOP count per sample,
    `flops(sc, cfg, origin, total_params) -> float | None` (None: the config's dimensions are not
    enough; GpubenchError: they are unusable), else None and the generic count from the built model
    (bench/measure/mfu.py). `memory`: "module:attribute" of its memory model, a
    bench.memory.prediction.MemoryModel (its dimensions from a config, and their prediction with
    activations), else None: model states from the built model's tensors, "activations not
    predicted" (bench/families/memory_model.py)."""

    name: str
    model_types: tuple[str, ...]  # config.json model_type values; () for the generic family
    tasks: tuple[str, ...]
    default_task: str
    description: str
    techniques: frozenset[str] = frozenset()
    flops: str | None = None
    memory: str | None = None
    moe: bool = False
    vision: bool = False
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # transformers modules the fork server imports ahead for this family (empty: none)
    preload: tuple[str, ...] = ()
    # a family not built by transformers' Auto classes: "module:Class" of its builder, a class with
    # `config_class` (a transformers PretrainedConfig) and `from_config(config, dtype=None, **extra)`
    builder: str | None = None
    # the pip package its models need beyond gpubench's dependencies: a worker without it is skipped
    # (bench/worker/skips.py), and the parent never imports it
    package: str | None = None
    # (scenario field, why): a field this family cannot take, refused when it is set (true, or not
    # "default"/"none") before any work (bench/families/__init__.py refusal)
    refuses: tuple[tuple[str, str], ...] = ()
    # "module:function" Liger's patch for this family's models, called as f(**kernels, model=...)
    # (bench/worker/llm.py); None: Liger's generic _apply_liger_kernel_to_instance
    liger_patch: str | None = None
    # the FLOP cross-check's meta copy of a token classifier is given an all-ones attention_mask
    # (a decoder without one looks for packed sequences: .item() on a meta tensor); a causal LM always is
    flop_check_mask: bool = True

    def __post_init__(self) -> None:
        if self.default_task not in self.tasks:
            raise ValueError(f"family {self.name}: default task {self.default_task} is not one of its tasks")
        unknown = set(self.tasks) - set(TASKS) or set(self.techniques) - set(TECHNIQUES)
        if unknown:
            raise ValueError(f"family {self.name}: unknown task or technique {sorted(unknown)}")
        for preset in self.presets.values():
            if "model_type" not in preset:
                raise ValueError(f"family {self.name}: a preset without model_type")
        for spec in (self.flops, self.memory, self.builder, self.liger_patch):
            if spec is not None and not is_spec(spec):
                raise ValueError(f"family {self.name}: {spec!r} is not 'module:attribute'")

    def takes(self, technique: str) -> bool:
        return technique in self.techniques

    @property
    def activations(self) -> bool:
        """Its memory model predicts activations (it has one), else "activations not predicted"."""
        return self.memory is not None


def is_spec(spec: str) -> bool:
    """'package.module:attribute', both parts dotted names."""
    module, sep, attr = spec.partition(":")
    return bool(sep) and all(part.isidentifier() for part in (*module.split("."), *attr.split(".")))


def load(spec: str) -> Any:
    """The object a "module:attribute" string names, its module imported now (a family's FLOP
    count, memory model, builder or Liger patch: only where it is used)."""
    module, _, attr = spec.partition(":")
    found: Any = importlib.import_module(module)
    for part in attr.split("."):
        found = getattr(found, part)
    return found


def task_from_architectures(cfg: Mapping[str, Any]) -> str | None:
    """The task config.json's `architectures` names (its first entry a known head), or None."""
    archs = cfg.get("architectures")
    if not isinstance(archs, list):
        return None
    for arch in archs:
        if not isinstance(arch, str):
            continue
        for suffix, task in ARCHITECTURE_SUFFIXES:
            if arch.endswith(suffix):
                return task
    return None


def architectures_named(cfg: Mapping[str, Any]) -> list[str]:
    archs = cfg.get("architectures")
    return [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []
