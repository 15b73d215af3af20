"""The terminal summary of a run: one rich table from the summarized results."""

from __future__ import annotations

import math

import pandas as pd
from rich.table import Table
from rich.text import Text

from ..fmt import pct, spec

STATUS_STYLE = {"ok": "green", "skipped": "yellow"}


def summary_table(summary: pd.DataFrame, title: str = "") -> Table:
    source = next((s for s in summary.get("peak_mem_source", []) if isinstance(s, str) and s), "")
    table = Table(title=Text(title) if title else None, title_justify="left")
    cvs = [v for v in summary.get("samples_per_s_cv_pct", []) if isinstance(v, float) and not math.isnan(v)]
    for column, justify in (
        ("scenario", "left"),
        ("status", "left"),
        ("samples/s ± CV" if cvs else "samples/s", "right"),  # CV: over the ok repeats
        ("vs base", "right"),
        (f"peak MB ({source or 'n/a'})", "right"),
        ("vs base", "right"),
        ("loss", "right"),
    ):
        table.add_column(column, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    table.add_column("note", overflow="ellipsis", no_wrap=True, max_width=70)
    for row in summary.to_dict("records"):
        status = row["status"]
        style = STATUS_STYLE.get(status, "red")
        sps = spec(row["samples_per_s"], ".2f")
        cv = row.get("samples_per_s_cv_pct")
        if isinstance(cv, float) and not math.isnan(cv):
            sps += f" ±{cv:.1f}%"
        table.add_row(  # text from the results is Text: "[bold]" in an error prints as written
            Text(str(row["scenario"])),
            f"[{style}]{status}[/{style}]",
            sps,
            pct(row["samples_per_s_vs_baseline_pct"]),
            spec(row["peak_mem_mb"], ".0f"),
            pct(row["peak_mem_mb_vs_baseline_pct"]),
            spec(row["final_loss"], ".4g"),  # a loss near 0 stays readable (4.8e-06)
            Text(str(row.get("error") or "")[:60]),
        )
    return table
