"""A scenario's strategy (ddp, fsdp, deepspeed) as each engine's own settings: accelerate's FSDP
and DeepSpeed plugins, the Trainer's `fsdp`/`fsdp_config` and `deepspeed` arguments, and Lightning
Fabric's strategies. DDP needs nothing more: every engine wraps the model in
DistributedDataParallel when torchrun started them (Fabric reads torchrun's environment).

FSDP is FSDP2 (`fully_shard`), wrapped per transformer block (the model's repeated layer class),
but under Fabric: its FSDPStrategy is FSDP1 (FullyShardedDataParallel, use_orig_params=True), wrapped
per block alike (the row's parallel_wrapper says which).
DeepSpeed takes the scenario's own optimizer, as DDP and FSDP do, except with ZeRO-Offload: there
the optimizer is DeepSpeed's CPU Adam (named in the config), the recipe ZeRO-Offload is built on.
"""

from __future__ import annotations

from typing import Any

import torch

from ..recipe import mesh
from ..recipe.engine_registry import precision_matmuls
from ..recipe.scenario import Scenario
from .compiling import repeated_blocks


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
        "bf16": {"enabled": "auto" if auto else precision_matmuls(sc.precision) == "bf16"},
        "fp16": {"enabled": "auto" if auto else precision_matmuls(sc.precision) == "fp16"},
        "gradient_clipping": "auto" if auto else 0.0,  # the loop does not clip; the Trainer does (max_grad_norm)
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }
    if auto:
        config["train_batch_size"] = "auto"
    if sc.offload != "none":
        config["optimizer"] = {"type": "AdamW", "params": {"lr": sc.effective_learning_rate, "weight_decay": 0.0}}
    return config


def accelerate_plugins(sc: Scenario, model: torch.nn.Module) -> dict[str, Any]:
    """Keyword arguments for `Accelerator(...)`; none for a device mesh (bench/worker/device_mesh.py shards it)."""
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


def fabric_strategy(sc: Scenario, model: torch.nn.Module) -> Any:
    """`Fabric(strategy=...)`: "auto" for one process, else Fabric's own strategy."""
    if sc.strategy == "fsdp":
        from lightning_fabric.strategies import FSDPStrategy

        return FSDPStrategy(
            auto_wrap_policy={type(repeated_blocks(model)[0])} if repeated_blocks(model) else None,
            sharding_strategy="FULL_SHARD" if sc.fsdp_sharding == "full" else "SHARD_GRAD_OP",
            cpu_offload=sc.offload == "params",
        )
    if sc.strategy == "deepspeed":
        from lightning_fabric.strategies import DeepSpeedStrategy

        config = deepspeed_config(sc, auto=False)
        config.pop("optimizer", None)  # Fabric sets a model up with its optimizer: DeepSpeed's CPU Adam is built
        return DeepSpeedStrategy(config=config)
    return "ddp" if sc.strategy == "ddp" else "auto"
