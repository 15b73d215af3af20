"""The step hook as a Lightning callback: `L.Trainer(callbacks=[GpubenchLightningCallback()])`.

With Lightning 2.x installed the class is a `lightning.pytorch.Callback` (or, with only the older
`pytorch_lightning` package, a `pytorch_lightning.Callback`), so the Trainer calls every hook it
expects; without either it is a plain class with the hooks Lightning and Fabric's
`fabric.call("on_train_batch_start", ...)` invoke (`on_train_batch_start` / `on_train_batch_end` /
`on_train_end`).

A batch is counted as one optimizer step every `accumulate` batches (Lightning's
accumulate_grad_batches); its samples are the batch's length (`samples_of(batch)`: the first
tensor's first dimension, or len()), its tokens the labels that are not -100 when the batch is a
dict with "labels"; its loss the training_step's (the `loss` of its output)."""

from __future__ import annotations

from typing import Any

from . import begin, close, end, tokens_from_labels


def _base() -> type:
    """Lightning's Callback class where Lightning is installed, else object."""
    try:
        from lightning.pytorch import Callback

        return Callback  # type: ignore[no-any-return]
    except ImportError:
        pass
    try:
        from pytorch_lightning import Callback as OldCallback

        return OldCallback  # type: ignore[no-any-return]
    except ImportError:
        return object


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


class GpubenchLightningCallback(_base()):  # type: ignore[misc]
    def __init__(self, accumulate: int = 1, stop_after_window: bool = False) -> None:
        super().__init__()
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
