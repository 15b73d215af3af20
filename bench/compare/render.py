"""Turn one CompareResult into a rich table, markdown, JSON or CSV. No judging happens here."""

from __future__ import annotations

import io
import json
import math
import os
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..fmt import md_cell, md_table, num, pct, spec
from .core import DIRECTIONS, MIN_REPEATS, ROW_COLUMNS, STATUS_METRIC, CompareResult

JSON_SCHEMA = "gpubench.compare/1"
DECIMALS = {"samples_per_s": 2, "step_time_median_ms": 2, "peak_mem_mb": 0, "final_loss": 4}
STYLES = {
    "regression": "bold red",
    "new failure": "bold red",
    "missing": "red",
    "noisy": "yellow",
    "improvement": "green",
    "fixed": "green",
    "new": "cyan",
    "unchanged": "dim",
}
HEADERS = ["Scenario", "Metric", "Base", "New", "Change", "n base/new", "p", "Verdict", "Note"]
TABLE_WIDTH = 160  # a table written to a file or a pipe


def render(result: CompareResult, fmt: str) -> str:
    """The whole output in one format, as text (the table without colour)."""
    if fmt == "json":
        return json.dumps(to_data(result), indent=2) + "\n"
    if fmt == "csv":
        return result.rows.to_csv(index=False, columns=ROW_COLUMNS)
    if fmt == "markdown":
        return to_markdown(result)
    if fmt == "table":
        buffer = io.StringIO()
        print_table(result, Console(file=buffer, width=TABLE_WIDTH, color_system=None))
        return buffer.getvalue()
    raise ValueError(f"unknown format {fmt!r}")


# -- pieces shared by the formats ----------------------------------------------------------------
def gate_line(result: CompareResult) -> str:
    """One line: pass or fail, the exit code, how many rows got each verdict, and what the
    regressions were judged by when there were too few repeats to test them. Two CPU runs are a
    smoke comparison of the harness: said first, and nothing in capitals."""
    if result.cpu_smoke:
        head, failing = "CPU smoke comparison, not a verdict on hardware", set()
    else:
        head, failing = "FAIL" if result.exit_code else "PASS", set(result.failing["verdict"])
    summary = ", ".join(f"{v} {n}" if v not in failing else f"{v.upper()} {n}" for v, n in result.counts.items())
    line = f"{head} (exit {result.exit_code}): {summary or 'nothing compared'}"
    untested, regressions = result.untested_regressions
    if untested:
        which = "judged" if untested == regressions else f"{untested} of the {regressions} regressions judged"
        line += (
            f" ({which} by the threshold alone: fewer than {MIN_REPEATS} ok repeats on a side, "
            "too few to tell from noise)"
        )
    return line


def thresholds_line(result: CompareResult) -> str:
    t = result.thresholds
    return f"speed {t.speed_pct:g}% (samples_per_s, step_time_median_ms), memory {t.memory_pct:g}% (peak_mem_mb)"


def cells(row: dict[str, Any]) -> list[str]:
    """One row as display strings, in HEADERS order."""
    metric = row["metric"]
    if metric == STATUS_METRIC:
        base, new = row["base_status"], row["new_status"]
    else:
        base, new = _number(row["base"], metric), _number(row["new"], metric)
    change = pct(row["change_pct"])
    p = spec(row["p_value"], ".3f")
    n = f"{row['base_n']}/{row['new_n']}"
    return [row["scenario"], metric, base, new, change, n, p, row["verdict"], row["note"]]


def _number(value: Any, metric: str) -> str:
    if metric == "final_loss":  # a loss near 0 stays readable (4.8e-06)
        return spec(value, ".4g")
    return num(value, DECIMALS.get(metric, 2))


def _records(result: CompareResult) -> list[dict[str, Any]]:
    return result.rows.to_dict("records")


# -- rich ----------------------------------------------------------------------------------------
def stdout_console() -> Console:
    """The terminal's width on a terminal; TABLE_WIDTH in a pipe or a CI log, not rich's 80."""
    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = TABLE_WIDTH
    return console


def print_table(result: CompareResult, console: Console) -> None:
    console.print(f"[bold]base[/] {escape(result.base_label)} ({escape(result.base_gpu)})")
    console.print(f"[bold]new[/]  {escape(result.new_label)} ({escape(result.new_gpu)})")
    for diff in result.env_differences:
        console.print(escape(f"  {diff.key}: {diff.base} -> {diff.new}"), style="dim")
    table = Table(header_style="bold")
    for header in HEADERS:  # names and numbers never wrap; the note takes what is left
        table.add_column(header, no_wrap=header != "Note", ratio=1 if header == "Note" else None)
    for row in _records(result):
        values = [Text(v) for v in cells(row)]
        values[7].stylize(STYLES.get(row["verdict"], ""))
        table.add_row(*values)
    console.print(table)
    console.print(f"thresholds: {thresholds_line(result)}; {result.method}", style="dim", highlight=False)
    colour = "yellow" if result.cpu_smoke else "green" if result.exit_code == 0 else "bold red"
    console.print(escape(gate_line(result)), style=colour, highlight=False)


# -- markdown ------------------------------------------------------------------------------------
def to_markdown(result: CompareResult) -> str:
    mark = "⚠️" if result.cpu_smoke else "✅" if result.exit_code == 0 else "❌"
    lines = [
        f"## {mark} gpubench compare: {gate_line(result)}",
        "",
        f"**base** `{result.base_label}` ({result.base_gpu}) → **new** `{result.new_label}` ({result.new_gpu})",
        "",
        f"Thresholds: {thresholds_line(result)}. Method: {result.method}.",
        "",
    ]
    if result.notes:
        lines += ["Notes:", "", *[f"- {md_cell(note)}" for note in result.notes], ""]
    differences = result.env_differences
    if differences:
        lines += [
            "Environment differences (shown, never failing):",
            "",
            "| | base | new |",
            "|---|---|---|",
        ]
        lines += [f"| {md_cell(d.key)} | {md_cell(d.base)} | {md_cell(d.new)} |" for d in differences]
        lines.append("")
    records = _records(result)
    changed = [r for r in records if r["verdict"] != "unchanged"]
    lines += ["### Changes", ""]
    lines += _md_table(changed) if changed else ["No change beyond the thresholds."]
    lines += ["", f"<details><summary>All {len(records)} rows</summary>", ""]
    lines += _md_table(records) + ["", "</details>", ""]
    return "\n".join(lines)


def _md_table(records: list[dict[str, Any]]) -> list[str]:
    rows = []
    for row in records:
        values = [md_cell(v) for v in cells(row)]
        if row["verdict"] in ("regression", "new failure", "missing"):
            values[7] = f"**{values[7]}**"
        rows.append(values)
    return md_table(HEADERS, rows)


# -- json ----------------------------------------------------------------------------------------
def to_data(result: CompareResult) -> dict[str, Any]:
    """The JSON document; its keys are locked by a test."""
    t = result.thresholds
    return {
        "schema": JSON_SCHEMA,
        "exit_code": result.exit_code,
        "base": {"path": result.base_label, "gpu": result.base_gpu},
        "new": {"path": result.new_label, "gpu": result.new_gpu},
        "method": result.method,
        "alpha": t.alpha,
        "min_repeats": MIN_REPEATS,
        "thresholds_pct": {m: t.for_metric(m) for m in DIRECTIONS},
        "allow_missing": result.allow_missing,
        "counts": result.counts,
        "env_differences": [asdict(d) for d in result.env_differences],
        "notes": list(result.notes),
        "rows": [{k: _json_value(row[k]) for k in ROW_COLUMNS} for row in _records(result)],
    }


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):  # numpy scalars
        return _json_value(value.item())
    return value
