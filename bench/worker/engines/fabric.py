"""The Lightning Fabric loop, as the Fabric talk's scripts write it (rasbt/cvpr2023):
`Fabric(accelerator, precision, devices, strategy)`, `launch`, `setup_module`, `setup_optimizers`,
`setup_dataloaders`, `fabric.backward`; gradient accumulation with `no_backward_sync`.

`setup` prepares it and `FabricLoop.step` trains one micro-batch; `train` runs them over the data
set and stops when the clock's window has closed, as the Accelerate loop does (accelerate.py).
Under torchrun, Fabric finds the job in torchrun's environment (its TorchElastic cluster) and keeps
the process group the worker made (bench/worker/dist.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ...recipe.precisions import TO_FABRIC
from .. import dist, parallel
from ..compiling import compiled
from ..dist import wrapper_name
from ..optimizers import AdamSettings, make_optimizer
from ..precision import set_tf32
from ..schedule import effective_of, make_scheduler
from .inputs import EngineInputs, apply_techniques, epoch_loader, run_epoch


@dataclass
class FabricLoop:
    """The set-up model, optimizer and loader, and one micro-batch of training over them."""

    inputs: EngineInputs
    fabric: Any
    model: Any
    optimizer: Any
    loader: Any
    scheduler: Any = None  # None under DeepSpeed's own CPU Adam (ZeRO-Offload): a constant rate
    micro_batches: int = 0

    def step(self, batch: dict[str, torch.Tensor]) -> None:
        fabric, model, optimizer, sc = self.fabric, self.model, self.optimizer, self.inputs.sc
        phases = self.inputs.phases
        self.micro_batches += 1
        boundary = self.micro_batches % sc.grad_accum_steps == 0
        with fabric.no_backward_sync(model, enabled=not boundary):  # no all-reduce inside the accumulation
            loss = model(**batch).loss
            phases.mark("after_forward")
            # scaled as accelerate's backward scales it; without accumulation not divided at all, as the
            # talk's scripts: a division by 1 is one more kernel to launch in a launch-bound step
            fabric.backward(loss / sc.grad_accum_steps if sc.grad_accum_steps > 1 else loss)
            phases.mark("after_backward")
        self.inputs.losses.track(loss)
        if boundary:
            optimizer.step()
            phases.mark_optimizer_step(optimizer)
            if self.scheduler is not None:  # once per optimizer step, as the Trainer
                self.scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            self.inputs.clock.step_end()


def fabric_arguments(inputs: EngineInputs) -> dict[str, Any]:
    """`Fabric(...)`'s accelerator, devices, nodes and cluster: torchrun's processes of this node,
    or the worker's one device. The cluster is said, not detected: Fabric would look for SLURM
    (and warn where `srun` is on PATH) though torchrun started the job."""
    from lightning_fabric.plugins.environments import LightningEnvironment, TorchElasticEnvironment

    device, sc = inputs.device, inputs.sc
    accelerator = "cuda" if device.type == "cuda" else "cpu"
    rank = dist.from_env() if sc.distributed else None
    if rank is not None:
        return {
            "accelerator": accelerator,
            "devices": rank.local_world_size,
            "num_nodes": sc.nnodes,
            "plugins": [TorchElasticEnvironment()],
        }
    one = [device.index or 0] if device.type == "cuda" else 1
    return {"accelerator": accelerator, "devices": one, "plugins": [LightningEnvironment()]}


def no_precision_hint() -> None:
    """Turn off Fabric's TF32 hint on CUDA (`_check_cuda_matmul_precision`, which only logs advice
    to call `set_float32_matmul_precision`). It asks `torch.get_float32_matmul_precision()`, which
    raises in torch 2.11 once the precision was set per backend through the new API, as gpubench
    does (worker/precision.py: `tf32` is the scenario's, set by gpubench, not by Fabric): every H200
    Fabric row failed there with "checking the matmul precision without a specific backend name"."""
    from lightning_fabric.accelerators import cuda

    if not hasattr(cuda, "gpubench_shipped_hint"):  # once per process; the shipped one kept beside it
        cuda.gpubench_shipped_hint = cuda._check_cuda_matmul_precision  # type: ignore[attr-defined]
    cuda._check_cuda_matmul_precision = lambda device: None  # type: ignore[assignment]


def setup(inputs: EngineInputs) -> FabricLoop:
    sc, model, device = inputs.sc, inputs.model, inputs.device
    from lightning_fabric import Fabric

    no_precision_hint()
    fabric = Fabric(
        precision=TO_FABRIC.get(sc.precision, sc.precision),  # type: ignore[arg-type]
        strategy=parallel.fabric_strategy(sc, model),
        **fabric_arguments(inputs),
    )
    fabric.launch()  # under torchrun: no processes started, the distributed environment set up
    apply_techniques(sc, model)
    if sc.compile:  # Fabric compiles again around its own wrapper (setup_module's _reapply_compile)
        model = compiled(model, sc.compile_scope, sc.compile_mode)
    hp = AdamSettings(lr=sc.effective_learning_rate)
    if sc.strategy == "deepspeed":  # DeepSpeed sets the model up with its optimizer, together
        if sc.offload != "none":
            from deepspeed.ops.adam import DeepSpeedCPUAdam

            optimizer = DeepSpeedCPUAdam(model.parameters(), lr=sc.effective_learning_rate)
        else:
            optimizer = make_optimizer(sc.optimizer, model, hp)
        model, optimizer = fabric.setup(model, optimizer)
    else:  # the optimizer over the wrapped parameters (FSDP's), as Fabric's FSDP guide builds it
        model = fabric.setup_module(model)
        optimizer = fabric.setup_optimizers(make_optimizer(sc.optimizer, model, hp))
    loader = epoch_loader(inputs)
    # the scheduler over the set-up optimizer (none beside DeepSpeed's CPU Adam, as in the Accelerate loop)
    offloaded = sc.strategy == "deepspeed" and sc.offload != "none"
    scheduler = None if offloaded else make_scheduler(sc, optimizer)
    prepared: Any = fabric.setup_dataloaders(loader)  # a DistributedSampler under torchrun; batches onto the device
    if device.type == "cuda":
        set_tf32(sc.tf32)  # what the scenario says, whatever a library set meanwhile
    model.train()
    return FabricLoop(inputs, fabric, model, optimizer, prepared, scheduler)


def wrapped(model: Any) -> Any:
    """What wraps the trained module inside Fabric's _FabricModule (DDP, FSDP, DeepSpeedEngine)."""
    inner = getattr(model, "_forward_module", model)
    return getattr(inner, "_orig_mod", inner)  # under torch.compile


def train(inputs: EngineInputs) -> dict[str, Any]:
    loop = setup(inputs)
    figures = run_epoch(inputs, loop.loader, loop.step)
    figures.update(effective_of(inputs.sc, loop.scheduler))
    if inputs.sc.distributed:
        figures["parallel_wrapper"] = wrapper_name(wrapped(loop.model))
    return figures
