"""Steady-state timing: synchronise only at the window's ends; per-step times from CUDA events.

Optimizer steps 1..warmup are warm-up (kernel selection, allocator growth, compilation); the
window runs from the end of step `warmup` to the end of the step at which its rule
(bench/worker/window.py) ends it: the epoch's last step, a fixed number of steps, or, with "auto",
the first check point at which the mean step time is known well enough. `step_end` then returns
True and the engine stops its epoch. The device is synchronised three times in a run (end of
step 1, window start, window end), never inside the window: an "auto" check reads only the CUDA
events that have already completed (`Event.query`, which does not wait). With several ranks,
rank 0's decision at each check point is broadcast over a CPU (gloo) channel (`agree`), so every
rank closes its window at the same step.

`samples_per_s` is the window's samples over its wall time: what training gets. The step-time
quantiles (p10, median, p90) show how the steps spread inside the window. Just before the window
opens and just after it closes, with the device drained, the clock opens and closes its window
probes (bench/measure/probes.py), outside the window: the first, the CPU probe, times a fixed
Python loop on the training thread (bench/measure/cpuspeed.py): how fast the CPU that launches the
kernels was around this window, which a launch-bound step follows.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..measure.probes import COLUMNS as PROBE_COLUMNS
from ..measure.probes import WindowProbe
from .window import WindowRule, ci_pct


def quantiles(sorted_times: list[float]) -> tuple[float | None, float | None, float | None]:
    """(p10, median, p90) of sorted step times (nearest rank); Nones for no steps."""
    if not sorted_times:
        return None, None, None
    last = len(sorted_times) - 1
    return (
        sorted_times[int(round(0.1 * last))],
        statistics.median(sorted_times),
        sorted_times[int(round(0.9 * last))],
    )


def step_time_ms(step_s: list[float]) -> dict[str, float | None]:
    """The step-time columns (p10, median, p90, in ms) of a list of step times in seconds."""
    named = zip(("p10", "median", "p90"), quantiles(sorted(step_s)), strict=True)
    return {f"step_time_{name}_ms": None if q is None else q * 1000 for name, q in named}


class StepClock:
    def __init__(
        self,
        device: torch.device,
        warmup_steps: int,
        total_steps: int,
        samples_per_step: int,
        tokens_per_sample: float | None,
        on_first_step: Callable[[], None] | None = None,
        probes: Sequence[WindowProbe] = (),
        on_step: Callable[[], None] | None = None,
        barrier: Callable[[], None] | None = None,
        window: WindowRule | None = None,
        agree: Callable[[str | None], str | None] | None = None,
        profiler: Any = None,
    ) -> None:
        self.cuda = device.type == "cuda"
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.samples_per_step = samples_per_step
        self.tokens_per_sample = tokens_per_sample
        self.on_first_step = on_first_step
        self.on_step = on_step  # after every optimizer step, before it is timed (inject_fault = "slow")
        self.probes = list(probes)  # opened and closed at the window's edges, outside the window
        self.probe_figures: dict[str, Any] = {}  # what they returned at the window's end
        # several ranks: after the drain at each edge of the window, wait for every rank, so the
        # window opens and closes at the same step everywhere (bench/worker/ranks.py)
        self.barrier = barrier
        self.window = window or WindowRule()
        # several ranks with window = "auto": every rank's decision at a check point -> rank 0's
        self.agree = agree
        # `profile = N` (bench/worker/profiling.py): N steps after the window under torch.profiler,
        # taken from the epoch's end, so the window's last step is N before the epoch's
        self.profiler = profiler
        self.profile_steps = profiler.steps if profiler is not None else 0
        self.profiled = 0  # steps profiled so far
        self.profile_figures: dict[str, Any] = {}
        self.window_stop: str | None = None  # why the window ended (window.STOPS); None while open
        self.end_step: int | None = None  # the optimizer step that closed the window
        self._known_s: list[float] = []  # step times of completed CUDA events (auto's checks)
        self.steps_seen = 0
        self.t_begin: float | None = None
        self.t_first: float | None = None
        self.t_window_start: float | None = None
        self.t_window_end: float | None = None
        self.wall_begin: float | None = None
        self.marks: list[Any] = []  # CUDA events (or host times) at window start and each step end

    def _sync(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def _edge(self) -> float:
        """Drain the device and, with several ranks, wait for all of them: a window edge."""
        self._sync()
        if self.barrier is not None:
            self.barrier()
        return time.perf_counter()

    def _mark(self) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def _open_probes(self) -> None:
        for probe in self.probes:
            probe.open()

    def _close_probes(self) -> None:
        for probe in reversed(self.probes):  # the first opened is the outermost
            self.probe_figures.update(probe.close())

    def _start_window(self) -> float:
        """Drain the device, open the probes, then open the window: its start time."""
        self._edge()
        self._open_probes()
        self.t_window_start = time.perf_counter()
        self._mark()
        return self.t_window_start

    def train_begin(self) -> None:
        self.t_begin = self._start_window() if self.warmup_steps == 0 else self._sync()
        self.wall_begin = time.time()

    @property
    def done(self) -> bool:
        """The window has closed (and its profiled steps, if any, have run): the engine should stop."""
        return self.window_stop is not None and self.profiled >= self.profile_steps

    def step_end(self) -> bool:
        """Call once per optimizer step, after the step. True once the window has closed (the
        engine stops training there); no step after that is timed."""
        if self.done:
            return True
        if self.window_stop is not None:  # profiling, after the window
            self.steps_seen += 1
            self.profiled += 1
            if self.profiled >= self.profile_steps:
                self.profile_figures = self.profiler.stop()
            return self.done
        if self.on_step is not None:
            self.on_step()
        self.steps_seen += 1
        step = self.steps_seen
        if step > self.warmup_steps:
            self._mark()
        if step == 1:
            self.t_first = self._sync()
            if self.on_first_step is not None:
                self.on_first_step()
        if step == self.warmup_steps:
            self._start_window()
        if step > self.warmup_steps:
            timed = step - self.warmup_steps
            last = step >= self.total_steps - self.profile_steps  # the window's last step: no vote needed
            stop = (self.window.fixed_stop(timed) or "epoch_end") if last else self._decide(timed)
            if stop is not None:
                self.t_window_end = self._edge()
                self._close_probes()
                self.window_stop, self.end_step = stop, step
                if self.profiler is not None:
                    self.profiler.start()
        return self.done

    def end_at_last_step(self) -> None:
        """Close a window still open when the loop has ended (gpubench's step hook with window =
        "epoch": a foreign loop's own end, bench/hook/): at the last step's end, read from its mark
        (its CUDA event, or its host time), so what ran after the loop is not in the window."""
        if self.window_stop is not None or self.t_window_start is None or self.steps_seen <= self.warmup_steps:
            return
        self._sync()
        first, last = self.marks[0], self.marks[-1]
        span = first.elapsed_time(last) / 1000.0 if self.cuda else last - first
        self.t_window_end = self.t_window_start + span
        self._close_probes()
        self.window_stop, self.end_step = "epoch_end", self.steps_seen

    def _decide(self, window_steps: int) -> str | None:
        """Why the window ends after this window step, or None; at "auto"'s check points, rank 0's
        verdict on every rank."""
        if not self.window.is_check_point(window_steps):
            return self.window.fixed_stop(window_steps)
        assert self.t_window_start is not None
        mine = self.window.auto_stop(self._completed_step_times(), time.perf_counter() - self.t_window_start)
        return mine if self.agree is None else self.agree(mine)

    def _completed_step_times(self) -> list[float]:
        """The window's step times so far whose end has been reached by the device, without waiting
        for it: CUDA events complete in stream order, so stop at the first one not done."""
        if not self.cuda:
            return self.step_times_s()
        known = self._known_s
        while len(known) + 1 < len(self.marks) and self.marks[len(known) + 1].query():
            known.append(self.marks[len(known)].elapsed_time(self.marks[len(known) + 1]) / 1000.0)
        return known

    def step_times_s(self) -> list[float]:
        if self.cuda:
            return [a.elapsed_time(b) / 1000.0 for a, b in zip(self.marks, self.marks[1:], strict=False)]
        return [b - a for a, b in zip(self.marks, self.marks[1:], strict=False)]

    def summary(self) -> dict[str, Any]:
        if self.t_window_end is None or self.t_window_start is None or self.t_begin is None or self.end_step is None:
            raise RuntimeError(f"training ended after {self.steps_seen} of {self.total_steps} optimizer steps")
        window_steps = self.end_step - self.warmup_steps
        window_s = self.t_window_end - self.t_window_start
        window_samples = window_steps * self.samples_per_step
        step_s = self.step_times_s()
        return {
            "samples_per_s": window_samples / window_s,
            # None: the model has no tokens (a CNN: bench/worker/what_ran.py), samples only
            "tokens_per_s": None
            if self.tokens_per_sample is None
            else window_samples * self.tokens_per_sample / window_s,
            "window_s": window_s,
            "window_steps": window_steps,
            "window_samples": window_samples,
            "window_ci_pct": ci_pct(step_s),  # of the whole window, read after it closed
            "window_stop": self.window_stop,
            **step_time_ms(step_s),
            "first_step_s": (self.t_first - self.t_begin) if self.t_first else None,
            "warmup_s": self.t_window_start - self.t_begin,
            "train_loop_s": self.t_window_end - self.t_begin,
            # every registered probe's columns (None for a probe not given), then any other probe's
            **dict.fromkeys(PROBE_COLUMNS),
            **self.probe_figures,
            **self.profile_figures,
        }
