"""`gpubench report`: a result set as a self-contained HTML page, a terminal table, markdown, JSON or CSV."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ..errors import BadInput
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
    result_dirs: Annotated[
        list[Path],
        typer.Argument(
            parser=path_value,
            metavar="DIR...",
            help="A result directory (or its results.csv), with env.json beside it; several are pooled into "
            "one report (scaling curves over runs made apart), and then html needs --output.",
        ),
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
            help="Write here. Default: DIR/report.html for html (given one DIR), stdout for the others.",
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
    map with the Pareto front marked, the failed and skipped scenarios with their reasons, and,
    where a strategy ran at two or more GPU counts, its scaling curves (samples/s and efficiency
    against GPUs). Several result directories are pooled into one report: a scenario name found in
    more than one is qualified by its directory, and the HTML goes where --output says.
    Markdown gives the summary table and the main findings; `gpubench run` writes the HTML
    report at the end of every run.

    Examples:
      gpubench report results/2026-11-29T10-00-00/
      gpubench report results/guide-table/full --format markdown >> "$GITHUB_STEP_SUMMARY"
      gpubench report results/guide-table/full --format table
      gpubench report results/multi-gpu/all-gpus results/multi-gpu/one-gpu -o scaling.html
    """
    if fmt is ReportFormat.html:
        from .. import api
        from ..report.html import size_text

        if len(result_dirs) > 1 and output is None:
            raise BadInput(
                f"{len(result_dirs)} result directories pooled into one HTML report: say where it goes with "
                "--output FILE (only a single DIR gets DIR/report.html)"
            )
        path = api.write_report(result_dirs, output, baseline)
        say(f"wrote {path} ({size_text(path)})")
        return
    from .. import api
    from ..report import markdown, records
    from ..report.table import summary_table

    report = api.report(result_dirs, baseline)
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
