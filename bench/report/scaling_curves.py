"""Scaling curves, as data: for each workload (same per-GPU batch, model, precision, engine, ...),
one line per parallel strategy with its median samples/s and weak-scaling efficiency at each
number of GPUs the rows hold.

The rows are grouped with the keys of bench.results.scaling, so a line's 1-GPU point is what that
module takes as the reference: the one-process rows of the same strategy, else the plain
single-GPU rows (strategy = "none") of the same workload. A strategy measured at one GPU count
only gives no line. Pure: rows in, lines out; the charts are bench.report.charts.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..results.columns import SETTING_COLUMNS
from ..results.scaling import NOT_WORKLOAD, STRATEGY_SETTINGS, is_plain, strategy_key, workload_key, world

# The settings named when a report holds several workloads, in this order; others follow as they are.
WORKLOAD_NAMES = {"batch_size": "batch", "seq_len": "seq", "model_resolved": "model", "precision": "", "engine": ""}


@dataclass(frozen=True)
class ScalingPoint:
    gpus: int
    samples_per_s: float  # median over the ok rows at this GPU count (the whole job's samples/s)
    n: int  # ok rows behind the median
    efficiency: float | None  # samples_per_s / (gpus x the 1-GPU median); 1.0 at 1 GPU; None without one
    scenarios: tuple[str, ...]  # the rows' scenarios, in the order met
    busbw_gbps: float | None = None  # the run's interconnect check at this GPU count: all-reduce bus GB/s


@dataclass(frozen=True)
class ScalingLine:
    label: str  # the strategy: "ddp", "fsdp full", "zero3 + offload"
    workload: str  # the settings that tell this line's workload from the others' ("" when one workload)
    points: tuple[ScalingPoint, ...]  # by GPU count, ascending; two or more


def strategy_label(row: dict[str, Any]) -> str:
    """'ddp', 'fsdp full', 'fsdp grad_op', 'zero2', 'zero3 + offload', 'fsdp full tp 2', 'fsdp full hsdp x2',
    'none' (a single GPU)."""
    strategy = str(row.get("strategy") or "none")
    if strategy == "deepspeed":
        label = f"zero{_int_text(row.get('zero_stage'))}"
    elif strategy == "fsdp":
        label = f"fsdp {row.get('fsdp_sharding') or 'full'}"
    else:
        label = strategy
    for key, word in (("dp_replicate", "hsdp x"), ("cp", "cp "), ("tp", "tp ")):
        if _int_text(row.get(key)) not in ("1", "None", "nan", ""):
            label += f" {word}{_int_text(row.get(key))}"
    offload = row.get("offload")
    if offload == "params":
        label += " + offload"
    elif isinstance(offload, str) and offload not in ("", "none"):
        label += f" + {offload} offload"
    return label


def scaling_lines(rows: Iterable[dict[str, Any]], busbw: dict[int, float] | None = None) -> tuple[ScalingLine, ...]:
    """The lines of every workload with a strategy at two or more GPU counts, in the rows' order.

    Only ok rows with a samples/s count. A strategy without a one-process row of its own takes the
    plain single-GPU rows of its workload as its 1-GPU point. `busbw`: the interconnect check's
    all-reduce bus GB/s per GPU count (bench.results.scaling.allreduce_busbw), shown at each point."""
    ok = [r for r in rows if r.get("status") == "ok" and _positive(r.get("samples_per_s"))]
    plain: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    strategies: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in ok:
        if is_plain(r):
            if world(r) == 1:
                plain.setdefault(workload_key(r), []).append(r)
        else:
            strategies.setdefault(strategy_key(r), []).append(r)
    found: list[tuple[dict[str, Any], tuple[ScalingPoint, ...]]] = []
    for group in strategies.values():
        by_gpus: dict[int, list[dict[str, Any]]] = {}
        for r in group:
            by_gpus.setdefault(world(r), []).append(r)
        if 1 not in by_gpus and workload_key(group[0]) in plain:
            by_gpus[1] = plain[workload_key(group[0])]
        if len(by_gpus) >= 2:
            found.append((group[0], _points(by_gpus, busbw or {})))
    names = _workload_names([row for row, _ in found])
    return tuple(ScalingLine(strategy_label(row), names[workload_key(row)], points) for row, points in found)


def workloads(lines: Iterable[ScalingLine]) -> list[tuple[str, list[ScalingLine]]]:
    """The lines per workload, in the order met: one chart pair each."""
    out: dict[str, list[ScalingLine]] = {}
    for line in lines:
        out.setdefault(line.workload, []).append(line)
    return list(out.items())


def _points(by_gpus: dict[int, list[dict[str, Any]]], busbw: dict[int, float]) -> tuple[ScalingPoint, ...]:
    medians = {g: statistics.median(float(r["samples_per_s"]) for r in rs) for g, rs in by_gpus.items()}
    one = medians.get(1)
    return tuple(
        ScalingPoint(
            gpus=g,
            samples_per_s=medians[g],
            n=len(by_gpus[g]),
            efficiency=None if one is None else (1.0 if g == 1 else medians[g] / (g * one)),
            scenarios=tuple(dict.fromkeys(str(r.get("scenario")) for r in by_gpus[g])),
            busbw_gbps=busbw.get(g),
        )
        for g in sorted(by_gpus)
    )


def _workload_names(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], str]:
    """Each workload named by the settings in which the workloads differ ('batch 4'); '' for one."""
    keys = {workload_key(r): r for r in rows}
    if len(keys) <= 1:
        return {k: "" for k in keys}
    columns = [c for c in SETTING_COLUMNS if c not in NOT_WORKLOAD + STRATEGY_SETTINGS]
    differ = [c for c in columns if len({str(r.get(c)) for r in keys.values()}) > 1]
    differ.sort(key=lambda c: list(WORKLOAD_NAMES).index(c) if c in WORKLOAD_NAMES else len(WORKLOAD_NAMES))

    def name(row: dict[str, Any]) -> str:
        parts = []
        for c in differ:
            value = _int_text(row.get(c))
            word = WORKLOAD_NAMES.get(c, c)
            parts.append(f"{word} {value}" if word else value)
        return ", ".join(parts)

    return {k: name(r) for k, r in keys.items()}


def _int_text(value: Any) -> str:
    """3.0 -> '3' (a whole float read back from a CSV), anything else as str()."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0
