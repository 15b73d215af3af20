"""The GPU window probe (bench/measure/gpuwatch.py) on a fake NVML, its arithmetic, how ranks
combine its figures, and the bound label read from them (bench/results/bound.py)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.measure import gpuwatch
from bench.measure.gpuwatch import EVENT_BITS, GpuProbe, event_names, per_work, power_integral_j
from bench.results import bound
from bench.worker.ranks import combine_ranks


class FakeNvml:
    """NvmlReader's shape: a counter that climbs 700 J a read, 700 W, 1,500 MHz at the power cap."""

    def __init__(self, energy: bool = True, gpm: bool = True, events: int = 0x04) -> None:
        self.energy, self.gpm, self.bits = energy, gpm, events
        self.counter = 1_000_000.0
        self.freed: list[Any] = []

    def energy_mj(self) -> float | None:
        if not self.energy:
            return None
        self.counter += 700_000.0
        return self.counter

    def power_w(self) -> float:
        return 700.0

    def power_limit_w(self) -> float:
        return 700.0

    def sm_mhz(self) -> float:
        return 1500.0

    def max_sm_mhz(self) -> float:
        return 1980.0

    def events(self) -> int:
        return self.bits

    def utilization(self) -> tuple[float, float]:
        return 97.0, 40.0

    def gpm_supported(self) -> bool:
        return self.gpm

    def gpm_sample(self) -> object:
        return object()

    def gpm_metrics(self, first: Any, second: Any, ids: Any) -> dict[int, float | None]:
        return {2: 91.0, 5: 63.0, 10: 22.0, 12: 4.0, 13: None}


def test_on_the_cpu_every_column_is_empty_with_a_reason_never_zero() -> None:
    probe = GpuProbe("cpu")
    probe.open()
    out = probe.close()
    assert list(out) == list(GpuProbe.columns)
    assert out["gpu_reason"] == "no GPU: the worker trains on cpu"
    assert all(v is None for k, v in out.items() if k != "gpu_reason")


def test_energy_comes_from_the_counter_and_the_power_integral_checks_it() -> None:
    probe = GpuProbe("cuda:0", reader=FakeNvml(), hz=200.0)
    probe.open()
    out = probe.close()
    assert out["gpu_energy_source"] == "nvml-counter"
    assert out["gpu_energy_j"] == pytest.approx(700.0)  # one read at each edge
    assert out["gpu_energy_sampled_j"] is not None and out["gpu_energy_sampled_j"] >= 0
    assert out["gpu_power_mean_w"] == out["gpu_power_max_w"] == 700.0
    assert (out["gpu_sm_clock_median_mhz"], out["gpu_sm_clock_min_mhz"], out["gpu_sm_clock_max_mhz"]) == (
        1500.0,
        1500.0,
        1980.0,
    )
    assert out["gpu_clock_events"] == "sw_power_cap" and out["gpu_power_capped_pct"] == 100.0
    assert out["gpu_activity_source"] == "gpm"
    assert (out["gpu_sm_active_pct"], out["gpu_tensor_active_pct"], out["gpu_dram_bw_pct"]) == (91.0, 63.0, 22.0)
    assert out["gpu_fp16_active_pct"] is None  # a metric GPM did not give stays empty, not zero
    assert out["gpu_samples"] >= 2 and out["gpu_reason"] == ""


def test_without_the_counter_energy_is_the_power_integral_and_the_row_says_so() -> None:
    probe = GpuProbe("cuda:0", reader=FakeNvml(energy=False, gpm=False, events=0), hz=200.0)
    probe.open()
    out = probe.close()
    assert out["gpu_energy_source"] == "power-integral"
    assert out["gpu_energy_j"] == out["gpu_energy_sampled_j"]
    assert out["gpu_activity_source"] == "nvml-utilization" and out["gpu_util_pct"] == 97.0
    assert out["gpu_sm_active_pct"] is None
    assert "no NVML energy counter" in out["gpu_reason"] and "no NVML GPM" in out["gpu_reason"]
    assert out["gpu_clock_events"] == "none"  # sampled, none seen (an empty cell would read as missing)


@given(st.integers(min_value=0, max_value=0xFFFF))
def test_event_names_are_the_bits_set(bits: int) -> None:
    names = event_names(bits)
    assert names == [name for bit, name in EVENT_BITS if bits & bit]
    assert "gpu_idle" not in names  # idle (0x1) and the applications clocks (0x2) are not slowdowns


@given(
    st.floats(min_value=0.0, max_value=1500.0),
    st.lists(st.floats(min_value=0.001, max_value=1.0), min_size=1, max_size=50),
)
def test_the_integral_of_a_constant_power_is_power_times_time(watts: float, gaps: list[float]) -> None:
    times = [0.0]
    for gap in gaps:
        times.append(times[-1] + gap)
    assert power_integral_j(times, [watts] * len(times)) == pytest.approx(watts * times[-1], rel=1e-9, abs=1e-9)
    assert power_integral_j(times[:1], [watts]) is None


@given(
    st.floats(min_value=1e-3, max_value=1e7),
    st.integers(min_value=1, max_value=10**7),
    st.floats(min_value=1.0, max_value=1e6),
)
def test_what_the_energy_buys(energy: float, samples: int, tokens_per_sample: float) -> None:
    window_s = 10.0
    figures = {
        "gpu_energy_j": energy,
        "window_samples": samples,
        "window_s": window_s,
        "tokens_per_s": samples * tokens_per_sample / window_s,
    }
    out = per_work(figures)
    assert out["energy_per_sample_j"] * samples == pytest.approx(energy)
    assert out["samples_per_kwh"] * out["energy_per_sample_j"] == pytest.approx(3.6e6)
    assert out["energy_per_token_j"] * samples * tokens_per_sample == pytest.approx(energy)


@pytest.mark.parametrize("energy", [None, 0.0, -1.0, math.nan, math.inf, "x"])
def test_no_energy_buys_nothing(energy: Any) -> None:
    assert set(per_work({"gpu_energy_j": energy, "window_samples": 10}).values()) == {None}


def test_ranks_add_their_energy_and_power_keep_the_lowest_clock_and_every_event() -> None:
    ranks = [
        {"window_s": 2.0, "window_samples": 10, "loss_finite": True, "gpu_energy_j": 1400.0, "gpu_power_mean_w": 700.0,
         "gpu_power_max_w": 705.0, "gpu_sm_clock_min_mhz": 1400.0, "gpu_sm_clock_median_mhz": 1500.0,
         "gpu_sm_active_pct": 90.0, "gpu_clock_events": "sw_power_cap"},
        {"window_s": 2.0, "window_samples": 10, "loss_finite": True, "gpu_energy_j": 1300.0, "gpu_power_mean_w": 650.0,
         "gpu_power_max_w": 690.0, "gpu_sm_clock_min_mhz": 1300.0, "gpu_sm_clock_median_mhz": 1550.0,
         "gpu_sm_active_pct": 80.0, "gpu_clock_events": "hw_thermal;sw_power_cap"},
    ]  # fmt: skip
    out = combine_ranks(ranks, "trainer")
    assert out["gpu_energy_j"] == 2700.0 and out["gpu_power_mean_w"] == 1350.0 and out["gpu_power_max_w"] == 705.0
    assert out["gpu_sm_clock_min_mhz"] == 1300.0 and out["gpu_sm_clock_median_mhz"] == 1500.0
    assert out["gpu_sm_active_pct"] == 85.0
    assert out["gpu_clock_events"] == "hw_thermal;sw_power_cap"
    assert per_work(out)["energy_per_sample_j"] == 135.0  # the job's energy over the job's samples
    cpu = combine_ranks([{"window_s": 1.0, "window_samples": 1, "loss_finite": True}] * 2, "trainer")
    assert cpu["gpu_energy_j"] is None and cpu["gpu_clock_events"] is None


# -- the bound label -----------------------------------------------------------------------------
GPM = {"gpu_activity_source": "gpm"}


@pytest.mark.parametrize(
    ("figures", "expected"),
    [
        ({"gpu_sm_active_pct": 95, "gpu_tensor_active_pct": 70, "gpu_dram_bw_pct": 30}, "compute-bound"),
        ({"gpu_sm_active_pct": 95, "gpu_tensor_active_pct": 0, "gpu_fp32_active_pct": 55}, "compute-bound"),
        ({"gpu_sm_active_pct": 90, "gpu_tensor_active_pct": 10, "gpu_dram_bw_pct": 75}, "memory-bound"),
        ({"gpu_sm_active_pct": 20, "gpu_tensor_active_pct": 15, "gpu_dram_bw_pct": 5}, "launch-bound"),
        ({"gpu_sm_active_pct": 80, "gpu_tensor_active_pct": 20, "gpu_dram_bw_pct": 30}, "mixed"),
        ({"gpu_sm_active_pct": 95, "gpu_tensor_active_pct": 70, "gpu_clock_events": "sw_power_cap"}, "compute-bound"),
        ({"gpu_sm_active_pct": 95, "gpu_tensor_active_pct": 70, "gpu_clock_events": "hw_thermal"}, "throttled"),
        ({"gpu_util_pct": 40.0}, "launch-bound"),  # no GPM: NVML utilization
        ({"gpu_util_pct": 99.0}, "mixed"),
    ],
)
def test_the_label_table(figures: dict[str, Any], expected: str) -> None:
    found, basis = bound.label(GPM | figures)
    assert found == expected and basis


def test_no_figures_no_label_and_the_reason() -> None:
    assert bound.label({"gpu_reason": "no GPU: the worker trains on cpu"}) == (None, "no GPU: the worker trains on cpu")


pct = st.one_of(st.none(), st.floats(min_value=0, max_value=100), st.just(math.nan))


@given(pct, pct, pct, pct, pct, st.sampled_from(["", "sw_power_cap", "hw_slowdown", "sync_boost;sw_thermal", None]))
def test_any_figures_give_one_known_label_or_none(
    sm: Any, tensor: Any, fp32: Any, dram: Any, util: Any, events: Any
) -> None:
    row = {"gpu_sm_active_pct": sm, "gpu_tensor_active_pct": tensor, "gpu_fp32_active_pct": fp32,
           "gpu_dram_bw_pct": dram, "gpu_util_pct": util, "gpu_clock_events": events}  # fmt: skip
    found, basis = bound.label(row)
    assert found is None or found in bound.LABELS
    assert isinstance(basis, str) and basis
    if events and any(e in bound.THROTTLES for e in events.split(";")):
        assert found == "throttled"
    elif isinstance(sm, float) and not math.isnan(sm) and sm < bound.LAUNCH_SM_PCT:
        assert found == "launch-bound"


def test_steadiness_flags_spread_steps_and_a_shifted_cpu() -> None:
    steady = {"step_time_p10_ms": 100.0, "step_time_p90_ms": 110.0, "cpu_loop_start_ms": 10.0, "cpu_loop_end_ms": 11.0}
    assert bound.steadiness(steady) == ""
    spread = steady | {"step_time_p90_ms": 200.0}
    assert bound.steadiness(spread).startswith("unsteady steps")
    shifted = steady | {"cpu_loop_end_ms": 20.0}
    assert "CPU speed shifted" in bound.steadiness(shifted)
    assert (
        "unsteady"
        in bound.columns(GPM | spread | {"gpu_sm_active_pct": 95.0, "gpu_tensor_active_pct": 80})["bound_basis"]
    )


def test_the_sampler_thread_is_gone_after_close() -> None:
    import threading

    probe = GpuProbe("cuda:0", reader=FakeNvml(), hz=500.0)
    probe.open()
    probe.close()
    assert not any(t.name == "gpu-window-sampler" for t in threading.enumerate())
    assert gpuwatch.SAMPLE_HZ <= 20  # the cost measured in docs/methodology.md is at this rate


def test_at_the_power_cap_a_busy_row_is_compute_bound() -> None:
    # bert-large bf16 batch 32 on the H200 (validation/gpu_probe_cost's last window)
    row = GPM | {"gpu_sm_active_pct": 86.1, "gpu_tensor_active_pct": 32.5, "gpu_dram_bw_pct": 38.9}
    row |= {"gpu_power_capped_pct": 100.0, "gpu_sm_clock_median_mhz": 1875.0, "gpu_clock_events": "sw_power_cap"}
    found, basis = bound.label(row)
    assert found == "compute-bound" and "power cap" in basis and "1875 MHz" in basis
    assert bound.label(row | {"gpu_power_capped_pct": 10.0})[0] == "mixed"


def test_a_cpu_shift_is_named_only_where_the_steps_follow_the_cpu() -> None:
    shifted = {"cpu_loop_start_ms": 10.0, "cpu_loop_end_ms": 18.0, "step_time_p10_ms": 10.0, "step_time_p90_ms": 11.0}
    assert bound.steadiness(shifted, "compute-bound") == ""
    assert "CPU speed shifted" in bound.steadiness(shifted, "launch-bound")
    assert "CPU speed shifted" in bound.steadiness(shifted)  # no GPU figures: the CPU's own row
