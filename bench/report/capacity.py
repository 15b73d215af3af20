"""The report's capacity section, when the result directory holds a fit summary (`gpubench fit`):
the largest value each scenario trains with, the probes behind it, and the front "fastest recipe
that fits in N GB" (HTML with a chart from charts.fit_chart, and markdown)."""

from __future__ import annotations

from html import escape
from typing import Any

from ..fit.capacity_summary import (
    TABLE_HEADER,
    FitSummary,
    front,
    headline,
    ranked,
    read_summary,
    table_rows,
    text_lines,
)
from ..fmt import md_table, md_text
from .content import Report

NUMERIC = ("predicted", "largest ok", "smallest oom", "samples/s")


def fit_of(report: Report) -> FitSummary | None:
    """The fit summary beside a report's one results.csv (a pooled report has none)."""
    return read_summary(report.source.parent) if len(report.all_sources) == 1 else None


def caption(summary: FitSummary) -> str:
    return (
        f"Each scenario at the largest {summary.dimension} a probe trained with, fastest first; "
        f"orange bars, marked [front], are the front (no other recipe is both faster and lighter there). "
        f"Out of memory means: {summary.mechanism}. Memory: {summary.memory_source}."
    )


def html_section(summary: FitSummary, svg: str) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in TABLE_HEADER)
    body = "\n".join("<tr>" + "".join(_cell(i, c) for i, c in enumerate(row)) + "</tr>" for row in table_rows(summary))
    ranking = "".join(f"<li>{escape(line.strip())}</li>" for line in text_lines(summary)[1:])
    return (
        f'<section id="fit">\n<h2>Capacity: the largest {escape(summary.dimension)} that trains</h2>\n'
        f"<p><strong>{escape(headline(summary))}</strong></p>\n"
        f'<div class="scroll"><table>\n<tr>{head}</tr>\n{body}\n</table></div>\n'
        f"<figure>\n{svg}\n<figcaption>{escape(caption(summary))}</figcaption>\n</figure>\n"
        f'<ol class="notes">{ranking}</ol>\n</section>'
    )


def _cell(index: int, text: str) -> str:
    numeric = TABLE_HEADER[index] in NUMERIC
    return f'<td class="num">{escape(text)}</td>' if numeric else f"<td>{escape(text)}</td>"


def markdown_lines(summary: FitSummary) -> list[str]:
    rows = [[md_text(c) for c in row] for row in table_rows(summary)]
    lines = [
        "",
        f"### Capacity: the largest {summary.dimension} that trains",
        "",
        f"**{md_text(headline(summary))}**",
        "",
    ]
    lines += md_table(TABLE_HEADER, rows)
    lines += ["", *[md_text(line.strip()) for line in text_lines(summary)[1:]]]  # "1. ...": a numbered list
    return [*lines, "", f"_{md_text(caption(summary))}_"]


def chart_points(summary: FitSummary) -> list[dict[str, Any]]:
    """One point per recipe with a fitting value, fastest first: name, value, samples/s, on the front."""
    mark = {f.scenario for f in front(summary)}
    return [
        {
            "scenario": f.scenario,
            "value": f.largest_ok,
            "samples_per_s": f.samples_per_s,
            "front": f.scenario in mark,
        }
        for f in ranked(summary)
    ]
