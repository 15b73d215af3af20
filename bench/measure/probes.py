"""Window probes: measurements taken at the two edges of a worker's timed window (the shape of
zeus's begin_window / end_window, ml-energy/zeus zeus/monitor/energy.py).

The step clock (bench/worker/clock.py) opens every probe at the start of the window and closes
them at its end, each time with the device drained (and, with several ranks, after the barrier),
outside the timed span: a probe's own time counts in neither the window nor its steps. Probes open
in PROBES order and close in reverse, so the first (the CPU probe) is the outermost. `close`
returns the probe's result columns, exactly its declared `columns`; a probe that cannot measure
here returns None for each (`unmeasured`), with why in a `<name>_reason` column where it declares
one. The clock's figures hold every registered probe's columns, None where a probe was not given,
so a row has the same columns wherever it ran. Adding a probe: docs/extending.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Protocol

from ..catalogue import probe_columns
from .cpuspeed import window_probe_ms
from .gpuwatch import GpuProbe


class WindowProbe(Protocol):
    """One measurement over the timed window; built once per window with the torch device string
    the worker trains on ("cpu", "cuda:0")."""

    name: ClassVar[str]  # a prefix of its columns
    columns: ClassVar[
        tuple[str, ...]
    ]  # the results columns close() returns, in order: its catalogue rows' (probe=name)

    def __init__(self, device: str) -> None: ...

    def open(self) -> None:
        """At the window's start, the device drained."""

    def close(self) -> dict[str, Any]:
        """At the window's end, the device drained: {column: value} for each of `columns`."""
        ...


def unmeasured(probe: WindowProbe, reason: str) -> dict[str, Any]:
    """The columns of a probe that measured nothing: None each, and `reason` in its `<name>_reason`
    column when it declares one."""
    out: dict[str, Any] = dict.fromkeys(probe.columns)
    if f"{probe.name}_reason" in out:
        out[f"{probe.name}_reason"] = reason
    return out


class CpuProbe:
    """The fixed CPU loop (bench/measure/cpuspeed.py) timed on the training thread just before the
    window opens and just after it closes: how fast the CPU that launches the kernels was around
    this window, which a launch-bound step follows. It measures wherever it runs."""

    name: ClassVar[str] = "cpu_loop"
    columns: ClassVar[tuple[str, ...]] = probe_columns("cpu_loop")  # cpu_loop_start_ms, cpu_loop_end_ms

    def __init__(self, device: str = "cpu", measure: Callable[[], float] = window_probe_ms) -> None:
        self.measure = measure  # ms of the loop on the calling thread, now
        self.start_ms: float | None = None

    def open(self) -> None:
        self.start_ms = self.measure()

    def close(self) -> dict[str, Any]:
        return {"cpu_loop_start_ms": self.start_ms, "cpu_loop_end_ms": self.measure()}


# Every window probe a worker takes, in opening order: the CPU probe first (outermost), then the
# GPU's energy, power, clocks and activity (bench/measure/gpuwatch.py), opened closest to the window.
PROBES: tuple[type[WindowProbe], ...] = (CpuProbe, GpuProbe)
COLUMNS: tuple[str, ...] = tuple(column for probe in PROBES for column in probe.columns)


def make_probes(device: str) -> list[WindowProbe]:
    """A fresh probe of each kind in PROBES, for one window on `device`."""
    return [probe(device) for probe in PROBES]
