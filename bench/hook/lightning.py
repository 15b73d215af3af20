"""The step hook as a Lightning-style callback, without importing Lightning: a plain class with
`on_train_batch_start` / `on_train_batch_end` / `on_train_end`, the hooks Lightning (and Fabric's
`fabric.call(...)`) invoke. Pass it in `Trainer(callbacks=[GpubenchLightningCallback()])`; Lightning
accepts any object with its hook names (with Lightning 2.x, subclass it with
`lightning.pytorch.Callback` first if your version insists on the base class).

A batch is counted as one optimizer step every `accumulate` batches (Lightning's
accumulate_grad_batches); its samples are the batch's length (`samples_of(batch)`: the first
tensor's first dimension, or len()), its tokens the labels that are not -100 when the batch is a
dict with "labels"."""

from __future__ import annotations

from typing import Any

from . import begin, close, end, tokens_from_labels


def samples_of(batch: Any) -> int:
    """The batch's samples: the first dimension of its first tensor (a dict's first value, a
    tuple's first item), else len(batch)."""
    first = (
        next(iter(batch.values()))
        if isinstance(batch, dict)
        else batch[0]
        if isinstance(batch, list | tuple)
        else batch
    )
    shape = getattr(first, "shape", None)
    return int(shape[0]) if shape else len(batch)


class GpubenchLightningCallback:
    def __init__(self, accumulate: int = 1, stop_after_window: bool = False) -> None:
        self.accumulate = max(1, accumulate)
        self.stop_after_window = stop_after_window
        self._batches = 0
        self._samples = 0
        self._tokens: Any = None

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if self._batches % self.accumulate == 0:
            begin()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self._batches += 1
        self._samples += samples_of(batch)
        if isinstance(batch, dict) and "labels" in batch:
            counted = tokens_from_labels(batch["labels"])
            self._tokens = counted if self._tokens is None else self._tokens + counted
        if self._batches % self.accumulate:
            return
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        window_closed = end(samples=self._samples, tokens=self._tokens, loss=loss)
        self._samples, self._tokens = 0, None
        if window_closed and self.stop_after_window and trainer is not None:
            trainer.should_stop = True

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        close()
