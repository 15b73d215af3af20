"""A scenario's strategy (ddp, fsdp, deepspeed) as each engine's own settings: accelerate's FSDP
and DeepSpeed plugins, and the Trainer's `fsdp`/`fsdp_config` and `deepspeed` arguments. DDP needs
nothing: both engines wrap the model in DistributedDataParallel when torchrun started them.

FSDP is FSDP2 (`fully_shard`), wrapped per transformer block (the model's repeated layer class).
DeepSpeed takes the scenario's own optimizer, as DDP and FSDP do, except with ZeRO-Offload: there
the optimizer is DeepSpeed's CPU Adam (named in the config), the recipe ZeRO-Offload is built on.
"""

from __future__ import annotations

from typing import Any

import torch

from .. import mesh
from ..scenario import Scenario
from .compiling import repeated_blocks

LR = 5e-5  # the engines' default learning rate (optimizers.AdamSettings, TrainingArguments)


def layer_class(model: torch.nn.Module) -> str:
    blocks = repeated_blocks(model)
    if not blocks:
        raise ValueError(f"{type(model).__name__} has no repeated blocks to shard one by one")
    return type(blocks[0]).__name__


def deepspeed_config(sc: Scenario, auto: bool) -> dict[str, Any]:
    """The ZeRO config; `auto` leaves batch sizes and precision to the Trainer ("auto" values)."""
    zero: dict[str, Any] = {"stage": sc.zero_stage}
    if sc.offload in ("optimizer", "params"):
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if sc.offload == "params":
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    config: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": "auto" if auto else sc.batch_size,
        "gradient_accumulation_steps": "auto" if auto else sc.grad_accum_steps,
        "zero_optimization": zero,
        "bf16": {"enabled": "auto" if auto else sc.precision == "bf16"},
        "fp16": {"enabled": "auto" if auto else sc.precision == "fp16"},
        "gradient_clipping": "auto" if auto else 0.0,  # the loop does not clip; the Trainer does (max_grad_norm)
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }
    if auto:
        config["train_batch_size"] = "auto"
    if sc.offload != "none":
        config["optimizer"] = {"type": "AdamW", "params": {"lr": LR, "weight_decay": 0.0}}
    return config


def accelerate_plugins(sc: Scenario, model: torch.nn.Module) -> dict[str, Any]:
    """Keyword arguments for `Accelerator(...)`; none for a device mesh (bench/worker/mesh.py shards it)."""
    if sc.strategy == "fsdp" and not mesh.asked(vars(sc)):
        from accelerate.utils import FullyShardedDataParallelPlugin

        plugin = FullyShardedDataParallelPlugin(
            fsdp_version=2,
            reshard_after_forward=sc.fsdp_sharding == "full",
            auto_wrap_policy="transformer_based_wrap",
            transformer_cls_names_to_wrap=[layer_class(model)],
            cpu_offload=sc.offload == "params",
            cpu_ram_efficient_loading=False,
        )
        return {"fsdp_plugin": plugin}
    if sc.strategy == "deepspeed":
        from accelerate.utils import DeepSpeedPlugin

        return {"deepspeed_plugin": DeepSpeedPlugin(hf_ds_config=deepspeed_config(sc, auto=False))}
    return {}


def force_fsdp_on_cpu(accelerator: Any, plugin: Any) -> None:
    """accelerate treats every CPU process group as MULTI_CPU and would train FSDP scenarios with
    DDP; FSDP2 itself runs on the CPU with gloo, so the CPU tests set the type back to FSDP and go
    through accelerate's own FSDP2 preparation (the GPU path needs nothing of this)."""
    from accelerate.utils import DistributedType

    state = accelerator.state
    if plugin is not None and state.distributed_type == DistributedType.MULTI_CPU:
        state.distributed_type = DistributedType.FSDP
        if state.mixed_precision != "no":
            plugin.set_mixed_precision(state.mixed_precision)
        state.fsdp_plugin = plugin


def trainer_arguments(sc: Scenario, model: torch.nn.Module) -> dict[str, Any]:
    """Keyword arguments for `TrainingArguments(...)`."""
    if sc.strategy == "fsdp":
        from transformers import TrainingArguments

        config: dict[str, Any] = {
            "version": 2,
            "transformer_layer_cls_to_wrap": [layer_class(model)],
            "reshard_after_forward": sc.fsdp_sharding == "full",
            "cpu_ram_efficient_loading": False,
        }
        if sc.offload == "params":
            config["cpu_offload"] = True
        if hasattr(TrainingArguments, "_apply_legacy_fsdp_to_config"):  # transformers 5.1x on: fsdp=True
            return {"fsdp": True, "fsdp_config": config}
        words = ["full_shard" if sc.fsdp_sharding == "full" else "shard_grad_op", "auto_wrap"]
        if sc.offload == "params":
            words.append("offload")
        return {"fsdp": " ".join(words), "fsdp_config": config}
    if sc.strategy == "deepspeed":
        return {"deepspeed": deepspeed_config(sc, auto=True)}
    return {}
