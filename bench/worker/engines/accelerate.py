"""The plain Accelerate loop from the guide: prepare, accumulate, backward, step.

`setup` prepares it and `AccelerateLoop.step` trains one batch; `train` runs them over the data
set, and stops when the clock's window has closed. validation/interleaved.py drives the same two,
block by block, beside the reference loop.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ...recipe import mesh as mesh_layout
from .. import device_mesh, dist, parallel
from ..compiling import compiled
from ..dist import wrapper_name
from ..optimizers import AdamSettings, make_optimizer
from ..schedule import effective_of, make_scheduler
from .inputs import EngineInputs, apply_techniques, epoch_loader, run_epoch

MIXED = {"fp32": "no", "fp16": "fp16", "bf16": "bf16"}


@dataclass
class AccelerateLoop:
    """The prepared model, optimizer and loader, and one training step over them."""

    inputs: EngineInputs
    accelerator: Any
    model: Any
    optimizer: Any
    loader: Any
    scheduler: Any = None  # None under DeepSpeed's own CPU Adam (ZeRO-Offload): a constant rate
    # a device mesh's (bench/worker/device_mesh.py): around each forward and backward (context parallel),
    # around the forward (autocast: the model is not accelerate-prepared), and what wraps the model
    around: Callable[[dict[str, torch.Tensor]], Any] = lambda batch: contextlib.nullcontext()
    autocast: Callable[[], Any] = contextlib.nullcontext
    wrapper: str = ""

    def step(self, batch: dict[str, torch.Tensor]) -> None:
        accelerator, model, optimizer = self.accelerator, self.model, self.optimizer
        phases = self.inputs.phases
        with accelerator.accumulate(model), self.around(batch):
            with self.autocast():
                loss = model(**batch).loss
            phases.mark("after_forward")
            accelerator.backward(loss)
            phases.mark("after_backward")
            optimizer.step()
            phases.mark_optimizer_step(optimizer)
            # as the Trainer: once per optimizer step, not after one fp16's GradScaler skipped (the
            # scheduler is not prepared: accelerate's would step once per process)
            if self.scheduler is not None and accelerator.sync_gradients and not accelerator.optimizer_step_was_skipped:
                self.scheduler.step()
            optimizer.zero_grad(set_to_none=True)
        self.inputs.losses.track(loss)
        if accelerator.sync_gradients:
            self.inputs.clock.step_end()


def setup(inputs: EngineInputs) -> AccelerateLoop:
    sc, model, device = inputs.sc, inputs.model, inputs.device
    from accelerate import Accelerator

    plugins = parallel.accelerate_plugins(sc, model)
    accelerator = Accelerator(
        mixed_precision=MIXED[sc.precision],
        gradient_accumulation_steps=sc.grad_accum_steps,
        cpu=device.type == "cpu",
        **plugins,
    )
    parallel.force_fsdp_on_cpu(accelerator, plugins.get("fsdp_plugin"))
    apply_techniques(sc, model)
    loader = epoch_loader(inputs)
    if mesh_layout.asked(vars(sc)):
        return _on_mesh(inputs, accelerator, loader)
    if sc.strategy == "deepspeed" and sc.offload != "none":  # DeepSpeed builds its CPU Adam
        from accelerate.utils import DummyOptim

        optimizer = DummyOptim(model.parameters(), lr=sc.effective_learning_rate)
        scheduler = None
    else:
        optimizer = make_optimizer(sc.optimizer, model, AdamSettings(lr=sc.effective_learning_rate))
        scheduler = make_scheduler(sc, optimizer)
    if sc.compile:
        model = compiled(model, sc.compile_scope, sc.compile_mode)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    model.train()
    return AccelerateLoop(inputs, accelerator, model, optimizer, loader, scheduler=scheduler)


def _on_mesh(inputs: EngineInputs, accelerator: Any, loader: Any) -> AccelerateLoop:
    """The loop over a device mesh: the model sharded by torch's APIs (not accelerate-prepared,
    which would wrap its DTensor parameters in DDP), its optimizer built on the shards and
    prepared, the loader sharded by data-parallel rank (the cp and tp ranks of a replica share it)."""
    from accelerate.data_loader import prepare_data_loader

    sc, model = inputs.sc, inputs.model
    rank = dist.from_env()
    assert rank is not None, "a device mesh runs under torchrun"
    m = device_mesh.of(sc, rank.world_size)
    layout = device_mesh.device_mesh(m, inputs.device)
    wrapper = device_mesh.parallelize(model, sc, m, layout)
    if sc.compile:
        model = compiled(model, sc.compile_scope, sc.compile_mode)
    optimizer = accelerator.prepare(make_optimizer(sc.optimizer, model, AdamSettings(lr=sc.effective_learning_rate)))
    scheduler = make_scheduler(sc, optimizer)
    dp_rank, dp_size = device_mesh.data_rank(m, rank)
    loader = prepare_data_loader(
        loader, inputs.device, num_processes=dp_size, process_index=dp_rank, put_on_device=True
    )
    model.train()
    return AccelerateLoop(
        inputs,
        accelerator,
        model,
        optimizer,
        loader,
        around=device_mesh.cp_context(m, layout),
        autocast=accelerator.autocast,
        wrapper=wrapper,
        scheduler=scheduler,
    )


def train(inputs: EngineInputs) -> dict[str, Any]:
    loop = setup(inputs)
    figures = run_epoch(inputs, loop.loader, loop.step)
    figures.update(effective_of(inputs.sc, loop.scheduler))
    if inputs.sc.distributed:
        figures["parallel_wrapper"] = loop.wrapper or wrapper_name(loop.model)
    return figures
