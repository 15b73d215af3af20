"""The worker's StepClock on the CPU, with the host clock replaced: window figures, step quantiles,
the CPU probe around the window, and where each kind of window ends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from bench.measure.probes import CpuProbe
from bench.worker import clock as clock_module
from bench.worker import window
from bench.worker.clock import StepClock, quantiles
from bench.worker.window import WindowRule


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
    probes = [] if cpu_probe is None else [CpuProbe(measure=lambda: cpu_probe(now))]
    clock = StepClock(
        torch.device("cpu"), warmup_steps, len(durations), samples_per_step, tokens_per_sample=8, probes=probes
    )
    clock.train_begin()
    for d in durations:
        now[0] += d
        clock.step_end()
    return clock.summary()


def windowed(
    monkeypatch: pytest.MonkeyPatch,
    durations: list[float],
    warmup_steps: int,
    setting: int | str,
    agree: Callable[[str | None], str | None] | None = None,
) -> tuple[StepClock, list[bool]]:
    """A clock with a window rule over fake time, fed until the engine would stop (step_end True)
    or the epoch (one step per duration) ends; returns it and every step_end's answer."""
    now = [0.0]
    monkeypatch.setattr(clock_module.time, "perf_counter", lambda: now[0])
    clock = StepClock(
        torch.device("cpu"),
        warmup_steps,
        len(durations),
        2,
        tokens_per_sample=8,
        window=WindowRule(setting),
        agree=agree,
    )
    clock.train_begin()
    answers: list[bool] = []
    for d in durations:
        now[0] += d
        answers.append(clock.step_end())
        if answers[-1]:
            break
    return clock, answers


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
    from bench.worker import train_one as run_module  # transformers: only in the process that runs this test

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
    from bench.recipe.scenario import Scenario

    assert Scenario(name="s", inject_fault="slow").inject_fault == "slow"
    with pytest.raises(BadInput, match="inject_fault"):
        Scenario(name="s", inject_fault="sluggish")


def test_auto_ends_the_window_at_the_first_check_point_where_the_interval_is_narrow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Steady 0.1 s steps: the interval is 0 at the first check point (20 timed steps), so the
    window closes there, step_end says stop, and the figures cover those 20 steps only."""
    clock, answers = windowed(monkeypatch, [1.0, 0.2] + [0.1] * 200, warmup_steps=2, setting="auto")
    assert answers == [False] * 21 + [True]  # 2 warm-up + 20 timed steps; the engine stops at the 22nd
    s = clock.summary()
    assert (s["window_stop"], s["window_steps"], s["window_samples"]) == ("ci", 20, 40)
    assert s["window_s"] == pytest.approx(2.0) and s["samples_per_s"] == pytest.approx(20.0)
    assert s["window_ci_pct"] == pytest.approx(0.0) and s["train_loop_s"] == pytest.approx(3.2)


def test_auto_on_noisy_steps_ends_at_the_first_check_point_past_max_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every fifth step takes 2 s: the batch means never agree within 2%, so the window runs until a
    check point finds MAX_S (set to 10 s here) passed: 25 steps (4 x 0.1 + 2 s per 5 steps: 12 s), at
    the second check point."""
    monkeypatch.setattr(window, "MAX_S", 10.0)
    clock, answers = windowed(monkeypatch, [0.5] + [0.1, 0.1, 0.1, 0.1, 2.0] * 40, warmup_steps=1, setting="auto")
    s = clock.summary()
    assert (s["window_stop"], s["window_steps"]) == ("max_time", 25)
    assert s["window_s"] == pytest.approx(12.0) and s["samples_per_s"] == pytest.approx(50 / 12.0)
    assert s["window_ci_pct"] > window.TARGET_PCT and len(answers) == 26


def test_auto_that_the_epoch_ends_first_says_epoch_end(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(window, "MAX_S", 10.0)  # 14 steps of 0.1 and 0.5 s: 4.2 s, the epoch ends first
    clock, answers = windowed(monkeypatch, [0.3] + [0.1, 0.5] * 7, warmup_steps=1, setting="auto")
    s = clock.summary()
    assert (s["window_stop"], s["window_steps"], len(answers)) == ("epoch_end", 14, 15)
    assert s["window_ci_pct"] is not None and s["window_s"] == pytest.approx(4.2)


def test_a_window_of_n_steps_ends_after_n_timed_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    clock, answers = windowed(monkeypatch, [0.1] * 50, warmup_steps=3, setting=7)
    s = clock.summary()
    assert (s["window_stop"], s["window_steps"], len(answers), answers[-1]) == ("steps", 7, 10, True)
    assert s["window_s"] == pytest.approx(0.7) and s["window_ci_pct"] is None  # fewer steps than batches


def test_a_window_of_n_steps_that_fills_the_epoch_says_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    clock, answers = windowed(monkeypatch, [0.1] * 10, warmup_steps=3, setting=7)
    assert (clock.window_stop, clock.summary()["window_steps"], len(answers)) == ("steps", 7, 10)


def test_epoch_is_the_whole_epoch_after_warm_up(monkeypatch: pytest.MonkeyPatch) -> None:
    clock, answers = windowed(monkeypatch, [0.1] * 40, warmup_steps=3, setting="epoch")
    s = clock.summary()
    assert (s["window_stop"], s["window_steps"], answers.count(True)) == ("epoch_end", 37, 1)
    assert s["window_ci_pct"] == pytest.approx(0.0, abs=1e-6)


def test_a_closed_window_times_nothing_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine that takes one more step after the stop changes none of the window's figures."""
    clock, _ = windowed(monkeypatch, [0.1] * 40, warmup_steps=0, setting=5)
    before = clock.summary()
    assert clock.step_end() is True and clock.steps_seen == 5
    assert clock.summary() == before


@pytest.mark.parametrize(
    ("rank0", "steps", "mine"),
    [(None, 40, [None, None, "ci", "ci", "ci", "ci"]), ("max_time", window.MIN_STEPS, [None])],
)
def test_with_several_ranks_every_check_point_follows_rank_0(
    monkeypatch: pytest.MonkeyPatch, rank0: str | None, steps: int, mine: list[str | None]
) -> None:
    """This rank's steps are steady (its own verdict: nothing at 10 and 15 steps, too few for an
    interval; "ci" from 20), but the window ends where rank 0's verdict says: never (the epoch's
    end, 40 steps; not asked at 40, the epoch's end needs no vote), or at the first check point."""
    asked: list[str | None] = []

    def agree(verdict: str | None) -> str | None:
        asked.append(verdict)
        return rank0

    clock, _ = windowed(monkeypatch, [0.1] * 41, warmup_steps=1, setting="auto", agree=agree)
    assert clock.summary()["window_steps"] == steps
    assert clock.window_stop == (rank0 or "epoch_end")
    assert asked == mine


class FakeEvent:
    """A CUDA event whose completion the test controls; reading an unfinished one is an error, as
    elapsed_time on a real one that has not completed is."""

    def __init__(self, t: float) -> None:
        self.t, self.completed = t, False

    def query(self) -> bool:
        return self.completed

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.completed and end.completed, "read an event that had not completed"
        return (end.t - self.t) * 1000.0


def test_a_check_on_a_gpu_reads_only_the_events_that_have_completed() -> None:
    clock = StepClock(torch.device("cpu"), 0, 100, 2, tokens_per_sample=8, window=WindowRule("auto"))
    clock.cuda = True  # the event path, with events the test completes
    events = [FakeEvent(0.1 * i) for i in range(6)]
    clock.marks = list(events)
    assert clock._completed_step_times() == []
    for e in events[:4]:
        e.completed = True
    assert clock._completed_step_times() == pytest.approx([0.1, 0.1, 0.1])
    events[5].completed = True  # out of order: impossible on one stream, and not trusted here
    assert len(clock._completed_step_times()) == 3
    events[4].completed = True
    assert clock._completed_step_times() == pytest.approx([0.1] * 5)
