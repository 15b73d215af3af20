"""The timed window of the hand-written loops (reference_loop.py, model_loop.py), as the engine's
clock times it: the device synchronised at the window's two ends only, a CUDA event at each step's
end for the step-time quantiles, and the CPU probe (a fixed Python loop) just before and after."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from bench.measure.cpuspeed import window_probe_ms


@dataclass(frozen=True)
class Window:
    window_s: float
    step_s: list[float]
    cpu_loop_start_ms: float
    cpu_loop_end_ms: float
    last: Any  # what the last step returned (its loss)


def timed_window(step: Callable[[int], Any], steps: int, warmup_steps: int, cuda: bool) -> Window:
    """Run step(0), ..., step(steps - 1) and time the steps from `warmup_steps` on."""
    marks: list[Any] = []

    def mark() -> None:
        if cuda:
            marks.append(torch.cuda.Event(enable_timing=True))
            marks[-1].record()
        else:
            marks.append(time.perf_counter())

    t_start = None
    cpu_start = 0.0
    last = None
    for i in range(steps):
        if i == warmup_steps:
            if cuda:
                torch.cuda.synchronize()
            cpu_start = window_probe_ms()
            t_start = time.perf_counter()
            mark()
        last = step(i)
        if t_start is not None:
            mark()
    if cuda:
        torch.cuda.synchronize()
    assert t_start is not None, "the warm-up steps leave no timed steps"
    window_s = time.perf_counter() - t_start
    pairs = zip(marks, marks[1:], strict=False)
    step_s = [x.elapsed_time(y) / 1000 if cuda else y - x for x, y in pairs]
    return Window(window_s, step_s, cpu_start, window_probe_ms(), last)
