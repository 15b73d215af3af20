"""The report's answer sections, when the result directory holds one: `gpubench recommend`'s
(recommend.json: the recipe, the runner-up, the Pareto front and every candidate) and `gpubench
verify`'s (verify.json: each claim with its verdict). The same records the commands print, rendered
as HTML and markdown; a pooled report (several result directories) has none."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from ..fmt import md_cell, md_table
from ..recommend.answer import Answer, read_answer
from ..recommend.answer_text import HEADER as CANDIDATE_HEADER
from ..recommend.answer_text import ordered as ordered_candidates
from ..recommend.answer_text import row_cells, summary_lines
from ..verify.render import claimed_text, figure, interval_text, read_verify
from ..verify.verdict import VERDICTS
from .content import Report

VERIFY_HEADER = ("claim", "source", "claimed", "measured", "interval", "verdict", "why")
CANDIDATE_NUMERIC = ("samples/s", "peak MB", "pred MB", "J/sample")
VERIFY_NUMERIC = ("measured", "interval")


def _one_dir(report: Report) -> bool:
    return len(report.all_sources) == 1


def recommend_of(report: Report) -> Answer | None:
    return read_answer(report.source.parent) if _one_dir(report) else None


def verify_of(report: Report) -> dict[str, Any] | None:
    return read_verify(report.source.parent) if _one_dir(report) else None


def verdict_counts(records: Sequence[dict[str, Any]]) -> str:
    """'3 hold, 1 does not hold, ...' in the verdicts' own order, leaving out those none got."""
    counts = {v: sum(1 for r in records if r["verdict"] == v) for v in VERDICTS}
    return ", ".join(f"{n} {v}" for v, n in counts.items() if n)


def verify_headline(doc: dict[str, Any]) -> str:
    records = doc["results"]
    said = verdict_counts(records) or "no claims"
    smoke = "; measured on the CPU: a smoke test of the harness, not a verdict on any GPU"
    smoke = smoke if doc.get("smoke_test") else ""
    return f"{len(records)} claims ({doc.get('claims', '')}) on {doc.get('device', '?')}: {said}{smoke}"


def verify_rows(doc: dict[str, Any]) -> list[list[str]]:
    return [
        [r["id"], _source(r), claimed_text(r), figure(r["measured"]), interval_text(r), r["verdict"], r["explanation"]]
        for r in doc["results"]
    ]


def _source(r: dict[str, Any]) -> str:
    s = r["source"]
    return f"{s['document']}, {s['section']}"


# -- HTML --------------------------------------------------------------------------------------------
def html_sections(report: Report) -> list[str]:
    """The answer sections of a recommend or verify directory (empty for any other)."""
    sections = []
    answer = recommend_of(report)
    if answer is not None:
        sections.append(recommend_html(answer))
    doc = verify_of(report)
    if doc is not None:
        sections.append(verify_html(doc))
    return sections


def _table_html(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[str]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "\n".join(
        "<tr>"
        + "".join(
            f'<td class="num">{escape(c)}</td>' if header[i] in numeric else f"<td>{escape(c)}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f'<div class="scroll"><table>\n<tr>{head}</tr>\n{body}\n</table></div>'


def recommend_html(answer: Answer) -> str:
    lines = summary_lines(answer)
    rows = [row_cells(answer, r) for r in ordered_candidates(answer)]
    notes = "".join(f"<li>{escape(line)}</li>" for line in lines[1:])
    return (
        '<section id="recommend">\n<h2>Recommended recipe</h2>\n'
        f'<p><strong>{escape(lines[0])}</strong></p>\n<ul class="notes">{notes}</ul>\n'
        f"{_table_html(CANDIDATE_HEADER, rows, CANDIDATE_NUMERIC)}\n</section>"
    )


def verify_html(doc: dict[str, Any]) -> str:
    return (
        '<section id="verify">\n<h2>Claims, judged by measurement</h2>\n'
        f"<p><strong>{escape(verify_headline(doc))}</strong></p>\n"
        f"{_table_html(VERIFY_HEADER, verify_rows(doc), VERIFY_NUMERIC)}\n</section>"
    )


# -- markdown ----------------------------------------------------------------------------------------
def markdown_lines(report: Report) -> list[str]:
    lines: list[str] = []
    answer = recommend_of(report)
    if answer is not None:
        lines += recommend_markdown(answer)
    doc = verify_of(report)
    if doc is not None:
        lines += verify_markdown(doc)
    return lines


def recommend_markdown(answer: Answer) -> list[str]:
    said = summary_lines(answer)
    rows = [[md_cell(c) for c in row_cells(answer, r)] for r in ordered_candidates(answer)]
    numeric = [h in CANDIDATE_NUMERIC for h in CANDIDATE_HEADER]
    return [
        "",
        "### Recommended recipe",
        "",
        f"**{md_cell(said[0])}**",
        "",
        *[f"- {md_cell(line)}" for line in said[1:]],
        "",
        *md_table(CANDIDATE_HEADER, rows, numeric),
    ]


def verify_markdown(doc: dict[str, Any]) -> list[str]:
    rows = [[md_cell(c) for c in row] for row in verify_rows(doc)]
    numeric = [h in VERIFY_NUMERIC for h in VERIFY_HEADER]
    return [
        "",
        "### Claims, judged by measurement",
        "",
        f"**{md_cell(verify_headline(doc))}**",
        "",
        *md_table(VERIFY_HEADER, rows, numeric),
    ]
