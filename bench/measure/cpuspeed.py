"""How steady this machine's CPUs are: one fixed pure-Python loop, timed on each CPU in turn.

Small-batch GPU steps wait on the CPU thread that launches their kernels, so their samples/s
follows the CPU's speed. On a shared virtual machine a vCPU can run at very different speeds from
one moment to the next (on an H200 KVM guest the loop below took 0.11-0.22 s per CPU, with no
steal time reported: results/README.md). The probe runs before any worker, takes about a second,
and lands in env.json as `cpu_speed`; the report warns when the slow tenth of the passes took
much longer than the fast tenth. Each worker also times the loop on its own training thread just
before and just after its window (`cpu_loop_start_ms`, `cpu_loop_end_ms`), so a row shows how fast
the CPU was around its own measurement; `gpubench compare` notes a speed change that comes with a
CPU that ran at another speed.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from typing import Any

LOOP = 200_000  # multiply-adds per pass: ~6-20 ms of one core
UNSTEADY = 1.5  # the slow tenth of passes (p90) this much slower than the fast tenth (p10): noisy
MAX_CPUS = 16
SHIFT_PCT = 15.0  # a CPU this much slower or faster than the baseline's gets a note (compare, history)


def loop_seconds(n: int = LOOP) -> float:
    """Seconds for n pure-Python multiply-adds on whichever CPU runs this thread."""
    t = time.perf_counter()
    total = 0
    for i in range(n):
        total += i * i
    return time.perf_counter() - t


def window_probe_ms(passes: int = 3) -> float:
    """The loop's median time (ms) on the calling thread, right now: a worker takes it just before
    its timed window and just after, outside the window (bench/worker/clock.py)."""
    return statistics.median(loop_seconds() for _ in range(passes)) * 1000


def probe(only: tuple[int, ...] | None = None, rounds: int = 2) -> dict[str, Any]:
    """Time the loop `rounds` times on each CPU the workers may use (`only`, else all this process
    may use; at most MAX_CPUS of them, spread over the list)."""
    getter = getattr(os, "sched_getaffinity", None)
    allowed = sorted(getter(0)) if getter is not None else []
    pool = sorted(only) if only and allowed else allowed
    cpus = pool[:: max(1, len(pool) // MAX_CPUS)][:MAX_CPUS]
    passes: list[float] = []
    try:
        for _ in range(rounds):
            for cpu in cpus or [None]:  # None: not Linux, wherever the OS puts us
                if cpu is not None:
                    os.sched_setaffinity(0, {cpu})
                loop_seconds()  # untimed: the first pass after a move runs on cold caches
                passes += [loop_seconds(), loop_seconds()]
    finally:
        if cpus:
            os.sched_setaffinity(0, allowed)
    deciles = statistics.quantiles(passes, n=10, method="inclusive")
    return {
        "loop": f"{LOOP} Python multiply-adds",
        "cpus": len(cpus) or None,
        "passes": len(passes),
        "median_ms": statistics.median(passes) * 1000,
        "fastest_ms": min(passes) * 1000,
        "slowest_ms": max(passes) * 1000,
        "p10_ms": deciles[0] * 1000,
        "p90_ms": deciles[-1] * 1000,
        "p90_over_p10": deciles[-1] / deciles[0],
    }


def warning(cpu_speed: dict[str, Any] | None) -> str | None:
    """A report note when the probe saw the CPUs' speed swing; None when steady or not measured."""
    if not cpu_speed or not isinstance(cpu_speed.get("p90_over_p10"), int | float):
        return None
    ratio = float(cpu_speed["p90_over_p10"])
    if ratio < UNSTEADY:
        return None
    return (
        f"this machine's CPU speed was unsteady when the run started: one fixed Python loop took "
        f"{cpu_speed['p10_ms']:.1f} ms (p10) to {cpu_speed['p90_ms']:.1f} ms (p90), {ratio:.2f}x, over "
        f"{cpu_speed['passes']} passes; small-batch (launch-bound) scenarios follow the CPU's speed "
        "and will be noisy (env.json, cpu_speed)"
    )


def shift_pct(base_ms: float | None, new_ms: float | None) -> float | None:
    """The loop's change in % (positive: slower) when it is SHIFT_PCT or more, else None."""
    if base_ms is None or new_ms is None or math.isnan(base_ms) or math.isnan(new_ms) or base_ms <= 0:
        return None
    change = (new_ms - base_ms) / base_ms * 100
    return change if abs(change) >= SHIFT_PCT else None


def shift_note(base_ms: float | None, new_ms: float | None, where: str) -> str | None:
    """A note when the loop ran SHIFT_PCT or more slower or faster around `where` than around the
    baseline's (the same fixed loop): a launch-bound scenario's speed follows it. Never a verdict:
    the GPU stack may have changed too."""
    change = shift_pct(base_ms, new_ms)
    if change is None:
        return None
    return (
        f"the CPU ran {'slower' if change > 0 else 'faster'} around {where} "
        f"(a fixed Python loop: {new_ms:.1f} vs {base_ms:.1f} ms, {change:+.0f}%); a launch-bound step follows it"
    )


def median_ms(cpu_speed: Any) -> float | None:
    """The probe's median pass (env.json `cpu_speed`), None when not measured."""
    value = cpu_speed.get("median_ms") if isinstance(cpu_speed, dict) else None
    return float(value) if isinstance(value, int | float) else None
