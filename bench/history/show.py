"""The history's results as text: rich tables, markdown, JSON and CSV. No judging happens here."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pandas as pd
from rich.console import Console
from rich.text import Text

from ..fmt import METRIC_LABELS, csv_escape, md_cell, md_table, metric_num, num, pct
from ..termtable import PIPE_WIDTH, Column, FitTable
from .chart import LEGEND, marker_line, sparkline
from .check import CHECK_COLUMNS, GATE_FAILS, MIN_NOISE_NIGHTS, CheckResult
from .library import SeriesView

CHECK_SCHEMA = "gpubench.history.check/1"
RUN_COLUMNS = [
    "id",
    "created_at",
    "git_commit",
    "git_branch",
    "host",
    "gpu",
    "driver",
    "cuda",
    "torch",
    "transformers",
    "accelerate",
    "bitsandbytes",
    "scenarios",
    "failed",
    "status",
]
POINT_COLUMNS = [
    "scenario",
    "gpu_model",
    "model",
    "series_key",
    "metric",
    "run_id",
    "created_at",
    "git_commit",
    "torch",
    "value",
    "spread_pct",
    "repeats_n",
    "baseline",
    "change_pct",
    "flag",
    "note",
]
STYLES = {
    "regression": "bold red",
    "new failure": "bold red",
    "watch": "yellow",
    "noisy": "yellow",
    "improvement": "green",
    "accepted": "cyan",
    "failed": "red",
    "interrupted": "red",
    "ok": "green",
    "beyond": "bold red",
    "drift": "bold red",
}


# -- history list ----------------------------------------------------------------------------------
def run_rows(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs as flat rows (RUN_COLUMNS)."""
    out = []
    for run in runs:
        gpu = run["gpu_model"] + (f" x{run['gpu_count']}" if (run.get("gpu_count") or 0) > 1 else "")
        out.append({**{c: run.get(c) for c in RUN_COLUMNS}, "gpu": gpu, "created_at": _when(run["created_at"])})
    return out


RUN_TABLE = [  # at narrow widths: bnb, accelerate, scen., transformers, CUDA, branch, driver, commit, torch
    Column("run", right=True),
    Column("date (UTC)"),
    Column("commit", drop=8),
    Column("branch", drop=6),
    Column("GPU"),
    Column("driver", drop=7),
    Column("CUDA", drop=5),
    Column("torch", drop=9),
    Column("transformers", drop=4),
    Column("accelerate", drop=2),
    Column("bnb", drop=1),
    Column("scen.", right=True, drop=3),
    Column("status"),
]


def runs_table(runs: Sequence[dict[str, Any]], title: str) -> FitTable:
    rows: list[list[str | Text]] = []
    for row in run_rows(runs):
        status = row["status"] if not row["failed"] else f"{row['status']} ({row['failed']} failed)"
        rows.append(
            [
                str(row["id"]),
                row["created_at"],
                (row["git_commit"] or "-")[:10],
                row["git_branch"] or "-",
                row["gpu"],
                *[_dash(row[c]) for c in ("driver", "cuda", "torch", "transformers", "accelerate", "bitsandbytes")],
                str(row["scenarios"]),
                Text(status, style=STYLES.get(row["status"], "")),
            ]
        )
    return FitTable(RUN_TABLE, rows, title=title)


# -- history show ----------------------------------------------------------------------------------
def point_rows(views: Sequence[SeriesView]) -> list[dict[str, Any]]:
    out = []
    for view in views:
        s = view.series
        for point, mark in zip(view.points, view.marks, strict=True):
            reps = point.repeats.get(view.metric, ())
            spread = (max(reps) - min(reps)) / abs(mark.value) * 100 if len(reps) > 1 and mark.value else None
            out.append(
                {
                    "scenario": s.scenario,
                    "gpu_model": s.gpu_model,
                    "model": s.model,
                    "series_key": s.key,
                    "metric": view.metric,
                    "run_id": point.run_id,
                    "created_at": _when(point.created_at),
                    "git_commit": point.info.get("git_commit"),
                    "torch": point.info.get("torch"),
                    "value": mark.value,
                    "spread_pct": spread,
                    "repeats_n": len(reps),
                    "baseline": mark.baseline,
                    "change_pct": mark.change_pct,
                    "flag": mark.flag,
                    "note": mark.note,
                }
            )
    return out


SERIES_TABLE = [  # at narrow widths the spread goes first, then the versions; the date stays longest
    Column("run", right=True),
    Column("date (UTC)", drop=7),
    Column("commit", drop=4),
    Column("torch", drop=2),
    Column("value", right=True),
    Column("spread", right=True, drop=1),
    Column("n", right=True, drop=3),
    Column("baseline", right=True, drop=5),
    Column("change", right=True),
    Column("flag"),
    Column("note", note=True, drop=6),
]


def print_series(views: Sequence[SeriesView], console: Console) -> None:
    """Per series: a table of its points (fitted to the console), then the sparkline with its markers."""
    rows = point_rows(views)
    for view in views:
        s = view.series
        points: list[list[str | Text]] = [
            [
                str(row["run_id"]),
                row["created_at"],
                (row["git_commit"] or "-")[:10],
                _dash(row["torch"]),
                metric_num(row["value"], view.metric),
                pct(row["spread_pct"], sign=False),
                str(row["repeats_n"]),
                metric_num(row["baseline"], view.metric),
                pct(row["change_pct"]),
                Text(row["flag"], style=STYLES.get(row["flag"], "")),
                row["note"],
            ]
            for row in rows
            if row["series_key"] == s.key
        ]
        title = f"{s.scenario}: {view.metric} on {s.gpu_model} ({s.model}), series {s.key}"
        console.print(FitTable(SERIES_TABLE, points, title=title))
        values = [m.value for m in view.marks]
        finite = [v for v in values if v is not None]
        scale = f"  {metric_num(min(finite), view.metric)} .. {metric_num(max(finite), view.metric)}" if finite else ""
        console.print(f"  {sparkline(values)}{scale}", markup=False, highlight=False)
        console.print(f"  {marker_line(view.marks)}", markup=False, highlight=False)
    if views:
        console.print(f"  {LEGEND}", style="dim", markup=False, highlight=False)


# -- history check ---------------------------------------------------------------------------------
def gate_line(result: CheckResult) -> str:
    head = "FAIL" if result.exit_code else "PASS"
    counts = ", ".join(f"{v.upper() if v in GATE_FAILS else v} {n}" for v, n in result.counts.items())
    run = result.run
    return (
        f"{head} (exit {result.exit_code}): run {run['id']} of {_when(run['created_at'])} on "
        f"{run['gpu_model']}: {counts or 'nothing judged'}"
    )


def method_text(result: CheckResult) -> str:
    p = result.params
    noise = f" or {p.noise_factor:g}x the night-to-night noise" if p.noise_factor else ""
    drift = f", or drifting over the newest {p.drift_nights} runs" if p.drift_nights else ""
    return (
        f"baseline: median of the last {p.window} unflagged runs since the last accepted step; "
        f"flagged: beyond {p.thresholds.speed_pct:g}% (speed), {p.thresholds.memory_pct:g}% (memory){noise}, "
        f"confirmed by a one-sided Mann-Whitney test (3+ repeats, alpha {p.thresholds.alpha:g}){drift}; "
        f"fails when flagged in the newest {p.consecutive} runs (not in a series' first {MIN_NOISE_NIGHTS})"
    )


CHECK_TABLE = [  # at narrow widths the threshold goes first (the method line says it), then p
    Column("scenario", name=True),
    Column("GPU", drop=6),
    Column("metric"),
    Column("value", right=True, drop=5),
    Column("baseline (n)", right=True, drop=4),
    Column("change", right=True),
    Column("threshold", right=True, drop=1),
    Column("p", right=True, drop=2),
    Column("streak", right=True, drop=3),
    Column("verdict"),
    Column("note", note=True),
]


def check_table(result: CheckResult) -> FitTable:
    """The verdicts of one run, fitted to the console; the GPU column only when the rows differ
    in it (the title names the run's GPU)."""
    records = result.rows.to_dict("records")
    one_gpu = len({r["gpu_model"] for r in records}) <= 1
    columns = [c for c in CHECK_TABLE if not (one_gpu and c.header == "GPU")]
    rows: list[list[str | Text]] = []
    for row in records:
        style = STYLES.get(row["verdict"], "dim" if row["verdict"] == "unchanged" else "")
        metric = row["metric"]
        cells: list[str | Text] = [
            row["scenario"],
            row["gpu_model"],
            METRIC_LABELS.get(metric, metric),
            metric_num(row["value"], metric),
            f"{metric_num(row['baseline'], metric)} ({row['baseline_n']})",
            pct(row["change_pct"]),
            pct(row["threshold_pct"], sign=False),
            num(row["p_value"], 3),
            row["streak"],
            Text(row["verdict"], style=style),
            row["note"],
        ]
        rows.append([c for c, col in zip(cells, CHECK_TABLE, strict=True) if col in columns])
    return FitTable(columns, rows, title=gate_line(result), footer=[method_text(result)])


def check_data(result: CheckResult) -> dict[str, Any]:
    p = result.params
    return {
        "schema": CHECK_SCHEMA,
        "gate": "fail" if result.exit_code else "pass",
        "exit_code": result.exit_code,
        "run": {k: _plain(v) for k, v in result.run.items() if k != "env_json"},
        "params": {
            "window": p.window,
            "consecutive": p.consecutive,
            "speed_pct": p.thresholds.speed_pct,
            "memory_pct": p.thresholds.memory_pct,
            "alpha": p.thresholds.alpha,
            "drift_nights": p.drift_nights,
            "noise_factor": p.noise_factor,
        },
        "method": method_text(result),
        "counts": result.counts,
        "notes": list(result.notes),
        "rows": [{k: _plain(r[k]) for k in CHECK_COLUMNS} for r in result.rows.to_dict("records")],
    }


def render_check(result: CheckResult, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(check_data(result), indent=2) + "\n"
    if fmt == "csv":  # for a spreadsheet: no text cell can start a formula
        return result.rows[CHECK_COLUMNS].map(csv_escape).to_csv(index=False)
    if fmt == "markdown":
        head = f"## gpubench history check: {gate_line(result)}\n\n{method_text(result)}\n\n"
        notes = "".join(f"- {md_cell(n)}\n" for n in result.notes)
        return head + (notes + "\n" if notes else "") + markdown(result.rows.to_dict("records"), CHECK_COLUMNS)
    return table_text(check_table(result))


# -- shared ----------------------------------------------------------------------------------------
def render_records(rows: Sequence[dict[str, Any]], columns: Sequence[str], fmt: str) -> str:
    """Rows as JSON, CSV or markdown (the table format is each command's own)."""
    if fmt == "json":
        return json.dumps([{c: _plain(r.get(c)) for c in columns} for r in rows], indent=2) + "\n"
    if fmt == "csv":
        return pd.DataFrame(list(rows), columns=list(columns)).map(csv_escape).to_csv(index=False)
    if fmt == "markdown":
        return markdown(rows, columns)
    raise ValueError(f"unknown format {fmt!r}")


def markdown(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    return "\n".join(md_table(list(columns), [[_cell(row.get(c)) for c in columns] for row in rows])) + "\n"


def table_text(table: FitTable, width: int = PIPE_WIDTH) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None).print(table)
    return buffer.getvalue()


def _cell(value: Any) -> str:
    value = _plain(value)
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return md_cell(value)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return _when(value, seconds=True)
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _when(value: Any, *, seconds: bool = False) -> str:
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds" if seconds else "minutes")
    return str(value)


def _dash(value: Any) -> str:
    return "-" if value is None else str(value)
