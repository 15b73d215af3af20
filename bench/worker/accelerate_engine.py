"""The plain Accelerate loop from the guide: prepare, accumulate, backward, step."""

from __future__ import annotations

import time
from typing import Any

import torch

from .compiling import compiled
from .inputs import EngineInputs
from .tracking import make_optimizer

MIXED = {"fp32": "no", "fp16": "fp16", "bf16": "bf16"}


def train(inputs: EngineInputs) -> dict[str, Any]:
    sc, model, dataset, device = inputs.sc, inputs.model, inputs.dataset, inputs.device
    clock, losses, phases = inputs.clock, inputs.losses, inputs.phases
    from accelerate import Accelerator

    accelerator = Accelerator(
        mixed_precision=MIXED[sc.precision],
        gradient_accumulation_steps=sc.grad_accum_steps,
        cpu=device.type == "cpu",
    )
    if sc.grad_checkpointing:
        model.gradient_checkpointing_enable()
    optimizer = make_optimizer(sc.optimizer, model.parameters())
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=sc.batch_size,
        shuffle=True,
        drop_last=True,
        num_workers=sc.dataloader_workers,
        pin_memory=sc.pin_memory,
        generator=torch.Generator().manual_seed(sc.seed),
    )
    if sc.compile:
        model = compiled(model, sc.compile_scope)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    model.train()
    clock.train_begin()
    start = time.perf_counter()
    for batch in loader:
        with accelerator.accumulate(model):
            loss = model(**batch).loss
            phases.mark("after_forward")
            accelerator.backward(loss)
            phases.mark("after_backward")
            optimizer.step()
            phases.mark_optimizer_step(optimizer)
            optimizer.zero_grad(set_to_none=True)
        losses.track(loss)
        if accelerator.sync_gradients:
            clock.step_end()
    if device.type == "cuda":
        torch.cuda.synchronize()
    loop_s = time.perf_counter() - start
    samples = len(loader) * sc.batch_size
    # The loop's own whole-epoch figures, the counterpart of the Trainer's train_runtime.
    return {"trainer_runtime_s": loop_s, "trainer_samples_per_s": samples / loop_s}
