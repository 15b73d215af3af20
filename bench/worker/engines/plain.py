"""The plain PyTorch loop, as the Fabric talk's scripts 01 and 02 write it (rasbt/cvpr2023): the
batch copied with `.to(device)`, `loss.backward()`, `optimizer.step()`, `zero_grad`; no library
between the model and the loop. Mixed precision is torch.autocast (with a GradScaler for fp16), DDP
is torch's DistributedDataParallel over a DistributedSampler, gradient accumulation skips the
all-reduce with `no_sync`.

`setup` prepares it and `TorchLoop.step` trains one micro-batch; `train` runs them over the data set
and stops when the clock's window has closed, as the Accelerate and Fabric loops do.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import torch

from .. import dist
from ..compiling import compiled
from ..dist import wrapper_name
from ..optimizers import AdamSettings, make_optimizer
from ..precision import AUTOCAST
from ..schedule import effective_of, make_scheduler
from .inputs import EngineInputs, apply_techniques, run_epoch, shuffled_loader


@dataclass
class TorchLoop:
    """The model (DDP-wrapped under torchrun), optimizer, scheduler and loader, and one micro-batch
    of training over them."""

    inputs: EngineInputs
    model: Any
    optimizer: Any
    loader: Any
    scheduler: Any
    scaler: Any = None  # fp16's GradScaler
    micro_batches: int = 0

    def step(self, batch: dict[str, torch.Tensor]) -> None:
        sc, device, phases = self.inputs.sc, self.inputs.device, self.inputs.phases
        model, optimizer, scaler = self.model, self.optimizer, self.scaler
        batch = {k: v.to(device) for k, v in batch.items()}  # the talk's `.to(device)`
        self.micro_batches += 1
        boundary = self.micro_batches % sc.grad_accum_steps == 0
        # no all-reduce inside the accumulation (DDP's no_sync; a single process has nothing to skip)
        skip_sync = model.no_sync() if not boundary and hasattr(model, "no_sync") else contextlib.nullcontext()
        dtype = AUTOCAST.get(sc.precision)
        with skip_sync:
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                loss = model(**batch).loss
            phases.mark("after_forward")
            # scaled as accelerate's and Fabric's loops scale it; not divided at all without accumulation
            scaled = loss / sc.grad_accum_steps if sc.grad_accum_steps > 1 else loss
            (scaler.scale(scaled) if scaler is not None else scaled).backward()
            phases.mark("after_backward")
        self.inputs.losses.track(loss)
        if boundary:
            if scaler is not None:
                scaler.step(optimizer)  # skipped while the loss scale overflows
                scaler.update()
            else:
                optimizer.step()
            phases.mark_optimizer_step(optimizer)
            self.scheduler.step()  # once per optimizer step, skipped or not (as the Fabric loop)
            optimizer.zero_grad(set_to_none=True)
            self.inputs.clock.step_end()


def loader_of(inputs: EngineInputs) -> Any:
    """epoch_loader's DataLoader (bench/worker/engines/inputs.py), each rank's share under torchrun:
    a DistributedSampler shuffled by the scenario's seed, whole batches only."""
    sc, dataset = inputs.sc, inputs.dataset
    rank = dist.from_env() if sc.distributed else None
    sampler: Any = (
        None
        if rank is None
        else torch.utils.data.DistributedSampler(
            dataset, num_replicas=rank.world_size, rank=rank.rank, shuffle=True, seed=sc.seed, drop_last=True
        )
    )
    return shuffled_loader(dataset, sc, sampler)


def setup(inputs: EngineInputs) -> TorchLoop:
    sc, model, device = inputs.sc, inputs.model, inputs.device
    apply_techniques(sc, model)
    optimizer = make_optimizer(sc.optimizer, model, AdamSettings(lr=sc.effective_learning_rate))
    if sc.compile:  # before DDP wraps it, as the Accelerate loop hands accelerate a compiled model
        model = compiled(model, sc.compile_scope, sc.compile_mode)
    if sc.distributed:  # the worker made the process group (bench/worker/dist.py)
        ids = [device.index] if device.type == "cuda" else None
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
    scaler = torch.amp.GradScaler(device.type) if sc.precision == "fp16" else None
    model.train()
    return TorchLoop(inputs, model, optimizer, loader_of(inputs), make_scheduler(sc, optimizer), scaler)


def train(inputs: EngineInputs) -> dict[str, Any]:
    loop = setup(inputs)
    figures = run_epoch(inputs, loop.loader, loop.step)
    figures.update(effective_of(inputs.sc, loop.scheduler))
    if inputs.sc.distributed:
        figures["parallel_wrapper"] = wrapper_name(loop.model)
    return figures
