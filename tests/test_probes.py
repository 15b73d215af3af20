"""The window probes' contract (bench/measure/probes.py), walked from the registry: every probe
opens and closes on the CPU and returns exactly its declared columns; the clock's figures hold
every registered probe's columns; a probe that cannot measure says why in its reason column."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from bench.measure.probes import COLUMNS, PROBES, CpuProbe, WindowProbe, make_probes, unmeasured


@pytest.mark.parametrize("kind", PROBES, ids=lambda k: k.name)
def test_every_probe_opens_closes_and_returns_only_its_columns(kind: type[WindowProbe]) -> None:
    probe = kind("cpu")
    probe.open()
    figures = probe.close()
    assert list(figures) == list(kind.columns)
    assert all(c.startswith(f"{kind.name}_") for c in kind.columns), kind.columns
    assert all(v is None or isinstance(v, int | float | str) for v in figures.values()), figures


def test_the_cpu_probe_is_first_and_the_columns_are_todays() -> None:
    assert PROBES[0] is CpuProbe
    assert COLUMNS[:2] == ("cpu_loop_start_ms", "cpu_loop_end_ms")
    assert len(set(COLUMNS)) == len(COLUMNS)  # no two probes share a column
    assert [type(p) for p in make_probes("cuda:0")] == list(PROBES)


def test_the_cpu_probe_times_the_loop_at_open_and_at_close() -> None:
    times = iter([3.0, 4.5])
    probe = CpuProbe(measure=lambda: next(times))
    probe.open()
    assert probe.close() == {"cpu_loop_start_ms": 3.0, "cpu_loop_end_ms": 4.5}
    real = CpuProbe()
    real.open()
    assert all(v > 0 for v in real.close().values())


class EnergyLike:
    """A probe of the shape the NVML energy probe will have: nothing to read on the CPU."""

    name: ClassVar[str] = "energy"
    columns: ClassVar[tuple[str, ...]] = ("energy_j", "energy_reason")

    def __init__(self, device: str) -> None:
        self.device = device

    def open(self) -> None:
        pass

    def close(self) -> dict[str, Any]:
        return unmeasured(self, f"no NVML energy counter on {self.device}")


def test_a_probe_that_cannot_measure_returns_nones_and_its_reason() -> None:
    assert EnergyLike("cpu").close() == {"energy_j": None, "energy_reason": "no NVML energy counter on cpu"}
    assert unmeasured(CpuProbe(), "why") == {"cpu_loop_start_ms": None, "cpu_loop_end_ms": None}  # no reason column


def test_the_clock_opens_probes_in_order_closes_them_in_reverse_and_keeps_every_column() -> None:
    import torch

    from bench.worker.clock import StepClock

    calls: list[str] = []

    class Traced(EnergyLike):
        def open(self) -> None:
            calls.append("energy open")

        def close(self) -> dict[str, Any]:
            calls.append("energy close")
            return super().close()

    def loop_ms() -> float:
        calls.append("cpu")
        return 1.0

    cpu = CpuProbe(measure=loop_ms)
    clock = StepClock(torch.device("cpu"), 1, 3, 2, tokens_per_sample=8, probes=[cpu, Traced("cpu")])
    clock.train_begin()
    for _ in range(3):
        clock.step_end()
    figures = clock.summary()
    assert calls == ["cpu", "energy open", "energy close", "cpu"]
    assert set(COLUMNS) <= set(figures)  # every registered probe's columns, None where not given
    assert list(figures)[-2:] == ["energy_j", "energy_reason"]
    assert figures["cpu_loop_start_ms"] == figures["cpu_loop_end_ms"] == 1.0
    assert figures["gpu_energy_j"] is None
    assert figures["energy_reason"] == "no NVML energy counter on cpu" and figures["cpu_loop_end_ms"] == 1.0
    bare = StepClock(torch.device("cpu"), 0, 1, 2, tokens_per_sample=8)
    bare.train_begin()
    bare.step_end()
    assert {c: bare.summary()[c] for c in COLUMNS} == dict.fromkeys(COLUMNS)  # not given: None, still there
