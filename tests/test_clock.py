"""The worker's StepClock on the CPU, with the host clock replaced: window figures, step quantiles
and the CPU probe around the window."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from bench.worker import clock as clock_module
from bench.worker.clock import StepClock, quantiles


def run_clock(
    monkeypatch: pytest.MonkeyPatch,
    durations: list[float],
    warmup_steps: int,
    samples_per_step: int = 4,
    cpu_probe: Callable[[list[float]], float] | None = None,
) -> dict[str, Any]:
    """A clock over fake time: one optimizer step per duration (s). cpu_probe gets the fake clock."""
    now = [0.0]
    monkeypatch.setattr(clock_module.time, "perf_counter", lambda: now[0])
    probe = None if cpu_probe is None else lambda: cpu_probe(now)
    clock = StepClock(
        torch.device("cpu"), warmup_steps, len(durations), samples_per_step, tokens_per_sample=8, cpu_probe=probe
    )
    clock.train_begin()
    for d in durations:
        now[0] += d
        clock.step_end()
    return clock.summary()


def test_quantiles_of_sorted_step_times() -> None:
    assert quantiles([]) == (None, None, None)
    assert quantiles([2.0]) == (2.0, 2.0, 2.0)
    times = [float(t) for t in range(1, 12)]  # 1..11
    assert quantiles(times) == (2.0, 6.0, 10.0)


def test_a_window_with_slow_steps_counts_them_and_shows_the_spread(monkeypatch: pytest.MonkeyPatch) -> None:
    """2 warm-up steps, then 10 timed steps: eight of 0.1 s and two of 0.5 s (the host slowed)."""
    s = run_clock(monkeypatch, [1.0, 0.2] + [0.1] * 4 + [0.5, 0.5] + [0.1] * 4, warmup_steps=2)
    assert s["window_s"] == pytest.approx(1.8) and s["window_samples"] == 40
    assert s["samples_per_s"] == pytest.approx(40 / 1.8)
    assert s["step_time_p10_ms"] == pytest.approx(100) and s["step_time_median_ms"] == pytest.approx(100)
    assert s["step_time_p90_ms"] == pytest.approx(500)
    assert s["first_step_s"] == pytest.approx(1.0) and s["warmup_s"] == pytest.approx(1.2)
    assert s["cpu_loop_start_ms"] is None and s["cpu_loop_end_ms"] is None  # no probe given


def test_the_cpu_is_probed_at_both_ends_of_the_window_and_outside_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe's own time (0.05 s here) must not count in the window or the steps."""
    calls: list[float] = []

    def probe(now: list[float]) -> float:
        calls.append(now[0])
        now[0] += 0.05
        return 12.5 + len(calls)

    s = run_clock(monkeypatch, [0.1] * 3, warmup_steps=1, samples_per_step=2, cpu_probe=probe)
    assert calls == pytest.approx([0.1, 0.35])  # after step 1 (the warm-up), after step 3
    assert s["cpu_loop_start_ms"] == 13.5 and s["cpu_loop_end_ms"] == 14.5
    assert s["window_s"] == pytest.approx(0.2) and s["warmup_s"] == pytest.approx(0.15)
    assert s["step_time_median_ms"] == pytest.approx(100)


def test_with_no_warmup_the_window_opens_after_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    def probe(now: list[float]) -> float:
        now[0] += 0.05
        return 10.0

    s = run_clock(monkeypatch, [0.1] * 2, warmup_steps=0, cpu_probe=probe)
    assert s["warmup_s"] == 0 and s["window_s"] == pytest.approx(0.2) and s["cpu_loop_start_ms"] == 10.0


@pytest.mark.parametrize("warmup_steps", [0, 1, 3])
def test_on_step_time_counts_inside_the_window(monkeypatch: pytest.MonkeyPatch, warmup_steps: int) -> None:
    """inject_fault = "slow" sleeps in on_step: every timed step is that much longer, and the
    window's samples/s falls by the matching share."""
    from bench.worker import run as run_module  # transformers: only in the process that runs this test

    now = [0.0]
    monkeypatch.setattr(clock_module.time, "perf_counter", lambda: now[0])

    def slow() -> None:
        now[0] += run_module.SLOW_STEP_S

    clock = StepClock(torch.device("cpu"), warmup_steps, 6, 4, tokens_per_sample=8, on_step=slow)
    clock.train_begin()
    for _ in range(6):
        now[0] += 0.1
        clock.step_end()
    figures = clock.summary()
    step_ms = (0.1 + run_module.SLOW_STEP_S) * 1000
    assert figures["step_time_median_ms"] == pytest.approx(step_ms)
    assert figures["samples_per_s"] == pytest.approx(4 / (step_ms / 1000))


def test_slow_is_a_fault_a_scenario_may_inject() -> None:
    from bench.errors import BadInput
    from bench.scenario import Scenario

    assert Scenario(name="s", inject_fault="slow").inject_fault == "slow"
    with pytest.raises(BadInput, match="inject_fault"):
        Scenario(name="s", inject_fault="sluggish")
