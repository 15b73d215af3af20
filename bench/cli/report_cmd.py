"""`gpubench report`: a result set as a self-contained HTML page, a terminal table, markdown, JSON or CSV."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ..termtable import stdout_console
from .options import path_value
from .output import emit, plain, say


class ReportFormat(StrEnum):
    html = "html"
    table = "table"
    markdown = "markdown"
    json = "json"
    csv = "csv"


def register(app: typer.Typer) -> None:
    app.command("report")(report_command)


def report_command(
    result_dir: Annotated[
        Path,
        typer.Argument(parser=path_value, help="A result directory (or its results.csv), with env.json beside it."),
    ],
    fmt: Annotated[
        ReportFormat,
        typer.Option(
            "--format",
            "-f",
            help="html: a file (DIR/report.html); table: the summary `gpubench run` prints; markdown: the "
            "summary and findings; json, csv: the summary's figures, one record per scenario.",
        ),
    ] = ReportFormat.html,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            parser=path_value,
            help="Write here. Default: DIR/report.html for html, stdout for the others.",
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(help="The scenario changes are measured against. Default: baseline (else the first)."),
    ] = None,
) -> None:
    """Turn a result set into a report: HTML with charts, a summary table, or markdown for a pull request.

    The HTML file is self-contained (inline CSS and SVG charts, no scripts, no network): the
    environment, the summary table, throughput and peak-memory bar charts, a speed-versus-memory
    map with the Pareto front marked, and the failed and skipped scenarios with their reasons.
    Markdown gives the summary table and the main findings; `gpubench run` writes the HTML
    report at the end of every run.

    Examples:
      gpubench report results/2026-11-29T10-00-00/
      gpubench report results/h200-bert-large/full --format markdown >> "$GITHUB_STEP_SUMMARY"
      gpubench report results/h200-bert-large/full --format table
    """
    if fmt is ReportFormat.html:
        from ..report.html import size_text, write_report

        path = write_report(result_dir, output, baseline)
        say(f"wrote {path} ({size_text(path)})")
        return
    from ..report import markdown, records
    from ..report.data import load
    from ..report.table import summary_table

    report = load(result_dir, baseline)
    if fmt in (ReportFormat.table, ReportFormat.csv):  # the markdown and the JSON hold their notes
        for text in report.notes:
            say(f"note: {text}")

    def table(console: Console) -> None:
        console.print(summary_table(report.summary, report.title))

    if fmt is ReportFormat.table and output is None:
        table(stdout_console())
        return
    renderers = {
        ReportFormat.markdown: lambda: markdown.render(report),
        ReportFormat.json: lambda: records.to_json(report),
        ReportFormat.csv: lambda: records.to_csv(report),
        ReportFormat.table: lambda: plain(table),
    }
    emit(renderers[fmt](), output)
