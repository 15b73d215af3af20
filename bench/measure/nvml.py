"""GPU memory from NVML, sampled from a thread of the parent process (never the training thread).

Two figures per run, each named by its source:
- per process: the sum of `usedGpuMemory` over the worker's process group, from
  nvmlDeviceGetComputeRunningProcesses (torch reserved + CUDA context + non-torch allocations);
- device-wide: nvmlDeviceGetMemoryInfo().used minus the idle level read just before the worker
  started (includes anything else on the GPU; the fallback where PIDs cannot be matched, e.g. in a
  container with its own PID namespace).
The device is found by the UUID torch reports, never by index (NVML and CUDA number GPUs differently).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any

MB = 1024 * 1024


@dataclass(frozen=True)
class MemoryPeaks:
    process_peak_mb: float | None  # None when no NVML process matched the worker
    device_peak_mb: float  # device-wide used peak minus idle
    idle_mb: float
    samples: int
    sample_hz: float

    @property
    def peak_mb(self) -> float:
        return self.process_peak_mb if self.process_peak_mb is not None else self.device_peak_mb

    @property
    def source(self) -> str:
        return "nvml-process" if self.process_peak_mb is not None else "nvml-device-minus-idle"


class Nvml:
    """A handle on one GPU, found by UUID."""

    def __init__(self, uuid: str) -> None:
        import pynvml

        self._nv = pynvml
        pynvml.nvmlInit()
        self.handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)

    def used_mb(self) -> float:
        return self._nv.nvmlDeviceGetMemoryInfo(self.handle).used / MB

    def processes(self) -> list[tuple[int, float | None]]:
        procs = self._nv.nvmlDeviceGetComputeRunningProcesses(self.handle)
        return [(p.pid, (p.usedGpuMemory / MB) if p.usedGpuMemory is not None else None) for p in procs]

    def describe(self) -> dict[str, Any]:
        nv = self._nv

        def text(value: Any) -> str:
            return value.decode() if isinstance(value, bytes) else str(value)

        major, minor = nv.nvmlDeviceGetCudaComputeCapability(self.handle)
        return {
            "name": text(nv.nvmlDeviceGetName(self.handle)),
            "uuid": text(nv.nvmlDeviceGetUUID(self.handle)),
            "driver": text(nv.nvmlSystemGetDriverVersion()),
            "memory_total_mb": nv.nvmlDeviceGetMemoryInfo(self.handle).total / MB,
            "capability": f"{major}.{minor}",
            "nvml_cuda_driver": nv.nvmlSystemGetCudaDriverVersion_v2(),
        }


def open_nvml(uuid: str | None) -> tuple[Nvml | None, str]:
    """(handle, "") or (None, why): a broken or missing NVML must not stop a run; memory then
    comes from torch's allocator alone, and the rows say so in peak_mem_source."""
    if not uuid:
        return None, "no GPU"
    try:
        return Nvml(uuid), ""
    except Exception as exc:  # ImportError, NVMLError (driver/library mismatch, no permission)
        return None, f"{type(exc).__name__}: {exc}"


class MemorySampler:
    """Samples a worker's GPU memory at `hz` from a background thread until stopped."""

    def __init__(self, nvml: Nvml, hz: float = 200.0) -> None:
        self.nvml, self.interval = nvml, 1.0 / hz
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pgid: int | None = None
        self.idle_mb = 0.0
        self._process_peak: float | None = None
        self._device_peak = 0.0
        self._samples = 0
        self._t0 = 0.0

    def start(self, pid: int) -> None:
        self._pgid = pid  # the worker leads its own process group (start_new_session)
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="nvml-sampler", daemon=True)
        self._thread.start()

    def _belongs(self, pid: int) -> bool:
        try:
            return os.getpgid(pid) == self._pgid
        except (ProcessLookupError, PermissionError):
            return False

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def _sample(self) -> None:
        try:
            used = self.nvml.used_mb()
            mine = [mb for pid, mb in self.nvml.processes() if mb is not None and self._belongs(pid)]
        except Exception:  # NVML hiccup: skip this sample
            return
        self._device_peak = max(self._device_peak, used - self.idle_mb)
        if mine:
            total = sum(mine)
            self._process_peak = total if self._process_peak is None else max(self._process_peak, total)
        self._samples += 1

    def stop(self) -> MemoryPeaks:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        elapsed = max(time.monotonic() - self._t0, 1e-9)
        return MemoryPeaks(
            process_peak_mb=self._process_peak,
            device_peak_mb=max(self._device_peak, 0.0),
            idle_mb=self.idle_mb,
            samples=self._samples,
            sample_hz=self._samples / elapsed,
        )


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # the field after the command name


class TreeSampler:
    """A multi-process scenario's GPU memory: one MemorySampler-like watch over several GPUs, counting
    the processes descended from torchrun (each rank leads a session of its own, so the process
    group does not find them). Per GPU: the process peak and the device peak minus idle."""

    def __init__(self, handles: list[Nvml], hz: float = 100.0) -> None:
        self.handles, self.interval = handles, 1.0 / hz
        self.idle_mb = [h.used_mb() for h in handles]
        self._root: int | None = None
        self._mine: dict[int, bool] = {}
        self._process_peak: list[float | None] = [None] * len(handles)
        self._device_peak = [0.0] * len(handles)
        self._samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def start(self, pid: int) -> None:
        self._root, self._t0 = pid, time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="nvml-tree-sampler", daemon=True)
        self._thread.start()

    def _belongs(self, pid: int) -> bool:
        if pid not in self._mine:
            seen, current = 0, pid
            while current is not None and current > 1 and current != self._root and seen < 32:
                parent = _parent(current)
                if parent is None:
                    break
                current, seen = parent, seen + 1
            self._mine[pid] = current == self._root
        return self._mine[pid]

    def _loop(self) -> None:
        while not self._stop.is_set():
            for i, handle in enumerate(self.handles):
                try:
                    used = handle.used_mb()
                    mine = [mb for pid, mb in handle.processes() if mb is not None and self._belongs(pid)]
                except Exception:
                    continue
                self._device_peak[i] = max(self._device_peak[i], used - self.idle_mb[i])
                if mine:
                    peak = self._process_peak[i]
                    self._process_peak[i] = sum(mine) if peak is None else max(peak, sum(mine))
            self._samples += 1
            self._stop.wait(self.interval)

    def stop(self) -> list[MemoryPeaks]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        hz = self._samples / max(time.monotonic() - self._t0, 1e-9)
        return [
            MemoryPeaks(self._process_peak[i], max(self._device_peak[i], 0.0), self.idle_mb[i], self._samples, hz)
            for i in range(len(self.handles))
        ]
