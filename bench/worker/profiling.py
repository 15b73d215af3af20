"""`profile = N`: N optimizer steps after the timed window under torch.profiler, so the window's
timing stays clean. Writes a Chrome/Perfetto trace beside the row's log (NAME-rN.trace.json, and
-rankK with several ranks; open it in https://ui.perfetto.dev or chrome://tracing), with
`profile_memory` an allocator snapshot beside it (NAME-rN.memory.pickle, for
https://pytorch.org/memory_viz), and gives the kernel time per step by category
(bench/measure/kernels.py) as the row's prof_* columns.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from ..measure.kernels import COLUMNS, NAMES, category

FIGURES = ("prof_steps", "prof_step_ms", *COLUMNS, "prof_trace")


def _self_time_us(event: Any, cuda: bool) -> float:
    if cuda:
        value = getattr(event, "self_device_time_total", None)
        return float(value if value is not None else getattr(event, "self_cuda_time_total", 0.0))
    return float(event.self_cpu_time_total)


def on_device(event: Any) -> bool:
    """A profiled event that ran on the GPU (a kernel), not on the CPU (an operator, a runtime call)."""
    return str(getattr(event, "device_type", "")).endswith("CUDA")


def breakdown(events: Any, steps: int, wall_s: float, cuda: bool) -> dict[str, float]:
    """Per-step ms of each category (NAMES) from a profile's averaged events: on CUDA the kernels'
    device time by kernel name, on the CPU the operators' self CPU time by operator name; idle is
    the wall time no kernel (operator) covered, at least 0."""
    totals = dict.fromkeys(NAMES, 0.0)
    for event in events:
        if on_device(event) != cuda:
            continue
        totals[category(str(event.key))] += _self_time_us(event, cuda) / 1000.0
    per_step = {name: ms / steps for name, ms in totals.items()}
    busy = sum(v for k, v in per_step.items() if k != "idle")
    per_step["idle"] = max(wall_s * 1000.0 / steps - busy, 0.0)
    return per_step


class StepProfiler:
    """Opened by the clock when its window closes; closed after `steps` more optimizer steps."""

    def __init__(self, steps: int, device: torch.device, trace_path: Path, memory: bool = False) -> None:
        self.steps, self.trace_path = steps, trace_path
        self.cuda = device.type == "cuda"
        self.memory = memory and self.cuda
        self._prof: Any = None
        self._t0 = 0.0
        self.events: Any = None  # the profile's averaged events, once stopped

    def start(self) -> None:
        activities = [torch.profiler.ProfilerActivity.CPU]
        if self.cuda:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        if self.memory:
            torch.cuda.memory._record_memory_history(max_entries=100_000)
        self._prof = torch.profiler.profile(activities=activities)
        self._prof.__enter__()
        self._t0 = time.perf_counter()

    def stop(self) -> dict[str, Any]:
        if self.cuda:
            torch.cuda.synchronize()
        wall_s = time.perf_counter() - self._t0
        self._prof.__exit__(None, None, None)
        self.trace_path.parent.mkdir(parents=True, exist_ok=True)
        self._prof.export_chrome_trace(str(self.trace_path))
        if self.memory:
            torch.cuda.memory._dump_snapshot(
                str(self.trace_path.with_name(self.trace_path.name.replace(".trace.json", ".memory.pickle")))
            )
            torch.cuda.memory._record_memory_history(enabled=None)
        self.events = self._prof.key_averages()
        per_step = breakdown(self.events, self.steps, wall_s, self.cuda)
        out: dict[str, Any] = {"prof_steps": self.steps, "prof_step_ms": wall_s * 1000.0 / self.steps}
        out.update({f"prof_{name}_ms": ms for name, ms in per_step.items()})
        out["prof_trace"] = self.trace_path.name
        return out


def trace_path(spec_path: str | None, rank: int | None) -> Path | None:
    """The trace file of this worker: the spec's, with -rankK before the suffix for one rank of many."""
    if not spec_path:
        return None
    path = Path(spec_path)
    if rank is None:
        return path
    return path.with_name(path.name.replace(".trace.json", f"-rank{rank}.trace.json"))
