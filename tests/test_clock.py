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


def test_the_cpu_is_probed_at_both_ends_of_the_window_and_outside_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe's own time (0.05 s here) must not count in the window, the warm-up or the steps."""
    now = [0.0]
    monkeypatch.setattr(clock_module.time, "perf_counter", lambda: now[0])
    calls: list[float] = []

    def probe() -> float:
        calls.append(now[0])
        now[0] += 0.05
        return 12.5 + len(calls)

    clock = StepClock(torch.device("cpu"), 1, 3, samples_per_step=2, tokens_per_sample=4, cpu_probe=probe)
    clock.train_begin()
    for _ in range(3):
        now[0] += 0.1
        clock.step_end()
    s = clock.summary()
    assert calls == pytest.approx([0.1, 0.35])  # after step 1 (the warm-up), after step 3
    assert s["cpu_loop_start_ms"] == 13.5 and s["cpu_loop_end_ms"] == 14.5
    assert s["window_s"] == pytest.approx(0.2) and s["warmup_s"] == pytest.approx(0.15)
    assert s["step_time_median_ms"] == pytest.approx(100)


def test_with_no_warmup_the_window_opens_after_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    monkeypatch.setattr(clock_module.time, "perf_counter", lambda: now[0])

    def probe() -> float:
        now[0] += 0.05
        return 10.0

    clock = StepClock(torch.device("cpu"), 0, 2, samples_per_step=1, tokens_per_sample=1, cpu_probe=probe)
    clock.train_begin()
    for _ in range(2):
        now[0] += 0.1
        clock.step_end()
    s = clock.summary()
    assert s["warmup_s"] == 0 and s["window_s"] == pytest.approx(0.2) and s["cpu_loop_start_ms"] == 10.0


def test_without_a_probe_the_columns_are_empty() -> None:
    clock = StepClock(torch.device("cpu"), 0, 1, samples_per_step=1, tokens_per_sample=1)
    clock.train_begin()
    clock.step_end()
    s = clock.summary()
    assert s["cpu_loop_start_ms"] is None and s["cpu_loop_end_ms"] is None
