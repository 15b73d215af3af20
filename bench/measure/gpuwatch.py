"""The GPU over the timed window, per rank: energy, power, SM clock, clocks-event reasons and
activity, read from NVML by the worker that trains (the window probe `GpuProbe`).

- energy: NVML's total-energy counter (nvmlDeviceGetTotalEnergyConsumption, mJ since the driver
  loaded) read at the window's two edges: exact and free. A power integral over the sampled power
  (trapezoids between samples taken at SAMPLE_HZ, the edges included) is its cross-check, and the
  figure where the counter is missing (`gpu_energy_source` says which).
- power: mean and max of the samples (nvmlDeviceGetPowerUsage) and the enforced limit.
- SM clock: median and min of the samples (nvmlDeviceGetClockInfo, SM) beside the GPU's max SM
  clock; every clocks-event reason seen in any sample (nvmlDeviceGetCurrentClocksEventReasons),
  and the share of samples at the power cap.
- activity: NVML GPM (Hopper and later), one sample at each edge of the window, so the figures are
  the window's average: SM active, tensor active, DRAM bandwidth, non-tensor FP32/FP16 pipes. Where
  GPM is missing, NVML's utilization rates (the share of time a kernel ran; coarse) from the
  samples, with `gpu_activity_source` saying which.

The counter and GPM samples are taken on the training thread at the edges, with the device
drained, outside the window (bench/worker/clock.py); the sampler is a daemon thread of the worker
whose NVML calls release the GIL (ctypes). The counters are the GPU's, not the process's: another
process on the same GPU is counted too (the run warns when the GPU is in use at its start).
"""

from __future__ import annotations

import contextlib
import math
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..catalogue import probe_columns

SAMPLE_HZ = 10.0  # power, clock and clocks-event samples a second (docs/methodology.md: its cost)

# nvmlClocksEventReason* bits (nvml.h), in the order they are listed; the GPU idle and the
# applications-clocks setting are not slowdowns and are not reported.
EVENT_BITS = (
    (0x04, "sw_power_cap"),
    (0x08, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal"),
    (0x40, "hw_thermal"),
    (0x80, "hw_power_brake"),
)

# GPM metric ids (nvmlGpmMetricId_t) -> the column each fills
GPM_METRICS = {
    2: "gpu_sm_active_pct",  # NVML_GPM_METRIC_SM_UTIL: share of SMs busy, averaged over time
    5: "gpu_tensor_active_pct",  # NVML_GPM_METRIC_ANY_TENSOR_UTIL
    10: "gpu_dram_bw_pct",  # NVML_GPM_METRIC_DRAM_BW_UTIL: of the theoretical maximum
    12: "gpu_fp32_active_pct",  # NVML_GPM_METRIC_FP32_UTIL: non-tensor FP32 pipe
    13: "gpu_fp16_active_pct",  # NVML_GPM_METRIC_FP16_UTIL: non-tensor FP16 pipe
}


def event_names(bits: int) -> list[str]:
    """The slowdown reasons set in a clocks-event bitmask, in EVENT_BITS order."""
    return [name for bit, name in EVENT_BITS if bits & bit]


def power_integral_j(times_s: Sequence[float], watts: Sequence[float]) -> float | None:
    """Joules under the sampled power curve (trapezoids); None with fewer than two samples."""
    if len(times_s) < 2 or len(times_s) != len(watts):
        return None
    return math.fsum(
        (t1 - t0) * (w0 + w1) / 2 for t0, t1, w0, w1 in zip(times_s, times_s[1:], watts, watts[1:], strict=False)
    )


@dataclass
class Samples:
    """What the sampler thread read: times (s, monotonic), power (W), SM clock (MHz), the
    clocks-event bitmask and NVML utilization (gpu %, memory %) per sample; None where a read failed."""

    times_s: list[float] = field(default_factory=list)
    watts: list[float] = field(default_factory=list)  # with its own times, a failed read leaves a gap
    watt_times_s: list[float] = field(default_factory=list)
    sm_mhz: list[float] = field(default_factory=list)
    events: list[int] = field(default_factory=list)
    util_gpu: list[float] = field(default_factory=list)
    util_mem: list[float] = field(default_factory=list)


def summarise(samples: Samples, window_s: float) -> dict[str, Any]:
    """The sampled columns of a window (power, clock, events, NVML utilization); Nones where no sample."""
    seen = sorted({name for bits in samples.events for name in event_names(bits)}, key=_event_order)
    capped = [bool(bits & 0x04) for bits in samples.events]

    def mean(values: list[float]) -> float | None:
        return math.fsum(values) / len(values) if values else None

    return {
        "gpu_power_mean_w": mean(samples.watts),
        "gpu_power_max_w": max(samples.watts) if samples.watts else None,
        "gpu_sm_clock_median_mhz": statistics.median(samples.sm_mhz) if samples.sm_mhz else None,
        "gpu_sm_clock_min_mhz": min(samples.sm_mhz) if samples.sm_mhz else None,
        "gpu_clock_events": (";".join(seen) or "none") if samples.events else None,
        "gpu_power_capped_pct": 100.0 * sum(capped) / len(capped) if capped else None,
        "gpu_util_pct": mean(samples.util_gpu),
        "gpu_mem_util_pct": mean(samples.util_mem),
        "gpu_samples": len(samples.times_s),
        "gpu_sample_hz": len(samples.times_s) / window_s if window_s > 0 else None,
    }


def _event_order(name: str) -> int:
    return [n for _, n in EVENT_BITS].index(name)


class NvmlReader:
    """The NVML calls the probe makes, on one GPU found by UUID (tests give a fake of this shape)."""

    def __init__(self, uuid: str) -> None:
        import pynvml

        self.nv = pynvml
        pynvml.nvmlInit()
        self.handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)

    def energy_mj(self) -> float | None:
        try:
            return float(self.nv.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except self.nv.NVMLError:
            return None

    def power_w(self) -> float:
        return self.nv.nvmlDeviceGetPowerUsage(self.handle) / 1000.0

    def power_limit_w(self) -> float | None:
        try:
            return self.nv.nvmlDeviceGetEnforcedPowerLimit(self.handle) / 1000.0
        except self.nv.NVMLError:
            return None

    def sm_mhz(self) -> float:
        return float(self.nv.nvmlDeviceGetClockInfo(self.handle, self.nv.NVML_CLOCK_SM))

    def max_sm_mhz(self) -> float | None:
        try:
            return float(self.nv.nvmlDeviceGetMaxClockInfo(self.handle, self.nv.NVML_CLOCK_SM))
        except self.nv.NVMLError:
            return None

    def events(self) -> int:
        get = getattr(self.nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
        get = get or self.nv.nvmlDeviceGetCurrentClocksThrottleReasons  # older nvidia-ml-py
        return int(get(self.handle))

    def utilization(self) -> tuple[float, float]:
        rates = self.nv.nvmlDeviceGetUtilizationRates(self.handle)
        return float(rates.gpu), float(rates.memory)

    def gpm_supported(self) -> bool:
        try:
            return bool(self.nv.nvmlGpmQueryDeviceSupport(self.handle).isSupportedDevice)
        except (self.nv.NVMLError, AttributeError):
            return False

    def gpm_sample(self) -> Any:
        sample = self.nv.nvmlGpmSampleAlloc()
        return self.nv.nvmlGpmSampleGet(self.handle, sample)

    def gpm_metrics(self, first: Any, second: Any, ids: Sequence[int]) -> dict[int, float | None]:
        nv = self.nv
        request = nv.c_nvmlGpmMetricsGet_t()
        request.version = nv.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(ids)
        request.sample1, request.sample2 = first, second
        for i, metric in enumerate(ids):
            request.metrics[i].metricId = metric
        nv.nvmlGpmMetricsGet(request)
        out: dict[int, float | None] = {}
        for i, metric in enumerate(ids):
            entry = request.metrics[i]
            out[metric] = float(entry.value) if entry.nvmlReturn == nv.NVML_SUCCESS else None
        for sample in (first, second):
            nv.nvmlGpmSampleFree(sample)
        return out


def cuda_uuid(device: str) -> str | None:
    """The UUID NVML knows the torch device `device` ("cuda:0") by; None for a CPU device."""
    if not device.startswith("cuda"):
        return None
    import torch

    index = int(device.split(":", 1)[1]) if ":" in device else torch.cuda.current_device()
    return "GPU-" + str(torch.cuda.get_device_properties(index).uuid)


class GpuProbe:
    """Energy, power, clocks and activity of the GPU `device` over the window (see the module's
    docstring). On the CPU, or where NVML cannot be opened, every column is None and
    `gpu_reason` says why; a column NVML cannot fill on this GPU is None, never zero."""

    name: ClassVar[str] = "gpu"
    columns: ClassVar[tuple[str, ...]] = probe_columns("gpu")  # its rows in bench/catalogue.py

    def __init__(self, device: str, reader: Any = None, hz: float = SAMPLE_HZ) -> None:
        self.device, self.interval = device, 1.0 / hz
        self.reason = ""
        self.reader = reader
        if self.reader is None:
            try:
                uuid = cuda_uuid(device)
                self.reader = NvmlReader(uuid) if uuid else None
                self.reason = "" if uuid else f"no GPU: the worker trains on {device}"
            except Exception as exc:  # ImportError, NVMLError: a row without these figures, never a failed row
                self.reason = f"NVML not usable: {type(exc).__name__}: {exc}"
        self.samples = Samples()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._energy0: float | None = None
        self._gpm0: Any = None
        self._t0 = 0.0

    def open(self) -> None:
        if self.reader is None:
            return
        self._gpm0 = self._gpm_sample()
        self._energy0 = self.reader.energy_mj()
        self._t0 = time.monotonic()
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="gpu-window-sampler", daemon=True)
        self._thread.start()

    def _gpm_sample(self) -> Any:
        try:
            return self.reader.gpm_sample() if self.reader.gpm_supported() else None
        except Exception:
            return None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        """One sample of each figure; a failed read leaves a gap, not a wrong zero."""
        s, reader, now = self.samples, self.reader, time.monotonic()
        s.times_s.append(now)
        with contextlib.suppress(Exception):
            watts = reader.power_w()
            s.watts.append(watts)
            s.watt_times_s.append(now)
        with contextlib.suppress(Exception):
            s.sm_mhz.append(reader.sm_mhz())
        with contextlib.suppress(Exception):
            s.events.append(reader.events())
        with contextlib.suppress(Exception):
            gpu, mem = reader.utilization()
            s.util_gpu.append(gpu)
            s.util_mem.append(mem)

    def close(self) -> dict[str, Any]:
        if self.reader is None:  # as probes.unmeasured: every column None, the reason in gpu_reason
            return dict.fromkeys(self.columns) | {"gpu_reason": self.reason}
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._sample()
        energy1 = self.reader.energy_mj()
        window_s = time.monotonic() - self._t0
        out: dict[str, Any] = dict.fromkeys(self.columns)
        out.update(summarise(self.samples, window_s))
        out["gpu_power_limit_w"] = self.reader.power_limit_w()
        out["gpu_sm_clock_max_mhz"] = self.reader.max_sm_mhz()
        sampled = power_integral_j(self.samples.watt_times_s, self.samples.watts)
        out["gpu_energy_sampled_j"] = sampled
        missing: list[str] = []
        if self._energy0 is not None and energy1 is not None:
            out["gpu_energy_j"], out["gpu_energy_source"] = (energy1 - self._energy0) / 1000.0, "nvml-counter"
        elif sampled is not None:
            out["gpu_energy_j"], out["gpu_energy_source"] = sampled, "power-integral"
            missing.append("no NVML energy counter: energy from the sampled power")
        else:
            missing.append("no NVML energy counter and too few power samples")
        out.update(self._activity(missing))
        out["gpu_reason"] = "; ".join(missing)
        return out

    def _activity(self, missing: list[str]) -> dict[str, Any]:
        if self._gpm0 is not None:
            second = self._gpm_sample()
            if second is not None:
                try:
                    values = self.reader.gpm_metrics(self._gpm0, second, tuple(GPM_METRICS))
                    return {"gpu_activity_source": "gpm"} | {GPM_METRICS[k]: v for k, v in values.items()}
                except Exception as exc:
                    missing.append(f"GPM metrics unreadable ({type(exc).__name__}): NVML utilization instead")
        else:
            missing.append("no NVML GPM on this GPU: activity from NVML utilization rates")
        return {"gpu_activity_source": "nvml-utilization" if self.samples.util_gpu else None}


def per_work(figures: dict[str, Any]) -> dict[str, float | None]:
    """What the window's energy buys: joules per sample and per token, samples per kWh (None where
    the energy or the work is unknown)."""
    energy = figures.get("gpu_energy_j")
    samples = figures.get("window_samples")
    tokens_per_s, window_s = figures.get("tokens_per_s"), figures.get("window_s")
    out: dict[str, float | None] = {"energy_per_sample_j": None, "energy_per_token_j": None, "samples_per_kwh": None}
    if not isinstance(energy, int | float) or not math.isfinite(energy) or energy <= 0:
        return out
    if isinstance(samples, int | float) and samples > 0:
        out["energy_per_sample_j"] = energy / samples
        out["samples_per_kwh"] = samples / (energy / 3.6e6)
    if isinstance(tokens_per_s, int | float) and isinstance(window_s, int | float) and tokens_per_s * window_s > 0:
        out["energy_per_token_j"] = energy / (tokens_per_s * window_s)
    return out
