"""The HF Trainer engine: the guide's own recipe, with a callback that feeds the step clock and
stops the training when the clock's window has closed."""

from __future__ import annotations

from typing import Any

import torch

from ...recipe.optimizer_names import OPTIMIZERS
from .. import parallel
from ..checkpointing import checkpoint_every
from ..compiling import compile_layers
from ..dist import wrapper_name
from ..llm import LIGER_KERNELS, fused_loss_eager
from ..offload import offload_forward
from ..optimizers import AdamSettings, make_optimizer
from ..precision import set_tf32
from ..schedule import effective, scheduler_name
from .inputs import EngineInputs


def train(inputs: EngineInputs) -> dict[str, Any]:
    sc, model, dataset, device = inputs.sc, inputs.model, inputs.dataset, inputs.device
    clock, losses, phases, scratch = inputs.clock, inputs.losses, inputs.phases, inputs.scratch
    from transformers import Trainer, TrainerCallback, TrainingArguments

    class ClockCallback(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            clock.train_begin()

        def on_optimizer_step(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            phases.mark_optimizer_step(kwargs.get("optimizer"))

        def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            if clock.step_end():  # the window has closed: no more steps (window = "auto" or STEPS)
                control.should_training_stop = True

    first: dict[str, torch.Tensor] = {}  # the first micro-batch's model loss and training_step's

    class MeasuredTrainer(Trainer):
        def compute_loss(self, *args: Any, **kwargs: Any) -> Any:
            out = super().compute_loss(*args, **kwargs)
            if "model" not in first:
                first["model"] = (out[0] if isinstance(out, tuple) else out).detach().clone()
            return out

        def training_step(self, *args: Any, **kwargs: Any) -> torch.Tensor:
            loss = super().training_step(*args, **kwargs)
            if "returned" not in first:
                first["returned"] = loss.detach().clone()
            losses.track(loss)
            phases.mark("after_backward")
            return loss

    extra: dict[str, Any] = {}
    fields = TrainingArguments.__dataclass_fields__
    if sc.grad_checkpointing:  # renamed activation_checkpointing in transformers 5.2x
        extra["activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"] = True
    if sc.liger:  # the Trainer applies Liger's kernels to the model itself (under a PeftModel too)
        extra["use_liger_kernel"] = True
        if "liger_kernel_config" in fields:
            extra["liger_kernel_config"] = LIGER_KERNELS
        fused_loss_eager(sc)
    if sc.compile and sc.compile_scope == "model" and sc.compile_mode != "default":
        extra["torch_compile_mode"] = sc.compile_mode  # (setting it turns torch_compile on)
    args = TrainingArguments(
        **extra,
        output_dir=str(scratch),
        per_device_train_batch_size=sc.batch_size,
        gradient_accumulation_steps=sc.grad_accum_steps,
        fp16=sc.precision == "fp16",
        bf16=sc.precision == "bf16",
        optim=OPTIMIZERS[sc.optimizer] or "adamw_torch",  # None: handed over through optimizers=
        dataloader_num_workers=sc.dataloader_workers,
        dataloader_pin_memory=sc.pin_memory,
        dataloader_drop_last=True,
        torch_compile=sc.compile and sc.compile_scope == "model",
        # Explicit on CUDA: left at None, the Trainer turns TF32 on by itself for torch_compile,
        # which would mix two techniques in one row.
        tf32=sc.tf32 if device.type == "cuda" else None,
        num_train_epochs=1,
        learning_rate=sc.effective_learning_rate,
        lr_scheduler_type=scheduler_name(sc),
        warmup_steps=sc.lr_warmup_steps,
        seed=sc.seed,
        use_cpu=device.type == "cpu",
        report_to="none",
        logging_strategy="no",
        save_strategy="no",
        disable_tqdm=True,
        **parallel.trainer_arguments(sc, model),
    )
    if sc.checkpoint_every:
        checkpoint_every(model, sc.checkpoint_every)
    if sc.compile and sc.compile_scope == "layers":
        compile_layers(model, sc.compile_mode)  # the Trainer's torch_compile would wrap the whole model
    if sc.activation_offload:
        offload_forward(model)
    # gpubench's own optimizers go in through optimizers= (the Trainer makes its scheduler over them)
    optimizer = make_optimizer(sc.optimizer, model, AdamSettings.of(args)) if OPTIMIZERS[sc.optimizer] is None else None
    trainer = MeasuredTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        callbacks=[ClockCallback()],
        optimizers=(optimizer, None),
    )
    if device.type == "cuda":
        # accelerate's AcceleratorState, built inside the Trainer, sets allow_tf32 = True whenever
        # a dynamo backend is set without mixed precision (torch_compile=True), whatever `tf32`
        # says (seen on the H200 with accelerate 1.15): pin it back to what the scenario says.
        set_tf32(sc.tf32)
    metrics = trainer.train().metrics
    # final_loss and the curve: the model's loss, whatever training_step returned
    losses.scale = loss_scale(sc.grad_accum_steps, first, inputs.task)
    # the loss backward saw was the step's share (divided, or normalised over the step), or not
    divided = losses.scale > 1 if sc.grad_accum_steps > 1 else None
    runtime_s, samples_per_s = metrics.get("train_runtime"), metrics.get("train_samples_per_second")
    if clock.window_stop != "epoch_end" and runtime_s:
        # stopped before the epoch's end: what was trained over the Trainer's runtime (older
        # transformers count the whole planned epoch in train_samples_per_second)
        samples_per_s = trainer.state.global_step * sc.samples_per_step * args.world_size / runtime_s
    figures: dict[str, Any] = {"trainer_runtime_s": runtime_s, "trainer_samples_per_s": samples_per_s}
    if divided is not None:
        figures["loss_accum_divided"] = divided
    schedule = getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type)
    figures.update(effective(args.learning_rate, schedule, args.get_warmup_steps(sc.optimizer_steps)))
    if sc.distributed:
        figures["parallel_wrapper"] = wrapper_name(trainer.model_wrapped)
    return figures


def loss_scale(accum: int, first: dict[str, torch.Tensor], task: str) -> float:
    """What turns training_step's losses into the model's loss (final_loss and the curve). The Trainer divides a
    micro-batch's loss by the accumulation steps unless it takes the model to have normalised it
    already (a model whose forward takes **kwargs is handed `num_items_in_batch`, the labelled
    tokens of all the step's micro-batches). A causal LM's loss does use that count, so either way
    its returned loss is about the loss over `accum`; a classifier's head ignores it (BERT's
    computes its loss in place, transformers 5.x), and then the Trainer neither divides nor is the
    loss divided: transformers issue 47688. So: `accum` where the Trainer divided (its return is not
    the model's loss) or the head normalises over the step (a causal LM), else 1. Read once, after
    training, from the first micro-batch: nothing is synchronised a step."""
    if accum <= 1:
        return 1.0
    divided = trainer_divided(first)
    return float(accum) if divided is None or divided or task == "causal-lm" else 1.0


def trainer_divided(first: dict[str, torch.Tensor]) -> bool | None:
    """Whether training_step's first return is not the model's own loss (the Trainer divided it by
    the accumulation steps); None when no step ran."""
    model, returned = first.get("model"), first.get("returned")
    if model is None or returned is None:
        return None
    return not bool(torch.isclose(returned.float(), model.float(), rtol=1e-3, atol=0.0))
