"""What a model family is: a torch-free row of data that the parent reads to validate a scenario
and the worker reads to build the model (bench/worker/build.py).

A family names the transformers classes it builds by string, the tasks it trains, where its FLOPs
and memory come from, and which techniques apply to it. Nothing here imports torch or transformers.
"""

from __future__ import annotations

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
    """One model family. `exact_flops`: an analytic FLOP count written for this family
    (bench/measure/flops.py), else the generic count from the built model; `activations`: the
    memory model has this family's activations (bench/memory), else "activations not predicted"."""

    name: str
    model_types: tuple[str, ...]  # config.json model_type values; () for the generic family
    tasks: tuple[str, ...]
    default_task: str
    description: str
    techniques: frozenset[str] = frozenset()
    exact_flops: bool = False
    activations: bool = False
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

    def __post_init__(self) -> None:
        if self.default_task not in self.tasks:
            raise ValueError(f"family {self.name}: default task {self.default_task} is not one of its tasks")
        unknown = set(self.tasks) - set(TASKS) or set(self.techniques) - set(TECHNIQUES)
        if unknown:
            raise ValueError(f"family {self.name}: unknown task or technique {sorted(unknown)}")
        for preset in self.presets.values():
            if "model_type" not in preset:
                raise ValueError(f"family {self.name}: a preset without model_type")

    def takes(self, technique: str) -> bool:
        return technique in self.techniques


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
