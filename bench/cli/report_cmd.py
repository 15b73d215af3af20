"""`gpubench report`: a result set as a self-contained HTML page, or as markdown."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ..fsio import atomic_write_text
from .options import path_value


class ReportFormat(StrEnum):
    html = "html"
    markdown = "markdown"


def register(app: typer.Typer) -> None:
    app.command("report")(report_command)


def report_command(
    result_dir: Annotated[
        Path,
        typer.Argument(parser=path_value, help="A result directory (or its results.csv), with env.json beside it."),
    ],
    fmt: Annotated[
        ReportFormat, typer.Option("--format", "-f", help="html: a file; markdown: printed.")
    ] = ReportFormat.html,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            parser=path_value,
            help="Write here. Default: DIR/report.html for html, stdout for markdown.",
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(help="The scenario changes are measured against. Default: baseline (else the first)."),
    ] = None,
) -> None:
    """Turn a result set into a report: HTML with charts, or markdown for a pull request.

    The HTML file is self-contained (inline CSS and SVG charts, no scripts, no network): the
    environment, the summary table, throughput and peak-memory bar charts, a speed-versus-memory
    map with the Pareto front marked, and the failed and skipped scenarios with their reasons.
    Markdown gives the summary table and the main findings; `gpubench run` writes the HTML
    report at the end of every run.

    Examples:
      gpubench report results/2026-11-29T10-00-00/
      gpubench report results/h200-bert-large/full --format markdown >> "$GITHUB_STEP_SUMMARY"
    """
    err = Console(stderr=True)
    if fmt is ReportFormat.html:
        from ..report.html import size_text, write_report

        path = write_report(result_dir, output, baseline)
        err.print(f"gpubench: wrote {path} ({size_text(path)})", highlight=False, markup=False, soft_wrap=True)
        return
    from ..report.data import load
    from ..report.markdown import render

    text = render(load(result_dir, baseline))
    if output is None:
        typer.echo(text, nl=False)
        return
    atomic_write_text(output, text)
    err.print(f"gpubench: wrote {output}", highlight=False, markup=False, soft_wrap=True)
