"""Numbers and markdown as every renderer writes them (terminal tables, markdown, HTML, history).

A missing figure (None, NaN, inf) is `dash`: "-" in plain text, "–" in the report's typography.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from .metrics import BY_NAME, METRICS

MINUS = "−"  # the report's typographic minus
# a figure's name in a terminal table, where width is short (CSV, JSON and markdown keep the column name)
METRIC_LABELS = {m.name: m.label for m in METRICS}
METRIC_DECIMALS = {m.name: m.decimals for m in METRICS if m.decimals is not None}  # the others: 4 digits


def missing(value: Any) -> bool:
    """None, or a float that is not a finite number."""
    return value is None or (isinstance(value, float) and not math.isfinite(value))


def num(value: Any, decimals: int = 2, *, dash: str = "-") -> str:
    """1234.5 -> '1,234.50'; missing -> dash."""
    return dash if missing(value) else f"{float(value):,.{decimals}f}"


def spec(value: Any, format_spec: str, *, dash: str = "-") -> str:
    """format(value, format_spec); missing -> dash."""
    return dash if missing(value) else format(value, format_spec)


def pct(value: Any, *, sign: bool = True, typographic: bool = False, dash: str = "-") -> str:
    """12.34 -> '+12.3%' ('12.3%' without sign; '−12.3%' with the typographic minus); missing -> dash."""
    if missing(value):
        return dash
    text = f"{float(value):+.1f}%" if sign else f"{float(value):.1f}%"
    return text.replace("-", MINUS) if typographic else text


def metric_num(value: Any, metric: str) -> str:
    """A figure as its metric is shown: peak MB whole, a loss near 0 still readable (4.858e-06)."""
    if metric in BY_NAME and BY_NAME[metric].decimals is None:
        return spec(value, ".4g")
    return num(value, METRIC_DECIMALS.get(metric, 2))


def noise_tag(judged: Any, short: bool = False) -> str:
    """What a change vs the baseline is worth, after its figure (summarize's METRIC_vs_baseline_noise):
    " (noise)" within the noise of the repeats, " (1 run)" / " (2 runs)" too few to tell, "" beyond.
    `short` (the terminal summary, where width is scarce): " ~" within the noise, " ?" too few."""
    if not isinstance(judged, str) or judged in ("", "beyond"):
        return ""
    if short:
        return " ~" if judged == "within" else " ?"
    return " (noise)" if judged == "within" else f" ({judged})"


def noise_legend(judged: Iterable[Any], short: bool = False) -> str:
    """What the tags among these judgements mean (summarize's METRIC_vs_baseline_noise); "" for none."""
    tags = {noise_tag(j, short).strip() for j in judged} - {""}
    parts = []
    if short:
        if "~" in tags:
            parts.append("~ within the noise: the min–max ranges over repeats overlap the baseline's")
        if "?" in tags:
            parts.append("? too few repeats (1 or 2) to tell a change from noise")
        return "; ".join(parts)
    if "(noise)" in tags:
        parts.append("(noise): within the noise, the min–max ranges over repeats overlap the baseline's")
    few = sorted(tags - {"(noise)"})
    if few:
        parts.append(f"{', '.join(few)}: too few repeats to tell a change from noise")
    return "; ".join(parts)


def mem_size(mb: float | None) -> str:
    """24576 -> '24.0 GB', 170 -> '170 MB' (1 GB = 1024 MB, as --gpu-memory); '-' for None."""
    if mb is None:
        return "-"
    return f"{mb / 1024:,.1f} GB" if mb >= 1024 else f"{mb:,.0f} MB"


def sentence(text: str) -> str:
    """A note as a sentence: a capital first letter and a full stop."""
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def fmt_date(value: Any) -> str:
    """An ISO timestamp as "YYYY-MM-DD HH:MM UTC"; other text as is; "" for nothing."""
    if not isinstance(value, str) or not value:
        return ""
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError:
        return value
    if stamp.tzinfo is not None:
        stamp = stamp.astimezone(UTC)
    return stamp.strftime("%Y-%m-%d %H:%M UTC")


def md_cell(text: Any) -> str:
    """Text safe in a markdown table cell: no pipes, no line breaks, no raw HTML (a scenario name
    from a hand-written results.csv could hold a tag); other markup kept."""
    escaped = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return " ".join(escaped.replace("|", "\\|").splitlines())


def md_code(text: Any) -> str:
    """Text as an inline code span on one line, whatever backticks it holds."""
    flat = " ".join(str(text).splitlines())
    fence = "`" * (max((len(run) for run in re.findall("`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def md_text(text: Any) -> str:
    """Text safe in a markdown table cell or list item: no pipes, no line breaks, no markup."""
    out = str(text).replace("\\", "\\\\").replace("\r", " ").replace("\n", " ")
    for char in "|*_`<>[]":
        out = out.replace(char, "\\" + char)
    return out


# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_escape(value: Any) -> Any:
    """A text cell for a CSV file that may be opened in a spreadsheet: one starting with a formula
    character, or with the ' that marks an escaped one, gets a leading '. Numbers are left alone
    (-0.5 stays a number), and csv_unescape gives the text back exactly."""
    if isinstance(value, str) and value.startswith((*FORMULA_START, "'")):
        return "'" + value
    return value


def csv_unescape(value: Any) -> Any:
    """The text csv_escape was given."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == "'" and value[1:].startswith((*FORMULA_START, "'")):
        return value[1:]
    return value


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool] | None = None) -> list[str]:
    """A GitHub markdown table of cells already escaped. With `numeric`, padded to line up (text
    left-aligned, numbers right-aligned); without, compact."""
    if numeric is None:
        return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + [
            "| " + " | ".join(row) + " |" for row in rows
        ]
    cells = [list(header), *[list(row) for row in rows]]
    widths = [max(3, *(len(row[i]) for row in cells)) for i in range(len(header))]

    def line(row: list[str]) -> str:
        padded = (c.rjust(w) if right else c.ljust(w) for c, w, right in zip(row, widths, numeric, strict=True))
        return "| " + " | ".join(padded) + " |"

    rule = "|".join(
        ("-" * (w + 1) + ":") if right else (":" + "-" * (w + 1)) for w, right in zip(widths, numeric, strict=True)
    )
    return [line(cells[0]), "|" + rule + "|", *[line(row) for row in cells[1:]]]


# -- the report's typography (HTML, markdown, charts): an en dash for nothing, a true minus --------
def fmt_num(value: Any, decimals: int) -> str:
    return num(value, decimals, dash="–")


def fmt_pct(value: Any) -> str:
    return pct(value, typographic=True, dash="–")


def toml_value(value: Any) -> str:
    """A TOML value for a bool, number or string (a basic string is a JSON string): what gpubench
    writes into the matrices it generates (recommend's certificate, verify's scenarios, the tests')."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    raise TypeError(f"no TOML for {value!r}")
