"""A run cut into shards that other processes run (lanes: one per GPU; Slurm: one step per scenario).

A shard is a result directory seeded with a scenarios.json holding its part of the plan (and the
rows of it already final), which `gpubench run --resume SHARD` runs like any interrupted run: its
own lock, fork server, timeouts and `interrupted` rows. The parent reads the shards' final rows back
into its own results.csv (bench.results.merge.combine), in the plan's order, as a plain run writes it.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import GpubenchError
from ..fsio import atomic_write_json
from ..results import FAILED_STATUSES, FINAL_STATUSES, RESULTS_CSV, SCENARIOS_JSON, read_results, write_results
from ..results.merge import combine, row_dicts
from .request import RunRequest

GPUBENCH = [sys.executable, "-m", "bench"]


def seed(shard: Path, plan_json: dict[str, Any], names: Iterable[str], device: str, rows: list[dict[str, Any]]) -> None:
    """SHARD/scenarios.json with the plan's scenarios named (and `device`), SHARD/results.csv with
    their rows in `rows`."""
    wanted = set(names)
    shard.mkdir(parents=True, exist_ok=True)
    scenarios = [s for s in plan_json["scenarios"] if s["name"] in wanted]
    atomic_write_json(shard / SCENARIOS_JSON, {**plan_json, "device": device, "scenarios": scenarios})
    mine = [r for r in rows if r["scenario"] in wanted]
    if mine:
        write_results(shard / RESULTS_CSV, mine)


def child_flags(request: RunRequest) -> list[str]:
    """The options of `request` that a shard's `gpubench run --resume` takes (how, not what, to run)."""
    flags = ["--no-report", "--launcher", request.launcher]
    if not request.sample_memory:
        flags.append("--no-memory-sampling")
    if not request.ceiling:
        flags.append("--no-ceiling")
    if request.exclusive:
        flags.append("--exclusive")
    if not request.preflight:
        flags.append("--skip-preflight")
    if request.cpu_affinity is not None:
        flags += ["--cpu-affinity", request.cpu_affinity]
    return flags


def resume_argv(shard: Path, flags: Sequence[str]) -> list[str]:
    return [*GPUBENCH, "run", "--resume", str(shard), *flags]


def final_rows(shard: Path, retry_failed: bool = False) -> list[dict[str, Any]]:
    """SHARD's rows with a final status (none while it has no readable results.csv)."""
    if not (shard / RESULTS_CSV).is_file():
        return []
    try:
        rows = row_dicts(read_results(shard / RESULTS_CSV))
    except GpubenchError:  # a shard cut off mid-write by a kill: its rows come again when it is resumed
        return []
    keep = [s for s in FINAL_STATUSES if not (retry_failed and s in FAILED_STATUSES)]
    return [r for r in rows if r["status"] in keep]


def gather(
    base: list[dict[str, Any]], shards: Sequence[Path], order: Sequence[str], *, keep_interrupted: bool = False
) -> list[dict[str, Any]]:
    """`base` with the shards' final rows (their `interrupted` ones too with keep_interrupted), one
    row per scenario and repeat (a shard's newer row wins), in the plan's order."""
    sources = [base]
    for shard in shards:
        rows = final_rows(shard)
        if keep_interrupted and (shard / RESULTS_CSV).is_file():
            with contextlib.suppress(GpubenchError):
                rows = row_dicts(read_results(shard / RESULTS_CSV))
        sources.append(rows)
    rows, _ = combine(sources, order)
    return [r for r in rows if r["scenario"] in set(order)]


def copy_logs(shard: Path, out: Path, suffix: str) -> None:
    """The shard's worker logs (and traces) into OUT/logs, where a plain run writes them; its fork
    server's log as forkserver-SUFFIX.log."""
    logs = shard / "logs"
    if not logs.is_dir():
        return
    (out / "logs").mkdir(parents=True, exist_ok=True)
    for path in logs.iterdir():
        name = f"forkserver-{suffix}.log" if path.name == "forkserver.log" else path.name
        with contextlib.suppress(OSError):
            shutil.copy2(path, out / "logs" / name)
