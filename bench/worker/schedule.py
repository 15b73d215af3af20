"""The learning rate and its schedule, the same for both engines: the Trainer is given them as
TrainingArguments (learning_rate, lr_scheduler_type, warmup_steps) and builds its scheduler with
transformers' get_scheduler; the Accelerate loop calls get_scheduler itself with the same name,
warm-up and number of steps (the epoch's optimizer steps, however soon the window ends it)."""

from __future__ import annotations

from typing import Any

from ..recipe.scenario import Scenario


def scheduler_name(sc: Scenario) -> str:
    """transformers' lr_scheduler_type for the scenario: its "constant" ignores warm-up steps, so a
    constant schedule with a warm-up is "constant_with_warmup"."""
    if sc.lr_schedule == "constant" and sc.lr_warmup_steps:
        return "constant_with_warmup"
    return sc.lr_schedule


def make_scheduler(sc: Scenario, optimizer: Any) -> Any:
    """The scheduler over a torch optimizer, as the Trainer builds it (one step per optimizer step)."""
    from transformers import get_scheduler

    return get_scheduler(
        scheduler_name(sc),
        optimizer,
        num_warmup_steps=sc.lr_warmup_steps,
        num_training_steps=sc.optimizer_steps,
    )


def effective(learning_rate: float, schedule: str, warmup_steps: int) -> dict[str, Any]:
    """The results columns of what the engine really trained with."""
    return {
        "effective_learning_rate": float(learning_rate),
        "effective_lr_schedule": str(schedule),
        "effective_lr_warmup_steps": int(warmup_steps),
    }


def effective_of(sc: Scenario, scheduler: Any) -> dict[str, Any]:
    """What a hand-written loop trains with: the scenario's schedule, or a constant rate where it
    has no scheduler (DeepSpeed's own CPU Adam under ZeRO-Offload)."""
    if scheduler is None:
        return effective(sc.effective_learning_rate, "constant", 0)
    return effective(sc.effective_learning_rate, scheduler_name(sc), sc.lr_warmup_steps)
