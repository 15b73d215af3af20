"""The step hook as a transformers TrainerCallback: `Trainer(..., callbacks=[GpubenchCallback()])`.

Each optimizer step (the Trainer calls on_step_begin / on_step_end once per step, after every
gradient-accumulation micro-batch) counts per_device_train_batch_size x gradient_accumulation_steps
samples; tokens are not known to a callback (docs/your-script.md: count them with tokens_from_labels
in a compute_loss, or leave them out). Once gpubench's window has closed, the callback can stop the
training (`stop_after_window=True`). Imports transformers: use it where the script does."""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from . import begin, close, end


class GpubenchCallback(TrainerCallback):  # type: ignore[misc]
    def __init__(self, stop_after_window: bool = False) -> None:
        self.stop_after_window = stop_after_window

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        begin()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        samples = args.per_device_train_batch_size * args.gradient_accumulation_steps
        if end(samples=samples) and self.stop_after_window:
            control.should_training_stop = True

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        close()
