"""Any other architecture transformers knows (its model_type in transformers' config registry),
trained as the task its config's `architectures` names: generic FLOPs from the built model,
parameters and optimizer states from its tensors, activations not predicted, no technique that
needs family-specific code."""

from __future__ import annotations

from .base import TASKS, Family

FAMILY = Family(
    name="generic",
    model_types=(),
    tasks=TASKS,
    default_task="causal-lm",
    description="any other transformers architecture, as the task its config names",
    techniques=frozenset({"lora"}),
)
