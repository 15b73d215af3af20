"""`gpubench verify`'s outputs, from the claims' records (verify.json's "results"): the terminal
table, markdown, JSON and CSV; and the verdicts that changed between two verify runs (compare)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..fmt import csv_escape, md_cell, md_table
from ..termtable import Column, FitTable

CSV_COLUMNS = [
    "id", "file", "quantity", "unit", "claimed", "direction", "tolerance_pct", "measured", "interval_low",
    "interval_high", "verdict", "repeats_needed", "bound", "explanation", "document", "section", "url",
]  # fmt: skip


def figure(value: Any) -> str:
    return "-" if value is None else f"{value:.3g}"


def claimed_text(r: dict[str, Any]) -> str:
    c, unit = r["claimed"], r["unit"]
    low, high = c["region"]
    if c["direction"] == "higher":
        return f"{c['value']:g} {unit} (>= {low:.3g})"
    if c["direction"] == "lower":
        return f"{c['value']:g} {unit} (<= {high:.3g})"
    return f"{c['value']:g} {unit} ({low:.3g}-{high:.3g})"


def interval_text(r: dict[str, Any]) -> str:
    if r["interval"] is None:
        return "-"
    low, high = r["interval"]
    return "exact" if low == high else f"{low:.3g}-{high:.3g}"


def table(records: Sequence[dict[str, Any]], title: str, footer: Sequence[str] = ()) -> FitTable:
    columns = [
        Column("claim", name=True),
        Column("quantity", drop=2),
        Column("claimed"),
        Column("measured", right=True),
        Column("interval", right=True, drop=1),
        Column("verdict"),
        Column("why", note=True, drop=3),
    ]
    rows = [
        [
            r["id"],
            r["quantity"],
            claimed_text(r),
            figure(r["measured"]),
            interval_text(r),
            r["verdict"],
            r["explanation"],
        ]
        for r in records
    ]
    return FitTable(columns, rows, title=title, footer=list(footer))


def to_markdown(records: Sequence[dict[str, Any]], title: str) -> str:
    header = ["claim", "source", "claimed", "measured", "interval", "verdict", "why"]
    rows = [
        [
            md_cell(r["id"]),
            md_cell(_source(r)),
            md_cell(claimed_text(r)),
            figure(r["measured"]),
            md_cell(interval_text(r)),
            f"**{r['verdict']}**",
            md_cell(r["explanation"]),
        ]
        for r in records
    ]
    return "\n".join([f"## {md_cell(title)}", "", *md_table(header, rows), ""]) + "\n"


def _source(r: dict[str, Any]) -> str:
    s = r["source"]
    text = f"{s['document']}, {s['section']}"
    return f"[{text}]({s['url']})" if s.get("url") else text


def to_json(records: Sequence[dict[str, Any]]) -> str:
    return json.dumps(list(records), indent=2) + "\n"


def to_csv(records: Sequence[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for r in records:
        c, s, interval = r["claimed"], r["source"], r["interval"] or [None, None]
        row = {
            "id": r["id"], "file": r["file"], "quantity": r["quantity"], "unit": r["unit"], "claimed": c["value"],
            "direction": c["direction"], "tolerance_pct": c["tolerance_pct"], "measured": r["measured"],
            "interval_low": interval[0], "interval_high": interval[1], "verdict": r["verdict"],
            "repeats_needed": r["repeats_needed"], "bound": r["bound"], "explanation": r["explanation"],
            "document": s["document"], "section": s["section"], "url": s.get("url", ""),
        }  # fmt: skip
        writer.writerow({k: csv_escape(v) for k, v in row.items()})
    return buffer.getvalue()


def render(records: Sequence[dict[str, Any]], fmt: str, title: str) -> str:
    if fmt == "markdown":
        return to_markdown(records, title)
    if fmt == "json":
        return to_json(records)
    return to_csv(records)


# -- compare: the verdicts that changed between two verify runs --------------------------------------
def read_verify(result_dir: Path) -> dict[str, Any] | None:
    """DIR/verify.json (None when the directory holds none: not a verify run)."""
    from .verifying import VERIFY_JSON

    path = (result_dir if result_dir.is_dir() else result_dir.parent) / VERIFY_JSON
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        results = data["results"]
        if not isinstance(results, list) or not all(isinstance(r, dict) and "id" in r for r in results):
            raise ValueError("results is not a list of claims")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BadInput(f"{path}: not a verify.json gpubench wrote: {exc}") from None
    return data


def verdict_changes(base: dict[str, Any], new: dict[str, Any]) -> list[list[str]]:
    """[claim, base verdict, new verdict, base figure, new figure] for each claim whose verdict
    differs (or that one run lacks), in the base's order then the new's."""
    a = {r["id"]: r for r in base["results"]}
    b = {r["id"]: r for r in new["results"]}
    rows = []
    for cid in [*a, *(k for k in b if k not in a)]:
        old, now = a.get(cid), b.get(cid)
        if old is not None and now is not None and old.get("verdict") == now.get("verdict"):
            continue
        rows.append(
            [
                cid,
                old["verdict"] if old else "absent",
                now["verdict"] if now else "absent",
                figure(old.get("measured")) if old else "-",
                figure(now.get("measured")) if now else "-",
            ]
        )
    return rows


CHANGE_HEADER = ["claim", "base verdict", "new verdict", "base measured", "new measured"]


def changes_text(rows: list[list[str]], compared: int) -> str:
    """The verdict-change section as plain lines (compare prints it before its gate)."""
    if not rows:
        return f"verify verdicts: none of {compared} claims changed\n"
    width = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(CHANGE_HEADER)]
    lines = [f"verify verdicts that changed ({len(rows)} of {compared} claims):"]
    for row in [CHANGE_HEADER, *rows]:
        lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, width, strict=True)).rstrip())
    return "\n".join(lines) + "\n"
