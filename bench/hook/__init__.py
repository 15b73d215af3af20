"""gpubench's step hook: time your own training loop as a gpubench scenario (docs/your-script.md).

    import bench.hook as gpubench

    for batch in loader:
        with gpubench.step(samples=len(batch["input_ids"]), tokens=gpubench.tokens_from_labels(batch["labels"])):
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()

or `gpubench.begin()` / `gpubench.end(samples=..., tokens=...)` around each optimizer step. Launched
by `gpubench run --cmd "..."` (or a matrix's `command = [...]`), the hook times every step with the
built-in worker's clock, keeps gpubench's warm-up and timed window, and at the process's end writes
the result gpubench's parent turns into a results row. Not launched by gpubench (no
GPUBENCH_HOOK_DIR in the environment), every call returns at once: nothing is imported, timed or
written, so the script runs as it always did.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

from .protocol import DIR_VAR, check_settings

__all__ = ["Step", "begin", "close", "done", "enabled", "end", "settings", "step", "tokens_from_labels"]

_session: Any = None  # the Session (bench/hook/state.py) once a step was seen under gpubench


def enabled() -> bool:
    """Whether gpubench launched this process (the hook times and reports)."""
    return bool(os.environ.get(DIR_VAR))


def _current() -> Any:
    global _session
    if _session is None:
        from .state import Session

        _session = Session(dict(os.environ))
        atexit.register(close)
    return _session


def begin() -> None:
    """An optimizer step starts (the first call starts the clock; the others only mark the step open)."""
    if enabled():
        _current().begin()


def end(samples: Any, tokens: Any = None, loss: Any = None) -> bool:
    """An optimizer step ended: `samples` trained in it (every micro-batch of it), `tokens` trainable
    tokens (tokens_from_labels summed over the micro-batches; None: no token figure), `loss` (a
    tensor or number; optional: the row's final_loss and divergence check). Returns True once
    gpubench's timed window has closed: the loop may stop there (the steps after it are not timed)."""
    return bool(enabled() and _current().end(samples, tokens, loss))


def settings(**values: Any) -> None:
    """What the script trains with, for its results row: any of bench.hook.protocol's
    REPORTED_SETTINGS (model, task, engine, precision, optimizer, data, lr_schedule, batch_size,
    grad_accum_steps, seq_len, seed, learning_rate). A setting not reported stays empty in the row:
    gpubench never fills in its own defaults for a script. Checked on every call (a ValueError names
    a bad one), launched by gpubench or not; rank 0's are the row's."""
    checked = check_settings(values)
    if enabled():
        _current().settings.update(checked)


def done() -> bool:
    """True once the timed window has closed; always False when not launched by gpubench."""
    return bool(_session is not None and _session.done)


def close() -> None:
    """Write this process's result now (also done at exit); steps after it are not counted."""
    if _session is not None:
        _session.close()


class Step:
    """What one optimizer step trained; add to it inside `with step(...) as s:` (micro-batches)."""

    def __init__(self, samples: Any = 0, tokens: Any = None, loss: Any = None) -> None:
        self.samples, self.tokens, self.loss = samples, tokens, loss

    def add(self, samples: Any = 0, tokens: Any = None) -> None:
        """One micro-batch's samples and tokens."""
        self.samples = self.samples + samples
        if tokens is not None:
            self.tokens = tokens if self.tokens is None else self.tokens + tokens


@contextlib.contextmanager
def step(samples: Any = 0, tokens: Any = None) -> Iterator[Step]:
    """One optimizer step: `with gpubench.step(samples=..., tokens=...) as s:`; set `s.loss`, or
    `s.add(...)` per micro-batch. A step that raises is not counted (the exception goes on). A step
    inside another is refused: the row is an error saying so (it would count its samples twice)."""
    handle = Step(samples, tokens)
    begin()
    try:
        yield handle
    except BaseException:
        if _session is not None:
            _session.abandon()
        raise
    end(handle.samples, handle.tokens, handle.loss)


def _failed(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
    """sys.excepthook while gpubench launched this process: the error that ends it goes into its
    rank file (and torchrun's error file, as torch's record decorator writes it), so the row names
    the rank that failed and its own error; then Python's report as always."""
    with contextlib.suppress(Exception):
        from .protocol import record_failure

        record_failure(exc, _session)
    _previous_excepthook(kind, exc, tb)


_previous_excepthook = sys.excepthook
if enabled():
    sys.excepthook = _failed


def tokens_from_labels(labels: Any, ignore_index: int = -100) -> Any:
    """Trainable tokens of a batch: the labels that are not `ignore_index` (padding, prompts). For a
    tensor, a 0-d tensor on its device (no wait for the GPU; the hook adds them up at the end)."""
    if hasattr(labels, "ne"):
        return labels.ne(ignore_index).sum()
    return sum(
        1 for row in labels for label in (row if isinstance(row, list | tuple) else [row]) if label != ignore_index
    )
