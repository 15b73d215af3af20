"""Turn one CompareResult into a rich table, markdown, JSON or CSV. No judging happens here."""

from __future__ import annotations

import io
import json
import math
from dataclasses import asdict
from typing import Any

import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from ..fmt import METRIC_LABELS, csv_escape, md_cell, md_code, md_table, metric_num, pct, spec
from ..termtable import PIPE_WIDTH, Column, FitTable
from .comparison import JUDGED, MIN_REPEATS, PARITY_METRIC, ROW_COLUMNS, SPEED_METRIC, STATUS_METRIC, CompareResult
from .gate import POWER
from .power import PLAN_COLUMNS, Plan, needed_text

JSON_SCHEMA = "gpubench.compare/2"
STYLES = {
    "regression": "bold red",
    "new failure": "bold red",
    "missing": "red",
    "noisy": "yellow",
    "improvement": "green",
    "fixed": "green",
    "new": "cyan",
    "unchanged": "dim",
    "not gated": "dim",
}
HEADERS = [
    "Scenario",
    "Metric",
    "Base",
    "New",
    "Change",
    "Step ms",
    "n base/new",
    "Spread",
    "Detectable",
    "p (Holm)",
    "Verdict",
    "Note",
]
# the terminal table: HEADERS shortened, without the spread; when the terminal is narrow, the step
# times, p and n go first, then the notes move under the table if that is enough, else Base, New
# and Detectable go
TABLE_COLUMNS = [
    Column("Scenario", name=True),
    Column("Metric"),
    Column("Base", right=True, drop=5),
    Column("New", right=True, drop=6),
    Column("Change", right=True),
    Column("Step ms", right=True, drop=1),
    Column("n", right=True, drop=3),
    Column("Detect", right=True, drop=7),
    Column("p", right=True, drop=2),
    Column("Verdict"),
    Column("Note", note=True, drop=4),
]
TABLE_CELLS = [0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11]  # the HEADERS cells the terminal table shows
VERDICT_CELL = HEADERS.index("Verdict")


def render(result: CompareResult, fmt: str) -> str:
    """The whole output in one format, as text (the table without colour)."""
    if fmt == "json":
        return json.dumps(to_data(result), indent=2) + "\n"
    if fmt == "csv":  # for a spreadsheet: no text cell can start a formula
        return result.rows[ROW_COLUMNS].map(csv_escape).to_csv(index=False)
    if fmt == "markdown":
        return to_markdown(result)
    if fmt == "table":
        buffer = io.StringIO()
        print_table(result, Console(file=buffer, width=PIPE_WIDTH, color_system=None))
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
        line += f" ({which} by the threshold alone: under {MIN_REPEATS} ok repeats a side)"
    return line


def thresholds_line(result: CompareResult) -> str:
    t = result.thresholds
    return (
        f"speed {t.speed_pct:g}% (samples_per_s; the step time shown beside it), memory {t.memory_pct:g}% (peak_mem_mb)"
    )


def method_footer(result: CompareResult) -> str:
    """The method in short, under the terminal table (markdown and JSON give it whole)."""
    t = result.thresholds
    return (
        f"thresholds: speed {t.speed_pct:g}%, memory {t.memory_pct:g}%; {MIN_REPEATS}+ ok repeats a side: a t-test, "
        f"Holm-adjusted (p), must confirm at alpha {t.alpha:g}; Detect: a change caught {POWER:.0%} of the time"
    )


def cells(row: dict[str, Any]) -> list[str]:
    """One row as display strings, in HEADERS order."""
    metric = row["metric"]
    if metric == STATUS_METRIC:
        base, new = row["base_status"], row["new_status"]
    else:
        base, new = metric_num(row["base"], metric), metric_num(row["new"], metric)
    change = pct(row["change_pct"])
    step = "-"
    if metric == SPEED_METRIC and not (_missing(row["base_step_ms"]) and _missing(row["new_step_ms"])):
        step = f"{spec(row['base_step_ms'], '.1f')} → {spec(row['new_step_ms'], '.1f')}"
    spread = pct(row["spread_pct"], sign=False)
    detectable = pct(row["detectable_pct"], sign=False)
    p = spec(row["p_holm"], ".3f")
    n = f"{row['base_n']}/{row['new_n']}"
    return [row["scenario"], metric, base, new, change, step, n, spread, detectable, p, row["verdict"], row["note"]]


def headlines(result: CompareResult) -> list[str]:
    """One line per scenario whose loss was judged: its speed change and its loss verdict in the
    new run ("liger: samples/s +21.0%, loss equivalent")."""
    records = _records(result)
    speed = {r["scenario"]: r["change_pct"] for r in records if r["metric"] == SPEED_METRIC}
    lines = []
    for r in records:
        if r["metric"] != PARITY_METRIC:
            continue
        verdict = str(r["note"]).split(";")[0].split(" (")[0]  # the note starts with the new run's verdict
        change = speed.get(r["scenario"])
        head = f"samples/s {pct(change)}, " if change is not None and not _missing(change) else ""
        lines.append(f"{r['scenario']}: {head}{verdict}")
    return lines


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _records(result: CompareResult) -> list[dict[str, Any]]:
    return result.rows.to_dict("records")


# -- rich ----------------------------------------------------------------------------------------
def print_table(result: CompareResult, console: Console) -> None:
    """The runs, the table (fitted to the console's width; notes repeated on many rows become
    footnotes), the thresholds and the gate line."""
    console.print(f"[bold]base[/] {escape(result.base_label)} ({escape(result.base_gpu)})")
    console.print(f"[bold]new[/]  {escape(result.new_label)} ({escape(result.new_gpu)})")
    for diff in result.env_differences:
        console.print(escape(f"  {diff.key}: {diff.base} -> {diff.new}"), style="dim")
    console.print(compare_table(result))
    for line in headlines(result):
        console.print(escape(line), highlight=False)
    colour = "yellow" if result.cpu_smoke else "green" if result.exit_code == 0 else "bold red"
    console.print(escape(gate_line(result)), style=colour, highlight=False)


def compare_table(result: CompareResult) -> FitTable:
    """The rows as the terminal table (TABLE_COLUMNS), the method in short under it."""
    rows = []
    for row in _records(result):
        values: list[str | Text] = list(cells(row))
        values[1] = METRIC_LABELS.get(row["metric"], row["metric"])
        values[VERDICT_CELL] = Text(row["verdict"], style=STYLES.get(row["verdict"], ""))
        rows.append([values[i] for i in TABLE_CELLS])
    return FitTable(TABLE_COLUMNS, rows, footer=[method_footer(result)])


# -- markdown ------------------------------------------------------------------------------------
def to_markdown(result: CompareResult) -> str:
    mark = "⚠️" if result.cpu_smoke else "✅" if result.exit_code == 0 else "❌"
    lines = [
        f"## {mark} gpubench compare: {gate_line(result)}",
        "",
        f"**base** {md_code(result.base_label)} ({md_cell(result.base_gpu)}) → "
        f"**new** {md_code(result.new_label)} ({md_cell(result.new_gpu)})",
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
    loss = headlines(result)
    if loss:
        lines += ["Speed and loss per scenario:", "", *[f"- {md_cell(line)}" for line in loss], ""]
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
            values[VERDICT_CELL] = f"**{values[VERDICT_CELL]}**"
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
        "power": POWER,
        "min_repeats": MIN_REPEATS,
        "thresholds_pct": {m: t.for_metric(m) for m in JUDGED},
        "allow_missing": result.allow_missing,
        "counts": result.counts,
        "env_differences": [asdict(d) for d in result.env_differences],
        "setting_differences": [asdict(d) for d in result.setting_differences],
        "notes": list(result.notes),
        "rows": [{k: _json_value(row[k]) for k in ROW_COLUMNS} for row in _records(result)],
    }


def _json_value(value: Any) -> Any:
    if value is None or value is pd.NA or (isinstance(value, float) and not math.isfinite(value)):
        return None
    if hasattr(value, "item"):  # numpy scalars
        return _json_value(value.item())
    return value


# -- the repeats a comparison needs (compare --detect) -------------------------------------------
PLAN_HEADERS = ["Scenario", "Repeats", "Spread", "Detectable now", "Repeats needed"]
PLAN_SCHEMA = "gpubench.compare-plan/1"


def plan_cells(row: dict[str, Any]) -> list[str]:
    return [
        row["scenario"],
        str(row["repeats"]),
        pct(row["spread_pct"], sign=False),
        pct(row["detectable_pct"], sign=False),
        needed_text(row),
    ]


def plan_table(plan: Plan) -> FitTable:
    drop = {"Repeats": 1, "Spread": 2}  # on a narrow terminal; the answer (the last two) stays
    columns = [Column(h, right=i > 0, name=i == 0, drop=drop.get(h, 0)) for i, h in enumerate(PLAN_HEADERS)]
    rows = [plan_cells(row) for row in plan.rows.to_dict("records")]
    return FitTable(columns, rows, footer=[plan.note])


def print_plan(plan: Plan, console: Console) -> None:
    console.print(plan_table(plan))


def render_plan(plan: Plan, fmt: str) -> str:
    """The plan in one format, as text."""
    records = plan.rows.to_dict("records")
    if fmt == "json":
        data = {
            "schema": PLAN_SCHEMA,
            "target_pct": plan.target_pct,
            "alpha": plan.thresholds.alpha,
            "power": POWER,
            "threshold_pct": plan.thresholds.speed_pct,
            "family": plan.family,
            "sources": list(plan.labels),
            "note": plan.note,
            "rows": [{k: _json_value(row[k]) for k in PLAN_COLUMNS} for row in records],
        }
        return json.dumps(data, indent=2) + "\n"
    if fmt == "csv":
        return plan.rows[PLAN_COLUMNS].map(csv_escape).to_csv(index=False)
    if fmt == "markdown":
        table = md_table(PLAN_HEADERS, [[md_cell(c) for c in plan_cells(r)] for r in records])
        return "\n".join([f"## gpubench compare --detect {plan.target_pct:g}%", "", *table, "", md_cell(plan.note), ""])
    if fmt == "table":
        buffer = io.StringIO()
        print_plan(plan, Console(file=buffer, width=PIPE_WIDTH, color_system=None))
        return buffer.getvalue()
    raise ValueError(f"unknown format {fmt!r}")
