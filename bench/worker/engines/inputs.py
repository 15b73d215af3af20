"""The inputs every engine gets: the scenario, the model and data, and the trackers to feed."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ...recipe.scenario import Scenario
from ..clock import StepClock
from ..tracking import LossTracker, MemoryPhases


@dataclass(frozen=True)
class EngineInputs:
    """What an engine trains and what it reports to: the same for the Trainer and Accelerate."""

    sc: Scenario
    model: Any
    dataset: Any
    device: torch.device
    clock: StepClock
    losses: LossTracker
    phases: MemoryPhases
    scratch: Path
    task: str = "auto"  # the task the model trains (bench/families), resolved


def run_epoch(inputs: EngineInputs, loader: Iterable[Any], step: Callable[[Any], None]) -> dict[str, Any]:
    """A hand-written loop's epoch (the Accelerate and Fabric engines): `step` over the loader's
    micro-batches until the clock's window has closed (window = "auto" or STEPS) or the epoch ends;
    the loop's own figures over what it trained, this rank's (bench/worker/ranks.py adds the ranks
    up), the counterpart of the Trainer's train_runtime."""
    inputs.clock.train_begin()
    start = time.perf_counter()
    batches = 0
    for batch in loader:
        step(batch)
        batches += 1
        if inputs.clock.done:
            break
    if inputs.device.type == "cuda":
        torch.cuda.synchronize()
    loop_s = time.perf_counter() - start
    return {"trainer_runtime_s": loop_s, "trainer_samples_per_s": batches * inputs.sc.batch_size / loop_s}


def epoch_loader(inputs: EngineInputs) -> Any:
    """The hand-written loops' DataLoader: shuffled by the scenario's seed, whole batches only."""
    return shuffled_loader(inputs.dataset, inputs.sc)


def shuffled_loader(dataset: Any, sc: Scenario, sampler: Any = None) -> Any:
    """epoch_loader's DataLoader over any data set (validation/model_loop.py's loop takes it too);
    with `sampler` (a DistributedSampler, shuffled by the seed itself) that sampler's order."""
    return torch.utils.data.DataLoader(
        dataset,
        batch_size=sc.batch_size,
        shuffle=sampler is None,
        sampler=sampler,
        drop_last=True,
        num_workers=sc.dataloader_workers,
        pin_memory=sc.pin_memory,
        generator=torch.Generator().manual_seed(sc.seed) if sampler is None else None,
    )


def apply_techniques(sc: Scenario, model: Any) -> None:
    """What the hand-written loops do to the model before it is wrapped: Liger's kernels (its fused
    loss kept eager under a whole-model compile), gradient checkpointing, activation offload."""
    from ..checkpointing import checkpoint_every
    from ..llm import apply_liger, fused_loss_eager
    from ..offload import offload_forward

    if sc.liger:
        apply_liger(model)
        fused_loss_eager(sc)
    if sc.grad_checkpointing:
        model.gradient_checkpointing_enable()
    if sc.checkpoint_every:
        checkpoint_every(model, sc.checkpoint_every)
    if sc.activation_offload:
        offload_forward(model)
