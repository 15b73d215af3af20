"""A result directory read into the rows the history stores: pure data, no database here.

The run's identity (run_key) is the sha256 of env.json's created_at, its host and the sha256 of
the rows of results.csv as the results reader reads them (bench.results.identity.content_sha256),
so importing the same directory twice, or its results.csv re-saved by another tool, stores it
once; results_sha256 keeps the sha256 of the file's bytes. A result's series key is the
sha256 of its scenario name, settings, GPU model and model (bench.results.identity, which
`compare` shares); the software versions under test are not part of it, so an upgrade shows as
a step in the same series.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import BadInput
from ..results import FAILED_STATUSES, RESULTS_CSV, SETTING_COLUMNS, load_run, scenario_status
from ..results.identity import content_sha256, gpu_model, plain, series_key, series_settings
from .schema import FIGURES, REPEAT_EXTRAS

PACKAGES = ("torch", "transformers", "accelerate", "bitsandbytes")  # each has its own column


@dataclass(frozen=True)
class Figure:
    """A result's figure on one metric: a row of `result_figures`."""

    median: float  # over the ok repeats that have it
    spread_pct: float | None  # (max - min) / median x 100, with 2 or more
    n: int  # the ok repeats that have it


@dataclass(frozen=True)
class ResultRecord:
    values: dict[str, Any]  # the columns of `results` (not id, run_id)
    figures: dict[str, Figure]  # metric -> its figure (FIGURES that an ok repeat has)
    repeats: tuple[dict[str, Any], ...]  # the columns of `repeats` (not id, result_id)
    repeat_figures: tuple[dict[str, float], ...]  # aligned with repeats: metric -> value (those it has)


@dataclass(frozen=True)
class RunRecord:
    run_key: str
    run: dict[str, Any]  # the columns of `runs` (not id, recorded_at)
    results: tuple[ResultRecord, ...]


def read_result_dir(path: Path) -> RunRecord:
    """Read DIR (or DIR/results.csv) and DIR/env.json; BadInput names what is wrong."""
    path = Path(path)
    loaded = load_run(path)  # validates results.csv (BadInput on a bad or empty file)
    if loaded.env is None:
        raise BadInput(
            f"{loaded.csv_path.parent}: no env.json beside {RESULTS_CSV}",
            hint="the history needs env.json to know when, where and on what GPU the run was",
        )
    env = loaded.env
    created_at = _created_at(env, loaded.csv_path.parent)
    host = env.get("host")
    if not isinstance(host, str) or not host:
        raise BadInput(f"{loaded.csv_path.parent}/env.json: no host")
    results_sha = hashlib.sha256(loaded.csv_path.read_bytes()).hexdigest()
    gpu = gpu_model(env) or "unknown"
    frame = loaded.frame
    run = {
        **run_columns(env, gpu),
        "run_key": run_key(created_at, host, content_sha256(frame.to_dict("records"))),
        "created_at": created_at,
        "host": host,
        "status": run_status(list(frame["status"])),
        "source": str(loaded.csv_path.parent.resolve()),
        "results_sha256": results_sha,
        "env_json": json.dumps(env, sort_keys=True, default=str),
    }
    groups = frame.groupby("scenario", sort=False)
    results = tuple(_result(str(name), group, gpu) for name, group in groups)
    return RunRecord(run["run_key"], run, results)


def run_key(created_at: datetime, host: str, content_sha: str) -> str:
    """A run's identity: when (naive UTC) and where it ran, and what its results.csv holds."""
    return hashlib.sha256(f"{created_at.isoformat()}|{host}|{content_sha}".encode()).hexdigest()


def run_columns(env: dict[str, Any], gpu: str) -> dict[str, Any]:
    """The descriptive columns of a run, from env.json (missing keys become None)."""
    gpu_info, git, packages = (_mapping(env.get(k)) for k in ("gpu", "git", "packages"))
    return {
        "git_commit": _text(git.get("commit")),
        "git_branch": _text(git.get("branch")),
        "gpu_model": gpu,
        "gpu_count": _gpu_count(env, gpu),
        "driver": _text(gpu_info.get("driver")),
        "cuda": _text(env.get("cuda_runtime")),
        **{name: _text(packages.get(name)) for name in PACKAGES},
        "gpubench": _text(env.get("gpubench")),
        "python": _text(env.get("python")),
        "device": _text(env.get("device")),
        "matrix": _text(env.get("matrix")),
        "command": _text(env.get("command")),
    }


def run_status(statuses: list[str]) -> str:
    """interrupted, failed (a scenario failed) or ok, as `gpubench run`'s exit code says."""
    if "interrupted" in statuses:
        return "interrupted"
    return "failed" if any(s in FAILED_STATUSES for s in statuses) else "ok"


def figure_values(ok: list[dict[str, Any]], figures: tuple[str, ...]) -> dict[str, Figure]:
    """Each figure's median over the ok rows that have it, and its spread ((max - min) / median x 100,
    with 2 or more); a figure that no ok row has is left out."""
    values: dict[str, Figure] = {}
    for figure in figures:
        numbers = [v for v in (_number(r.get(figure)) for r in ok) if v is not None]
        if not numbers:
            continue
        median = statistics.median(numbers)
        spread = (max(numbers) - min(numbers)) / abs(median) * 100 if median and len(numbers) >= 2 else None
        values[figure] = Figure(float(median), spread, len(numbers))
    return values


def number(value: Any) -> float | None:
    """A stored figure: a finite number, else None."""
    return _number(value)


def _result(name: str, group: pd.DataFrame, gpu: str) -> ResultRecord:
    rows = [{k: plain(v) for k, v in row.items()} for row in group.to_dict("records")]
    settings = series_settings(name, rows[0], gpu)
    ok = [r for r in rows if r.get("status") == "ok"]
    values: dict[str, Any] = {
        "scenario": name,
        "series_key": series_key(settings),
        "series_json": json.dumps(settings, sort_keys=True),
        "settings_json": json.dumps({k: rows[0].get(k) for k in SETTING_COLUMNS}, sort_keys=True, default=str),
        "model": settings["model"],
        "status": scenario_status(group),
        "repeats": len(rows),
        "ok_repeats": len(ok),
    }
    repeats = tuple(
        {
            "repeat": int(r["repeat"]),
            "status": str(r["status"]),
            "error": _text(r.get("error")),
            "started_at": _text(r.get("started_at")),
            "row_json": json.dumps(r, sort_keys=True, default=str),
        }
        for r in rows
    )
    return ResultRecord(values, figure_values(ok, FIGURES), repeats, tuple(repeat_figures(r) for r in rows))


def repeat_figures(row: dict[str, Any]) -> dict[str, float]:
    """A results.csv row's stored figures (FIGURES and REPEAT_EXTRAS): those that are finite numbers."""
    numbers = {f: _number(row.get(f)) for f in (*FIGURES, *REPEAT_EXTRAS)}
    return {f: v for f, v in numbers.items() if v is not None}


def _created_at(env: dict[str, Any], where: Path) -> datetime:
    raw = env.get("created_at")
    try:
        moment = datetime.fromisoformat(str(raw))
    except ValueError:
        raise BadInput(f"{where}/env.json: created_at = {raw!r} is not an ISO date and time") from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment  # naive UTC


def _gpu_count(env: dict[str, Any], gpu: str) -> int:
    if isinstance(env.get("gpu_count"), int):
        return int(env["gpu_count"])
    if isinstance(env.get("gpus"), list):
        return len(env["gpus"])
    return 0 if gpu in ("CPU", "unknown") else 1


def _number(value: Any) -> float | None:
    """A finite float, or None (NaN and infinities are stored as NULL)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)
