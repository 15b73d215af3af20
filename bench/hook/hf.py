"""The step hook as a transformers TrainerCallback: `Trainer(..., callbacks=[GpubenchCallback()])`.

Each optimizer step (the Trainer calls on_step_begin / on_step_end once per step, around every
gradient-accumulation micro-batch) counts per_device_train_batch_size x gradient_accumulation_steps
samples. Its loss is the model's own `loss` output, averaged over the step's micro-batches (a
forward hook on the model the Trainer trains, read only inside the step): the loss as trained,
undivided by the accumulation; a compute_loss whose loss is not the model's output (label
smoothing) records none. Tokens are not known to a callback (docs/your-script.md: count them with
tokens_from_labels in a compute_loss, or leave them out). Once gpubench's window has closed, the
callback can stop the training (`stop_after_window=True`). Imports transformers: use it where the
script does."""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from . import begin, close, enabled, end


def output_loss(output: Any) -> Any:
    """A model output's `loss` (a ModelOutput or a dict); None for anything else."""
    return output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)


class GpubenchCallback(TrainerCallback):  # type: ignore[misc]
    def __init__(self, stop_after_window: bool = False) -> None:
        self.stop_after_window = stop_after_window
        self._in_step = False
        self._losses: list[Any] = []
        self._handle: Any = None

    def _on_forward(self, module: Any, inputs: Any, output: Any) -> None:
        loss = output_loss(output) if self._in_step and module.training else None
        if loss is not None:
            self._losses.append(loss.detach() if hasattr(loss, "detach") else loss)

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if enabled() and model is not None and self._handle is None and hasattr(model, "register_forward_hook"):
            self._handle = model.register_forward_hook(self._on_forward)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._in_step, self._losses = True, []
        begin()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._in_step = False
        samples = args.per_device_train_batch_size * args.gradient_accumulation_steps
        loss = sum(self._losses) / len(self._losses) if self._losses else None
        if end(samples=samples, loss=loss) and self.stop_after_window:
            control.should_training_stop = True

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        close()
