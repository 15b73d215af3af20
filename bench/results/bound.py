"""What held a row back, read from its own GPU counters (bench/measure/gpuwatch.py): one label per
row and the figures it was read from; and whether the row's figures are steady enough to read as a
finding. Pure arithmetic on a row, no torch; the thresholds are documented in docs/methodology.md
("What bound a row").

The label, first rule that holds:
- throttled: a thermal, hardware-slowdown or power-brake clocks event was seen in the window (the
  software power cap is not a throttle: it is where a busy H200 normally runs; its share of the
  window is in gpu_power_capped_pct);
- compute-bound at the power cap: the software power cap was among the clocks-event reasons in
  POWER_CAPPED_PCT % of the samples or more, with the SMs busy SM_BUSY_PCT % or more: the chip ran
  at its power limit, the clock lowered to stay there (bert-large bf16 batch 32 on the H200: 100%
  of samples capped, 691 W of 700, SM clock 1,875 MHz, SM active 86%, tensor pipe 33%);
- launch-bound: the SMs were busy less than LAUNCH_SM_PCT % of the window (GPM SM active), or,
  without GPM, a kernel ran less than LAUNCH_UTIL_PCT % of the time (NVML utilization): the GPU
  waited on the host launching its kernels (or on data, or on a collective);
- compute-bound: the busiest math pipe (tensor, or non-tensor FP32/FP16) was active COMPUTE_PCT %
  of the window or more;
- memory-bound: DRAM bandwidth was MEMORY_BW_PCT % of its maximum or more, the math pipes below
  COMPUTE_PCT %;
- mixed: busy, but no single resource near its limit (elementwise kernels, small GEMMs, a mix).
Without GPM only throttled, launch-bound or mixed can be told apart; without any GPU figure
(the CPU) the label is empty and the basis says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

LABELS = ("compute-bound", "memory-bound", "launch-bound", "throttled", "mixed")
LAUNCH_SM_PCT = 50.0
LAUNCH_UTIL_PCT = 80.0
COMPUTE_PCT = 40.0
MEMORY_BW_PCT = 50.0
POWER_CAPPED_PCT = 50.0
SM_BUSY_PCT = 70.0
THROTTLES = ("hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")

# steadiness: a row is flagged when its steps spread this much or its launching CPU shifted
UNSTEADY_P90_OVER_P10 = 1.5  # as the CPU probe's own rule (bench/measure/cpuspeed.py UNSTEADY)
CPU_SHIFT = 1.3  # the CPU loop this much slower after the window than before it, or the reverse


def _num(row: Mapping[str, Any], key: str) -> float | None:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def label(row: Mapping[str, Any]) -> tuple[str | None, str]:
    """(label, basis): the label (LABELS) and the figures it came from; (None, why) without figures."""
    events = [e for e in str(row.get("gpu_clock_events") or "").split(";") if e and e != "none"]
    throttles = [e for e in events if e in THROTTLES]
    sm, util = _num(row, "gpu_sm_active_pct"), _num(row, "gpu_util_pct")
    pipes = {k: _num(row, f"gpu_{k}_active_pct") for k in ("tensor", "fp32", "fp16")}
    dram = _num(row, "gpu_dram_bw_pct")
    if throttles:
        return "throttled", "clocks events " + ", ".join(throttles)
    capped = _num(row, "gpu_power_capped_pct")
    if sm is not None:
        if capped is not None and capped >= POWER_CAPPED_PCT and sm >= SM_BUSY_PCT:
            clock = _num(row, "gpu_sm_clock_median_mhz")
            at = f", SM clock {clock:.0f} MHz" if clock is not None else ""
            return "compute-bound", f"at the power cap in {capped:.0f}% of samples{at}, SM active {sm:.0f}%"
        if sm < LAUNCH_SM_PCT:
            return "launch-bound", f"SM active {sm:.0f}% < {LAUNCH_SM_PCT:g}%"
        known = {k: v for k, v in pipes.items() if v is not None}
        pipe, busiest = max(known.items(), key=lambda kv: kv[1]) if known else (None, None)
        if busiest is not None and busiest >= COMPUTE_PCT:
            return "compute-bound", f"SM active {sm:.0f}%, {pipe} pipe active {busiest:.0f}% >= {COMPUTE_PCT:g}%"
        if dram is not None and dram >= MEMORY_BW_PCT:
            return "memory-bound", f"DRAM bandwidth {dram:.0f}% >= {MEMORY_BW_PCT:g}%, math pipes < {COMPUTE_PCT:g}%"
        parts = [f"SM active {sm:.0f}%"]
        parts += [f"{pipe} pipe {busiest:.0f}%"] if busiest is not None else []
        parts += [f"DRAM {dram:.0f}%"] if dram is not None else []
        return "mixed", ", ".join(parts)
    if util is not None:
        if util < LAUNCH_UTIL_PCT:
            return "launch-bound", f"NVML utilization {util:.0f}% < {LAUNCH_UTIL_PCT:g}% (no GPM)"
        return "mixed", f"NVML utilization {util:.0f}%; no GPM to tell compute from memory"
    reason = str(row.get("gpu_reason") or "no GPU activity figures")
    return None, reason


def _step_spread(row: Mapping[str, Any]) -> float | None:
    """The row's p90 step time over its p10; None without both."""
    p10, p90 = _num(row, "step_time_p10_ms"), _num(row, "step_time_p90_ms")
    return p90 / p10 if p10 and p90 else None


def steadiness(row: Mapping[str, Any], found: str | None = None) -> str:
    """ "" for a steady row, else why its figures should not be read as a finding: its steps spread
    widely, or (for a launch-bound row, or one with no GPU label: the CPU's own) the CPU that
    launches them changed speed across the window. A compute-bound row does not follow the CPU."""
    notes = []
    if found is None:
        found = row["bound"] if "bound" in row else label(row)[0]
    spread = _step_spread(row)
    if spread is not None and spread >= UNSTEADY_P90_OVER_P10:
        notes.append(f"unsteady steps (p90/p10 {spread:.2f})")
    before, after = _num(row, "cpu_loop_start_ms"), _num(row, "cpu_loop_end_ms")
    follows_cpu = not isinstance(found, str) or found in ("", "launch-bound")
    if follows_cpu and before and after and max(before, after) / min(before, after) >= CPU_SHIFT:
        notes.append(f"CPU speed shifted (loop {before:.1f} -> {after:.1f} ms)")
    return "; ".join(notes)


def host_disturbed(row: Mapping[str, Any], quiet_ms: float | None) -> str:
    """ "" for a row whose host stayed as quiet as it was at its quietest, else how it was not: the
    CPU loop before or after its window CPU_SHIFT times slower than `quiet_ms` (the fastest loop of
    the rows it is compared with), or its steps spread. Unlike steadiness() it holds for every label:
    on an H100 a compute-bound bert-large ran 6% slower (34.0 -> 32.0 samples/s) with its loop at
    18.4 ms against 9.0 ms quiet, and a mixed one 17% slower with 17.7 ms."""
    notes = []
    spread = _step_spread(row)
    if spread is not None and spread >= UNSTEADY_P90_OVER_P10:
        notes.append(f"steps p90/p10 {spread:.2f}")
    loops = [v for v in (_num(row, "cpu_loop_start_ms"), _num(row, "cpu_loop_end_ms")) if v]
    if quiet_ms and loops and max(loops) / quiet_ms >= CPU_SHIFT:
        notes.append(f"CPU loop {max(loops):.1f} ms against {quiet_ms:.1f} quiet")
    return ", ".join(notes)


def columns(row: Mapping[str, Any]) -> dict[str, Any]:
    """The row's bound and bound_basis columns; the basis ends with its steadiness note, if any."""
    found, basis = label(row)
    note = steadiness(row, found)
    return {"bound": found, "bound_basis": f"{basis}; {note}" if note else basis}
