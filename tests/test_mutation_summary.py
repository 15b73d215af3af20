"""The per-scenario summary and the bound label, where a wrong operator would change a figure unseen
(make mutation): the label most repeats got (not its count), the loss of the ok repeats only, the
medians and spreads, the cost per billion tokens, the worst failure, and each rule of the label."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest

from bench.results import bound, to_frame
from bench.results.summary import (
    UNDIVIDED_NOTE,
    noise_label,
    row_cpu_loop_ms,
    scenario_status,
    summarize,
    window_cpu_loop_ms,
    worst_failure,
)


def row(scenario: str, repeat: int = 0, status: str = "ok", **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "scenario": scenario,
        "repeat": repeat,
        "status": status,
        "error": "",
        "samples_per_s": 100.0,
        "peak_mem_mb": 500.0,
        "peak_mem_source": "rss",
    }
    return {**base, **extra}


def one(rows: list[dict[str, Any]], name: str = "a") -> pd.Series:
    return summarize(to_frame(rows)).set_index("scenario").loc[name]


def test_the_bound_is_the_label_most_ok_repeats_got() -> None:
    s = one(
        [
            row("a", 0, bound="memory-bound"),
            row("a", 1, bound="compute-bound"),
            row("a", 2, bound="compute-bound"),
            row("a", 3, status="oom", bound="memory-bound", samples_per_s=None),
            row("a", 4, status="oom", bound="memory-bound", samples_per_s=None),
        ]
    )
    assert s["bound"] == "compute-bound"
    assert one([row("a")])["bound"] == ""


def test_the_final_window_loss_and_the_loss_are_the_ok_repeats_medians() -> None:
    s = one(
        [
            row("a", 0, final_window_loss=2.0, final_loss=2.5),
            row("a", 1, final_window_loss=3.0, final_loss=3.5),
            row("a", 2, status="diverged", final_window_loss=90.0, final_loss=99.0),
            row("a", 3, status="diverged", final_window_loss=91.0, final_loss=99.0),
        ]
    )
    assert s["final_window_loss"] == 2.5 and s["final_loss"] == 3.0
    assert s["status"] == "diverged" and (s["ok"], s["repeats"]) == (2, 4)
    failed = one([row("a", 0, status="diverged", final_window_loss=90.0, samples_per_s=None)])
    assert math.isnan(failed["final_window_loss"]) and math.isnan(failed["samples_per_s"])


def test_the_parity_of_a_scenario_is_its_worst_rows() -> None:
    s = one(
        [
            row("a", 0, parity="equivalent", parity_delta=0.1, parity_band=0.5, parity_ref="baseline"),
            row("a", 1, parity="deviates", parity_delta=0.7, parity_band=0.3, parity_ref="baseline"),
            row("a", 2, parity="", parity_delta=9.0, parity_band=9.0),
        ]
    )
    assert (s["parity"], s["parity_ref"]) == ("deviates", "baseline")
    assert s["parity_delta"] == pytest.approx(0.4) and s["parity_band"] == pytest.approx(0.4)
    none = one([row("a")])
    assert none["parity"] == "" and math.isnan(none["parity_delta"]) and none["parity_ref"] == ""


def test_the_medians_the_spread_and_the_change_vs_the_baseline() -> None:
    frame = to_frame(
        [
            row("baseline", 0, samples_per_s=100.0, mfu=0.2, world_size=2, energy_per_sample_j=4.0),
            row("baseline", 1, samples_per_s=120.0, mfu=0.4, world_size=2, energy_per_sample_j=6.0),
            row("b", 0, samples_per_s=330.0, peak_mem_mb=250.0, energy_per_sample_j=2.5, mfu_ceiling=0.5),
        ]
    )
    s = summarize(frame).set_index("scenario")
    assert s.loc["baseline", "samples_per_s"] == 110.0
    assert s.loc["baseline", "samples_per_s_cv_pct"] == pytest.approx(math.sqrt(200) / 110 * 100)
    assert math.isnan(s.loc["b", "samples_per_s_cv_pct"])
    assert s.loc["baseline", "mfu"] == pytest.approx(0.3) and s.loc["baseline", "world_size"] == 2
    assert s.loc["b", "samples_per_s_vs_baseline_pct"] == pytest.approx(200.0)
    assert s.loc["b", "peak_mem_mb_vs_baseline_pct"] == pytest.approx(-50.0)
    assert s.loc["b", "energy_per_sample_j_vs_baseline_pct"] == pytest.approx(-50.0)
    assert s.loc["b", "mfu_ceiling"] == 0.5 and s.loc["baseline", "samples_per_s_vs_baseline_pct"] == 0.0
    assert s.loc["b", "peak_mem_source"] == "rss"
    alone = summarize(to_frame([row("b")]))
    assert math.isnan(alone["samples_per_s_vs_baseline_pct"][0])


def test_the_cost_of_a_billion_tokens() -> None:
    s = one([row("a", tokens_per_s=1e6, energy_per_token_j=0.36, world_size=4)])
    assert s["hours_per_1b_tokens"] == pytest.approx(1e9 / 1e6 / 3600)
    assert s["gpu_hours_per_1b_tokens"] == pytest.approx(4 * 1e9 / 1e6 / 3600)
    assert s["kwh_per_1b_tokens"] == pytest.approx(0.36 * 1e9 / 3.6e6)
    single = one([row("a", tokens_per_s=2e6)])
    assert single["gpu_hours_per_1b_tokens"] == pytest.approx(single["hours_per_1b_tokens"])
    assert math.isnan(one([row("a")])["hours_per_1b_tokens"])


def test_the_training_note_and_the_first_error() -> None:
    s = one(
        [
            row("a", 0, loss_accum_divided=False, eval_note="no labels"),
            row("a", 1, status="oom", error="CUDA out of memory", samples_per_s=None),
            row("a", 2, status="error", error="later", samples_per_s=None),
        ]
    )
    assert s["training_note"] == f"{UNDIVIDED_NOTE}; no held-out accuracy: no labels"
    assert s["error"] == "CUDA out of memory" and s["status"] == "oom"
    assert one([row("a", loss_accum_divided=True)])["training_note"] == ""


def test_statuses() -> None:
    assert worst_failure(["ok", "oom", "crashed"]) == "crashed" and worst_failure({"ok"}) is None
    assert scenario_status(None) == "absent"
    assert scenario_status(pd.DataFrame({"status": ["ok", "skipped"]})) == "ok"
    assert scenario_status(pd.DataFrame({"status": ["skipped"]})) == "skipped"
    assert scenario_status(pd.DataFrame({"status": ["ok", "timeout"]})) == "timeout"
    assert one([row("a", status="skipped", samples_per_s=None)])["status"] == "skipped"
    assert one([row("a", 0), row("a", 1)])["status"] == "ok"


def test_the_noise_labels_name_their_count() -> None:
    assert noise_label([1.0], [1.0, 2.0, 3.0]) == "1 run"
    assert noise_label([20.0, 21.0], [1.0, 2.0, 3.0]) == "2 runs"
    assert noise_label([10.0, 10.1, 10.2], [1.0, 1.1, 1.2]) == "beyond"


def test_the_cpu_loop_around_the_window() -> None:
    assert row_cpu_loop_ms({"cpu_loop_start_ms": 2.0, "cpu_loop_end_ms": 4.0}) == 3.0
    assert row_cpu_loop_ms({"cpu_loop_start_ms": 2.0, "cpu_loop_end_ms": math.inf}) is None
    assert row_cpu_loop_ms({"cpu_loop_start_ms": 2.0}) is None
    frame = pd.DataFrame({"cpu_loop_start_ms": [2.0, 1.0], "cpu_loop_end_ms": [4.0, None]})
    got = window_cpu_loop_ms(frame)
    assert got[0] == 3.0 and math.isnan(got[1])
    assert window_cpu_loop_ms(pd.DataFrame({"cpu_loop_start_ms": [1.0]})).isna().all()


# -- the bound label ------------------------------------------------------------------------------------
GPM = {"gpu_sm_active_pct": 90.0, "gpu_tensor_active_pct": 10.0, "gpu_fp32_active_pct": 5.0, "gpu_dram_bw_pct": 10.0}


@pytest.mark.parametrize(
    "figures, expected",
    [
        ({**GPM, "gpu_clock_events": "sw_power_cap;hw_slowdown"}, "throttled"),
        ({**GPM, "gpu_clock_events": "sw_power_cap;none"}, "mixed"),
        ({**GPM, "gpu_power_capped_pct": 50.0, "gpu_sm_active_pct": 70.0}, "compute-bound"),
        ({**GPM, "gpu_power_capped_pct": 49.9, "gpu_sm_active_pct": 70.0}, "mixed"),
        ({**GPM, "gpu_power_capped_pct": 90.0, "gpu_sm_active_pct": 69.9}, "mixed"),
        ({**GPM, "gpu_sm_active_pct": 49.9}, "launch-bound"),
        ({**GPM, "gpu_sm_active_pct": 50.0}, "mixed"),
        ({**GPM, "gpu_tensor_active_pct": 40.0}, "compute-bound"),
        ({**GPM, "gpu_fp16_active_pct": 45.0}, "compute-bound"),
        ({**GPM, "gpu_tensor_active_pct": 39.9, "gpu_dram_bw_pct": 50.0}, "memory-bound"),
        ({**GPM, "gpu_dram_bw_pct": 49.9}, "mixed"),
        ({"gpu_util_pct": 79.9}, "launch-bound"),
        ({"gpu_util_pct": 80.0}, "mixed"),
        ({"gpu_util_pct": True}, None),
        ({}, None),
    ],
)
def test_each_rule_of_the_label_and_its_edge(figures: dict[str, Any], expected: str | None) -> None:
    assert bound.label(figures)[0] == expected


def test_the_basis_names_the_figures() -> None:
    capped = {**GPM, "gpu_power_capped_pct": 100.0, "gpu_sm_clock_median_mhz": 1875.0}
    assert bound.label(capped)[1] == "at the power cap in 100% of samples, SM clock 1875 MHz, SM active 90%"
    assert (
        bound.label({**GPM, "gpu_power_capped_pct": 100.0})[1] == "at the power cap in 100% of samples, SM active 90%"
    )
    assert bound.label({**GPM, "gpu_tensor_active_pct": 60.0})[1] == "SM active 90%, tensor pipe active 60% >= 40%"
    assert bound.label(GPM)[1] == "SM active 90%, tensor pipe 10%, DRAM 10%"
    assert bound.label({"gpu_sm_active_pct": 60.0})[1] == "SM active 60%"
    assert bound.label({"gpu_clock_events": "hw_thermal;sw_thermal"})[1] == "clocks events hw_thermal, sw_thermal"
    assert bound.label({"gpu_reason": "no NVML"}) == (None, "no NVML")
    assert bound.label({"gpu_util_pct": 50.0})[1] == "NVML utilization 50% < 80% (no GPM)"


@pytest.mark.parametrize(
    "figures, note",
    [
        ({"step_time_p10_ms": 10.0, "step_time_p90_ms": 15.0}, "unsteady steps (p90/p10 1.50)"),
        ({"step_time_p10_ms": 10.0, "step_time_p90_ms": 14.9}, ""),
        ({"step_time_p10_ms": 0.0, "step_time_p90_ms": 14.9}, ""),
        ({"cpu_loop_start_ms": 10.0, "cpu_loop_end_ms": 13.0}, "CPU speed shifted (loop 10.0 -> 13.0 ms)"),
        ({"cpu_loop_start_ms": 13.0, "cpu_loop_end_ms": 10.0}, "CPU speed shifted (loop 13.0 -> 10.0 ms)"),
        ({"cpu_loop_start_ms": 10.0, "cpu_loop_end_ms": 12.9}, ""),
        ({"cpu_loop_start_ms": 10.0, "cpu_loop_end_ms": 13.0, "gpu_util_pct": 90.0}, ""),  # mixed: not the CPU's
        ({"cpu_loop_start_ms": 10.0, "cpu_loop_end_ms": 13.0, "gpu_util_pct": 10.0}, "CPU speed shifted"),
    ],
)
def test_steadiness(figures: dict[str, Any], note: str) -> None:
    got = bound.steadiness(figures)
    assert got.startswith(note) if note else got == ""


def test_the_columns_join_the_basis_and_the_note() -> None:
    cols = bound.columns({"gpu_util_pct": 10.0, "step_time_p10_ms": 1.0, "step_time_p90_ms": 2.0})
    assert cols == {
        "bound": "launch-bound",
        "bound_basis": "NVML utilization 10% < 80% (no GPM); unsteady steps (p90/p10 2.00)",
    }
    assert bound.columns({}) == {"bound": None, "bound_basis": "no GPU activity figures"}
    both = bound.steadiness(
        {
            "step_time_p10_ms": 1.0,
            "step_time_p90_ms": 2.0,
            "cpu_loop_start_ms": 1.0,
            "cpu_loop_end_ms": 2.0,
            "bound": "",
        }
    )
    assert both == "unsteady steps (p90/p10 2.00); CPU speed shifted (loop 1.0 -> 2.0 ms)"
    assert bound.steadiness({"cpu_loop_start_ms": 1.0, "cpu_loop_end_ms": 2.0, "bound": "compute-bound"}) == ""


def test_blank_cells_are_no_label_and_no_note() -> None:
    s = one(
        [
            row("a", 0),
            row("a", 1),
            row("a", 2, bound="compute-bound", eval_note="no labels"),
            row("a", 3, eval_note="second"),
        ]
    )
    assert s["bound"] == "compute-bound"  # two blank cells are no label
    assert s["training_note"] == "no held-out accuracy: no labels"  # the first note only


def test_a_zero_token_rate_has_no_cost_and_a_skipped_repeat_marks_the_scenario() -> None:
    assert math.isnan(one([row("a", tokens_per_s=0.0)])["hours_per_1b_tokens"])
    assert one([row("a", 0), row("a", 1, status="skipped", samples_per_s=None)])["status"] == "skipped"
