"""The CPU-steadiness probe behind env.json's `cpu_speed` and the report's warning."""

from __future__ import annotations

import os

import pytest

from bench.measure import cpuspeed


def test_probe_times_every_cpu_and_gives_the_affinity_back() -> None:
    before = os.sched_getaffinity(0)
    speed = cpuspeed.probe(rounds=2)
    assert os.sched_getaffinity(0) == before
    assert speed["cpus"] == min(len(before), cpuspeed.MAX_CPUS)
    assert speed["passes"] == 2 * 2 * speed["cpus"]  # two timed passes per CPU and round
    assert speed["fastest_ms"] <= speed["p10_ms"] <= speed["median_ms"] <= speed["p90_ms"] <= speed["slowest_ms"]
    assert speed["p90_over_p10"] == pytest.approx(speed["p90_ms"] / speed["p10_ms"])


def test_probe_keeps_to_the_cpus_the_workers_get() -> None:
    one = min(os.sched_getaffinity(0))
    assert cpuspeed.probe(only=(one,), rounds=1)["cpus"] == 1


@pytest.mark.parametrize(
    ("speed", "warns"),
    [
        (None, False),
        ({}, False),
        ({"p10_ms": 10.0, "p90_ms": 14.0, "p90_over_p10": 1.4, "passes": 32}, False),
        ({"p10_ms": 10.0, "p90_ms": 15.0, "p90_over_p10": 1.5, "passes": 32}, True),
        ({"p10_ms": 11.0, "p90_ms": 20.0, "p90_over_p10": 20 / 11, "passes": 32}, True),
    ],
)
def test_warning_only_past_the_threshold(speed: dict | None, warns: bool) -> None:
    note = cpuspeed.warning(speed)
    assert (note is not None) == warns
    if note:
        assert f"{speed['p90_over_p10']:.2f}x" in note and "launch-bound" in note
