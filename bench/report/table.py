"""The terminal summary of a run: one table from the summarized results, fitted to the terminal."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from rich.text import Text

from ..fmt import noise_legend, noise_tag, num, pct, spec
from ..results import NOISE_COLUMNS
from ..results.summary import mixed_models, other_model_note, shown_loss
from ..termtable import Column, FitTable

STATUS_STYLE = {"ok": "green", "skipped": "yellow"}
NOTE_CHARS = 100  # a worker's error, cut here in the table (results.csv and the reports hold it whole)


def summary_table(summary: pd.DataFrame, title: str = "") -> FitTable:
    """One row per scenario. At narrow widths the loss goes first, then the memory's change vs the
    baseline, then the notes move under the table, then the speed's change, the peak memory, the
    GPUs and the scaling efficiency (those two only where a row has several processes)."""
    source = next((s for s in summary.get("peak_mem_source", []) if isinstance(s, str) and s), "")
    cvs = [v for v in summary.get("samples_per_s_cv_pct", []) if isinstance(v, float) and not math.isnan(v)]
    models = mixed_models(summary)
    columns = [
        Column("scenario", name=True),
        Column("status"),
        Column("model"),  # only where the scenarios train more than one model ("-" columns are left out)
        Column("samples/s ± CV" if cvs else "samples/s", right=True),  # CV: over the ok repeats
        Column("vs base", right=True, drop=4),
        Column("GPUs", right=True, drop=6),  # multi-process rows only ("-" columns are left out)
        Column("scaling", right=True, drop=7),
        Column("peak MB", right=True, drop=5),
        Column("vs base", right=True, drop=2),
        Column("loss", right=True, drop=1),
        Column("held-out acc", right=True, drop=10),  # eval_samples rows only ("-" columns are left out)
        Column("parity", drop=9),  # vs the loss reference (bench/results/parity.py); "-" columns are left out
        Column("bound", drop=8),  # GPU rows only (bench/results/bound.py; "-" columns are left out)
        Column("note", note=True, drop=3),
    ]
    rows = []
    for row in summary.to_dict("records"):
        status = row["status"]
        sps = spec(row["samples_per_s"], ".2f")
        cv = row.get("samples_per_s_cv_pct")
        if isinstance(cv, float) and not math.isnan(cv):
            sps += f" ±{cv:.1f}%"
        notes = (str(row.get(k) or "") for k in ("training_note", "flops_note", "steadiness"))
        error = str(row.get("error") or "") or "; ".join(n for n in notes if n)
        rows.append(
            [
                row["scenario"],
                Text(status, style=STATUS_STYLE.get(status, "red")),
                str(row.get("model") or "-") if models else "-",
                sps,
                _vs(row, "samples_per_s"),
                num(row.get("world_size"), 0),
                spec(row.get("scaling_efficiency"), ".0%"),
                num(row["peak_mem_mb"], 0),
                _vs(row, "peak_mem_mb"),
                spec(shown_loss(row), ".4g"),  # a loss near 0 stays readable (4.8e-06)
                spec(row.get("eval_accuracy"), ".1%"),
                parity_cell(row),
                str(row.get("bound") or "-"),
                error if len(error) <= NOTE_CHARS else error[: NOTE_CHARS - 1] + "…",
            ]
        )
    legend = noise_legend((v for c in NOISE_COLUMNS if c in summary for v in summary[c]), short=True)
    footer = [f"peak MB source: {source}"] if source else []
    footer += [other_model_note(summary)] if other_model_note(summary) else []
    return FitTable(columns, rows, title=title, footer=footer + ([legend] if legend else []))


def parity_cell(row: dict[str, Any]) -> str:
    """'equivalent', 'deviates +0.41', 'diverged'; '-' where not judged (the reference: 'ref')."""
    verdict = row.get("parity")
    if not isinstance(verdict, str) or not verdict:
        return "-"
    if verdict == "reference":
        return "ref"
    delta = row.get("parity_delta")
    if verdict == "deviates" and isinstance(delta, float) and math.isfinite(delta):
        return f"deviates {delta:+.3g}"
    return verdict


def _vs(row: dict[str, Any], metric: str) -> str:
    """The change vs the baseline, tagged with what it is worth: +3.1% ~ (noise), +3.1% ? (too few runs)."""
    return pct(row[f"{metric}_vs_baseline_pct"]) + noise_tag(row.get(f"{metric}_vs_baseline_noise"), short=True)
