"""The terminal summary of a run: one rich table from the summarized results."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from rich.table import Table

from ..fmt import noise_legend, noise_tag, pct, spec
from ..results import NOISE_COLUMNS

STATUS_STYLE = {"ok": "green", "skipped": "yellow"}


def summary_table(summary: pd.DataFrame, title: str = "") -> Table:
    source = next((s for s in summary.get("peak_mem_source", []) if isinstance(s, str) and s), "")
    table = Table(title=title or None, title_justify="left")
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
        table.add_row(
            row["scenario"],
            f"[{style}]{status}[/{style}]",
            sps,
            _vs(row, "samples_per_s"),
            spec(row["peak_mem_mb"], ".0f"),
            _vs(row, "peak_mem_mb"),
            spec(row["final_loss"], ".4g"),  # a loss near 0 stays readable (4.8e-06)
            str(row.get("error") or "")[:60],
        )
    legend = noise_legend(v for c in NOISE_COLUMNS if c in summary for v in summary[c])
    if legend:
        table.caption, table.caption_justify = legend, "left"
    return table


def _vs(row: dict[str, Any], metric: str) -> str:
    """The change vs the baseline, tagged with what it is worth: +3.1% (noise), +3.1% (1 run)."""
    return pct(row[f"{metric}_vs_baseline_pct"]) + noise_tag(row.get(f"{metric}_vs_baseline_noise"))
