"""Weak-scaling efficiency of multi-process rows: samples/s per GPU over the one-process figure of
the same workload (same per-GPU batch), from rows of the same run.

The reference of a row is, in order of preference: a one-process row of the same strategy
(gpus = 1, nnodes = 1: what sharding costs is then left out), else the plain single-GPU row
(strategy = "none") with otherwise equal settings. Its median samples/s over ok repeats is used.
"""

from __future__ import annotations

import statistics
from typing import Any

from .columns import SETTING_COLUMNS

PARALLEL_SETTINGS = ("gpus", "nnodes", "node_rank")
STRATEGY_SETTINGS = ("strategy", "zero_stage", "fsdp_sharding", "offload", "tp", "cp", "dp_replicate", "dp_shard")
NOT_WORKLOAD = ("description", "timeout_s", "samples", "warmup_steps", "window", *PARALLEL_SETTINGS)


def world(row: dict[str, Any]) -> int:
    """The row's number of processes (GPUs); 1 where world_size is empty (a single-GPU row)."""
    value = row.get("world_size")
    return int(value) if isinstance(value, int | float) and value == value else 1


def _key(row: dict[str, Any], drop: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(str(row.get(c)) for c in SETTING_COLUMNS if c not in drop)


def strategy_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """The workload (same per-GPU batch, model, precision, engine, ...) and the strategy: equal for
    the rows of one strategy at any number of GPUs."""
    return _key(row, NOT_WORKLOAD)


def workload_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """The workload alone: equal for the rows of every strategy of one workload, at any number of GPUs."""
    return _key(row, NOT_WORKLOAD + STRATEGY_SETTINGS)


def is_plain(row: dict[str, Any]) -> bool:
    """A row without a parallel strategy (strategy = "none"): the reference of every strategy."""
    return row.get("strategy") in (None, "none")


def add_scaling(rows: list[dict[str, Any]]) -> None:
    """Set scaling_efficiency and scaling_ref on every ok multi-process row that has a reference."""
    singles = [r for r in rows if r.get("status") == "ok" and world(r) == 1 and r.get("samples_per_s")]
    same: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    plain: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in singles:
        same.setdefault(strategy_key(r), []).append(r)
        if is_plain(r):
            plain.setdefault(workload_key(r), []).append(r)
    for row in rows:
        if world(row) == 1 or row.get("status") != "ok" or not row.get("samples_per_s_per_gpu"):
            continue
        refs = same.get(strategy_key(row)) or plain.get(workload_key(row))
        if not refs:
            continue
        median = statistics.median(float(r["samples_per_s"]) for r in refs)
        row["scaling_efficiency"] = float(row["samples_per_s_per_gpu"]) / median
        row["scaling_ref"] = str(refs[0]["scenario"])


def allreduce_busbw(env: dict[str, Any] | None) -> dict[int, float]:
    """{world size: all-reduce bus GB/s at the largest message} from env.json's `interconnect`
    (bench/run/interconnect.py); {} without one, and no entry for a world size whose check failed."""
    out: dict[int, float] = {}
    checks = (env or {}).get("interconnect")
    for key, figures in (checks if isinstance(checks, dict) else {}).items():
        results = figures.get("results") if isinstance(figures, dict) else None
        sizes = [r for r in results or () if isinstance(r, dict) and r.get("op") == "all_reduce"]
        if sizes and str(key).isdigit():
            out[int(key)] = float(max(sizes, key=lambda r: r.get("bytes", 0))["busbw_gbps"])
    return out
