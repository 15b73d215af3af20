"""The worker's StepClock on the CPU, with the host clock replaced: window figures and step quantiles."""

from __future__ import annotations

import pytest
import torch

from bench.worker import clock as clock_module
from bench.worker.clock import StepClock, quantiles


def test_quantiles_of_sorted_step_times() -> None:
    assert quantiles([]) == (None, None, None)
    assert quantiles([2.0]) == (2.0, 2.0, 2.0)
    times = [float(t) for t in range(1, 12)]  # 1..11
    assert quantiles(times) == (2.0, 6.0, 10.0)


def test_a_window_with_slow_steps_counts_them_and_shows_the_spread(monkeypatch: pytest.MonkeyPatch) -> None:
    """2 warm-up steps, then 10 timed steps: eight of 0.1 s and two of 0.5 s (the host slowed).
    samples_per_s counts the slow steps; the quantiles show the spread."""
    now = [100.0]
    monkeypatch.setattr(clock_module.time, "perf_counter", lambda: now[0])
    clock = StepClock(torch.device("cpu"), warmup_steps=2, total_steps=12, samples_per_step=4, tokens_per_sample=8)
    clock.train_begin()
    durations = [1.0, 0.2] + [0.1] * 4 + [0.5, 0.5] + [0.1] * 4
    for d in durations:
        now[0] += d
        clock.step_end()
    s = clock.summary()
    assert s["window_s"] == pytest.approx(1.8) and s["window_samples"] == 40
    assert s["samples_per_s"] == pytest.approx(40 / 1.8)
    assert s["step_time_p10_ms"] == pytest.approx(100) and s["step_time_median_ms"] == pytest.approx(100)
    assert s["step_time_p90_ms"] == pytest.approx(500)
    assert s["first_step_s"] == pytest.approx(1.0) and s["warmup_s"] == pytest.approx(1.2)
