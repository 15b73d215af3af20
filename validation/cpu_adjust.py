"""The engine against the reference loop at the same CPU speed, for a host whose CPU speed drifts.

On a virtual machine whose vCPUs run 1.7-1.9x slower at times (results/README.md, `cpu-noise/`),
a launch-bound step's speed follows the CPU's, and single engine/loop pairs land 0.8-1.2 both
ways. Each side's result carries the CPU probe taken around its window (`cpu_loop_*`: a fixed
Python loop, in ms). Over n pairs, fit by least squares

    log(samples/s) = a + c * [engine] + b * log(cpu_loop_ms)

and exp(c) is the engine/loop ratio at equal CPU speed; b is how strongly the speed follows the
CPU (-1: a step made of CPU work only, 0: the CPU does not matter). The 95% interval comes from
resampling the pairs (each engine run with the loop run beside it in time), so it is as wide as
the data make it. Fewer than 4 complete pairs, or a CPU that did not vary, give no figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

MIN_PAIRS = 4
RESAMPLES = 2000


def _complete(*columns: Sequence[float]) -> np.ndarray:
    """The pairs (rows) whose figures are all finite and positive, as one array of columns."""
    data = np.array(columns, dtype=float).T
    return data[np.isfinite(data).all(axis=1) & (data > 0).all(axis=1)]


def _fit(engine: np.ndarray, loop: np.ndarray, engine_cpu: np.ndarray, loop_cpu: np.ndarray) -> np.ndarray | None:
    """(a, c, b) of the model above, by least squares over both sides of the pairs; None where the
    data cannot tell the side from the CPU (the CPU constant, or different on the two sides only)."""
    n = len(engine)
    y = np.log(np.concatenate([engine, loop]))
    x = np.column_stack(
        [np.ones(2 * n), np.concatenate([np.ones(n), np.zeros(n)]), np.log(np.concatenate([engine_cpu, loop_cpu]))]
    )
    coef, _, rank, _ = np.linalg.lstsq(x, y, rcond=None)
    return coef if rank == 3 else None


def cpu_adjusted_ratio(
    engine: Sequence[float], loop: Sequence[float], engine_cpu_ms: Sequence[float], loop_cpu_ms: Sequence[float]
) -> dict[str, float]:
    """`ratio` (engine/loop at equal CPU speed), `ci_low`/`ci_high` (95%, resampled pairs),
    `cpu_slope` (b above) and `pairs` used; NaN figures where the data cannot give them."""
    data = _complete(engine, loop, engine_cpu_ms, loop_cpu_ms)
    coef = _fit(*data.T) if len(data) >= MIN_PAIRS else None
    if coef is None:
        nan = {"ratio": math.nan, "ci_low": math.nan, "ci_high": math.nan, "cpu_slope": math.nan}
        return {**nan, "pairs": float(len(data))}
    _, c, b = coef
    rng = np.random.default_rng(0)  # the same data give the same interval
    fits = (_fit(*data[rng.integers(0, len(data), len(data))].T) for _ in range(RESAMPLES))
    draws = [f[1] for f in fits if f is not None]  # a resample that cannot tell side from CPU says nothing
    low, high = np.percentile(draws, [2.5, 97.5])
    return {
        "ratio": math.exp(c),
        "ci_low": math.exp(low),
        "ci_high": math.exp(high),
        "cpu_slope": float(b),
        "pairs": float(len(data)),
    }


def paired_ratio(engine: Sequence[float], loop: Sequence[float]) -> dict[str, float]:
    """The model-free reading beside the fit: the geometric mean of the per-pair ratios engine/loop
    (each pair ran side by side in time) and its 95% interval from resampled pairs."""
    data = _complete(engine, loop)
    if len(data) < MIN_PAIRS:
        return {"ratio": math.nan, "ci_low": math.nan, "ci_high": math.nan}
    logs = np.log(data[:, 0] / data[:, 1])
    rng = np.random.default_rng(0)
    low, high = np.percentile(logs[rng.integers(0, len(logs), (RESAMPLES, len(logs)))].mean(axis=1), [2.5, 97.5])
    return {"ratio": math.exp(logs.mean()), "ci_low": math.exp(low), "ci_high": math.exp(high)}


def grouped_ratio(groups: Sequence[tuple[Sequence[float], Sequence[float]]]) -> dict[str, float]:
    """paired_ratio over the pairs of several processes pooled, with a 95% interval that resamples
    the processes first and then the pairs within each: where processes differ by more than their
    own pairs say (each lays out its memory its own way), the interval widens to show it. With two
    or three processes the outer resampling is coarse; as it resamples the pairs too, it comes out
    at least about as wide as paired_ratio's."""
    logs = [np.log(d[:, 0] / d[:, 1]) for d in (_complete(a, b) for a, b in groups) if len(d)]
    if sum(len(g) for g in logs) < MIN_PAIRS:
        return {"ratio": math.nan, "ci_low": math.nan, "ci_high": math.nan}
    rng = np.random.default_rng(0)
    means = np.empty(RESAMPLES)
    for i in range(RESAMPLES):
        picked = [logs[j] for j in rng.integers(0, len(logs), len(logs))]
        means[i] = np.concatenate([g[rng.integers(0, len(g), len(g))] for g in picked]).mean()
    low, high = np.percentile(means, [2.5, 97.5])
    return {"ratio": math.exp(np.concatenate(logs).mean()), "ci_low": math.exp(low), "ci_high": math.exp(high)}


def interval_within(ratio: dict[str, float], tolerance: float = 0.03) -> bool:
    """The whole 95% interval of a ratio above lies within `tolerance` of 1 (false where it is NaN)."""
    return bool(ratio["ci_low"] >= 1 - tolerance and ratio["ci_high"] <= 1 + tolerance)
