"""The ratio statistics of the validation suite: an a/b ratio over pairs measured side by side in
time, with a 95% bootstrap interval (paired_ratio; grouped_ratio when the pairs come from several
processes); and the figures of validation/interleaved.py built on them: one result's blocks
summarised, and every result under a directory collected, with the units of each scenario and
kind pooled over the runs.

A result's blocks alternate a b | b a | a b ...; two pairs (a b b a) make one unit, so a speed that
drifts steadily within a unit favours neither side. The ratio a/b is the geometric mean over the
units, with a 95% interval from resampling the units.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

MIN_PAIRS = 4  # fewer complete pairs give no ratio
RESAMPLES = 2000


def _complete(*columns: Sequence[float]) -> np.ndarray:
    """The pairs (rows) whose figures are all finite and positive, as one array of columns."""
    data = np.array(columns, dtype=float).T
    return data[np.isfinite(data).all(axis=1) & (data > 0).all(axis=1)]


def paired_ratio(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """The geometric mean of the per-pair ratios a/b (each pair ran side by side in time) and its
    95% interval from resampled pairs (`ratio`, `ci_low`, `ci_high`); NaN for fewer than 4 pairs."""
    data = _complete(a, b)
    if len(data) < MIN_PAIRS:
        return {"ratio": math.nan, "ci_low": math.nan, "ci_high": math.nan}
    logs = np.log(data[:, 0] / data[:, 1])
    rng = np.random.default_rng(0)  # the same data give the same interval
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


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def _rates(blocks: list[dict[str, Any]]) -> tuple[dict[tuple[int, str], float], list[int]]:
    """samples/s by (pair, side), and the pairs that have both sides."""
    rate = {(b["pair"], b["side"]): b["samples"] / b["seconds"] for b in blocks}
    return rate, sorted({b["pair"] for b in blocks if (b["pair"], "a") in rate and (b["pair"], "b") in rate})


def units(blocks: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
    """Side a's and side b's samples/s per unit (pairs 2k and 2k+1: a b b a), geometric means."""
    rate, pairs = _rates(blocks)
    both = [(p, p + 1) for p in pairs if p % 2 == 0 and p + 1 in pairs]
    return (
        [geomean([rate[(p, "a")] for p in unit]) for unit in both],
        [geomean([rate[(p, "b")] for p in unit]) for unit in both],
    )


def summarize(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-side throughput over all blocks, the ratio a/b over units of two pairs with its 95%
    interval, and the spread; `blocks` as `measure` records them (side a or b, pair, samples, seconds)."""
    rate, pairs = _rates(blocks)
    a_units, b_units = units(blocks)
    ratio = paired_ratio(a_units, b_units)
    logs = [math.log(rate[(p, "a")] / rate[(p, "b")]) for p in pairs]
    out: dict[str, Any] = {"pairs": len(pairs), "units": len(a_units)}
    for side in ("a", "b"):
        mine = [b for b in blocks if b["side"] == side]
        speeds = [b["samples"] / b["seconds"] for b in mine]
        out[f"{side}_samples_per_s"] = sum(b["samples"] for b in mine) / sum(b["seconds"] for b in mine)
        out[f"{side}_block_cv_pct"] = statistics.stdev(speeds) / statistics.fmean(speeds) * 100
    out["ratio_of_totals"] = out["a_samples_per_s"] / out["b_samples_per_s"]
    out["ratio"], out["ci_low"], out["ci_high"] = ratio["ratio"], ratio["ci_low"], ratio["ci_high"]
    out["within_3pct"] = interval_within(ratio)
    out["within_5pct"] = interval_within(ratio, 0.05)  # the Fabric issue's bound for fabric-vit's rows
    out["pair_log_sd"] = statistics.stdev(logs) if len(logs) > 1 else math.nan
    # a first against b first: a cost of switching sides would show here
    first = [lg for p, lg in zip(pairs, logs, strict=True) if p % 2 == 0]
    second = [lg for p, lg in zip(pairs, logs, strict=True) if p % 2 == 1]
    out["ratio_a_first"] = math.exp(statistics.fmean(first)) if first else math.nan
    out["ratio_b_first"] = math.exp(statistics.fmean(second)) if second else math.nan
    hz = [b["sampler_hz"] for b in blocks if b.get("sampler_hz")]
    out["sampler_hz"] = statistics.median(hz) if hz else math.nan
    for side in ("a", "b"):
        out.update(where_time_went([b for b in blocks if b["side"] == side], side))
    return out


def where_time_went(blocks: list[dict[str, Any]], side: str) -> dict[str, float]:
    """One side's traced blocks (validation/interleaved.py traced_block) summarised: the median
    host share of a block (host_s / seconds) and thread-CPU share of its host time, its steps'
    median and largest host time, the garbage collector's passes and the most Python threads
    seen; NaN each for results recorded before blocks were traced."""
    traced = [b for b in blocks if "host_s" in b and b["seconds"] > 0 and b["host_s"] > 0]
    names = ("host_share", "thread_cpu_share", "step_p50_ms", "step_max_ms", "gc_passes", "threads")
    if not traced:
        return {f"{side}_{name}": math.nan for name in names}
    steps = [ms for b in traced for ms in b["step_ms"]]
    values = (
        statistics.median(b["host_s"] / b["seconds"] for b in traced),
        statistics.median(b["thread_cpu_s"] / b["host_s"] for b in traced),
        statistics.median(steps) if steps else math.nan,
        max(steps) if steps else math.nan,
        float(sum(b["gc"] for b in traced)),
        float(max(b["threads"] for b in traced)),
    )
    return {f"{side}_{name}": value for name, value in zip(names, values, strict=True)}


def profile_gap(profile: dict[str, Any] | None, top: int = 5) -> str:
    """A profiled pair (validation/interleaved.py profiled_blocks) in one line: both sides' step
    times under the profiler with their operators' own CPU time, then the operators whose self
    CPU time per step differs most between the sides (a minus b), largest difference first; ''
    without a profile. Each side keeps only its top operators, so an operator missing from one
    side's list counts 0 there."""
    if not profile:
        return ""
    ops = {side: {op["name"]: op["self_cpu_ms"] for op in profile[side]["cpu_ops"]} for side in ("a", "b")}
    diffs = [(name, ops["a"].get(name, 0.0) - ops["b"].get(name, 0.0)) for name in {*ops["a"], *ops["b"]}]
    diffs.sort(key=lambda d: (-abs(d[1]), d[0]))
    a, b = profile["a"], profile["b"]
    head = ", ".join(
        f"step {side} {p['step_ms']:.2f} ms (ops {p['cpu_ops_total_ms']:.2f})" for side, p in (("a", a), ("b", b))
    )
    return "; ".join([head, *(f"{name} {diff:+.2f} ms" for name, diff in diffs[:top])])


def collect(root: Path) -> pd.DataFrame:
    """Every result under `root` (one directory per device command, each with its env.json): one
    row per result, its summary recomputed from its blocks, and a `pooled` row per scenario, kind
    and sampler setting over the units of all its results, of both build orders (each unit stands
    alone, so they pool; and the orders' effects cancel where both ran). A pooled row has two
    95% intervals: over the units (ci_*), and over the processes, then the units within each
    (process_ci_*), since results differ between processes by more than their units say;
    within_3pct needs both inside 3%, within_5pct (the Fabric issue's bound) both inside 5%."""
    rows: list[dict[str, Any]] = []
    pooled: dict[tuple[Any, ...], tuple[list[tuple[list[float], list[float]]], set[str]]] = {}  # units, orders
    for path in sorted(root.rglob("*.json")):
        result = json.loads(path.read_text())
        if "skipped" in result:  # e.g. tf32 on the CPU: a row that says why
            rows.append({"run": str(path.parent.relative_to(root)), **result})
            continue
        if "blocks" not in result:
            continue
        env = path.parent / "env.json"
        gpu = (json.loads(env.read_text()).get("gpu") or {}).get("uuid", "") if env.is_file() else ""
        key = (result["scenario"], result["kind"], result["sampler"])
        first = result.get("built_first", "b")  # results from before --build-first built b first
        run = str(path.parent.relative_to(root))
        head = {"run": run, "scenario": key[0], "kind": key[1], "sampler": key[2], "built_first": first}
        rows.append(
            {**head, "gpu_uuid": gpu, **summarize(result["blocks"]), "profile_gap": profile_gap(result.get("profile"))}
        )
        a_units, b_units = units(result["blocks"])
        groups, orders = pooled.setdefault(key, ([], set()))
        groups.append((a_units, b_units))  # one group per result (process)
        orders.add(first)
    for (scenario, kind, sampler), (groups, orders) in pooled.items():
        if len(groups) < 2:
            continue
        a_units, b_units = [u for a, _ in groups for u in a], [u for _, b in groups for u in b]
        ratio = paired_ratio(a_units, b_units)
        grouped = grouped_ratio(groups)
        row = {"run": "pooled", "scenario": scenario, "kind": kind, "sampler": sampler}
        row.update({"built_first": ",".join(sorted(orders)), "units": len(a_units), "processes": len(groups)})
        rows.append(
            {
                **row,
                "ratio": ratio["ratio"],
                "ci_low": ratio["ci_low"],
                "ci_high": ratio["ci_high"],
                "process_ci_low": grouped["ci_low"],
                "process_ci_high": grouped["ci_high"],
                # the whole interval within 3% whether the processes are taken as one sample or not
                "within_3pct": interval_within(ratio) and interval_within(grouped),
                "within_5pct": interval_within(ratio, 0.05) and interval_within(grouped, 0.05),
            }
        )
    return pd.DataFrame(rows)
