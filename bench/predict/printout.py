"""`gpubench predict` output: a rich table per report (and a check table with measurements), or JSON."""

from __future__ import annotations

import csv
import io
import json
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from ..fmt import md_cell, md_table
from ..memory.terms import MB
from ..termtable import Column, FitTable
from .measured import error_pct

if TYPE_CHECKING:
    from ..memory.prediction import Prediction
    from .predictions import PredictReport, ScenarioMemory

JSON_SCHEMA = "gpubench.predict/1"
TERMS = ("weights", "autocast_copies", "grads", "optimizer", "optimizer_temp", "activations", "workspace")
RECORD_COLUMNS = [
    "scenario",
    "params",
    *(f"{t}_mb" for t in TERMS),
    "peak_mb",
    "peak_phase",
    "peak_term",
    "need_mb",
    "fits",
]
CHECKS = (
    ("weights", "weights"),
    ("forward", "after fwd"),
    ("grads_workspace", "grads+ws"),
    ("optimizer", "optimizer"),
    ("peak", "peak"),
)


NOT_PREDICTED = "not predicted"


def _mb(nbytes: int | None) -> str:
    return NOT_PREDICTED if nbytes is None else f"{nbytes / MB:,.0f}"


def _rounded_mb(nbytes: int | None) -> float | None:
    return None if nbytes is None else round(nbytes / MB, 1)


def _peak(p: Prediction) -> str:
    """The peak; '>=' where it leaves the activations out (a lower bound)."""
    return _mb(p.peak) if p.activations_predicted else f">={_mb(p.peak)}"


def _fits(fits: bool | None) -> Text:
    if fits is None:  # --gpu-memory given, but the peak is only a lower bound that fits
        return Text("unknown", style="yellow")
    return Text("yes", style="green") if fits else Text("no", style="red")


# the breakdown's columns: the scenario, its peak, need and verdict always; the terms go first when
# the terminal is narrow (their sum is the peak), named under the table
BREAKDOWN_COLUMNS = (
    Column("scenario", name=True),
    Column("params", right=True, drop=9),
    Column("weights", right=True, drop=7),
    Column("half copies", right=True, drop=2),
    Column("grads", right=True, drop=5),
    Column("optimizer", right=True, drop=6),
    Column("step temp", right=True, drop=3),
    Column("activations", right=True, drop=8),
    Column("workspace", right=True, drop=4),
    Column("peak", right=True),
    Column("at", drop=1),
)


def breakdown_table(report: PredictReport) -> FitTable:
    columns = list(BREAKDOWN_COLUMNS)
    if report.gpu_memory_mb is not None:
        columns += [Column("need", right=True), Column(f"fits {report.gpu_memory_mb:,.0f}")]
    rows: list[list[str | Text]] = []
    for row in report.rows:
        p = row.prediction
        cells: list[str | Text] = [
            row.scenario.name,
            f"{p.params / 1e6:,.1f}M",
            *(_mb(p.term(term)) for term in TERMS),
            _peak(p),
            f"{p.peak_phase}: {p.peak_term}",
        ]
        if report.gpu_memory_mb is not None:
            cells += [f"{row.need_mb:,.0f}", _fits(row.fits)]
        rows.append(cells)
    title = f"{report.matrix}: predicted torch-allocated memory per scenario (MB = 2^20 bytes)"
    return FitTable(columns, rows, title=title)


def check_table(report: PredictReport) -> FitTable:
    """Predicted / measured / error per term, for scenarios the calibration run measured."""
    columns = [Column("scenario", name=True)]
    columns += [Column(label, right=True, drop=0 if key == "peak" else 1 + i) for i, (key, label) in enumerate(CHECKS)]
    rows = [[row.scenario.name, *[_check(row, key) for key, _ in CHECKS]] for row in report.rows if row.measured]
    title = "predicted / measured MB (error %), from the calibration run's phase marks"
    return FitTable(columns, rows, title=title)


def _check(row: ScenarioMemory, key: str) -> str:
    predicted, measured = row.predicted.get(key), row.measured.get(key)
    if measured is None or predicted is None:
        return "-"
    err = error_pct(predicted, measured)
    text = f"{predicted:,.0f} / {measured:,.0f}"
    return f"{text} ({err:+.1f}%)" if err is not None else text


def print_report(report: PredictReport, console: Console) -> None:
    console.print(breakdown_table(report))
    # below the table, never wrapped inside it: the source names a path, which must stay whole
    console.print(report.calibration.source, highlight=False, markup=False, soft_wrap=True)
    if any(row.measured for row in report.rows):
        console.print(check_table(report))
        console.print(
            "'-': not measured (torch.compile has no forward mark), or the first optimizer-step mark "
            "came before any state existed (fp16's GradScaler skipped the step, or accelerate was "
            "accumulating)",
            highlight=False,
            markup=False,
        )


def notes(report: PredictReport) -> list[str]:
    """The predictions' caveats, one line each (the CLI prints them on stderr)."""
    return [f"{row.scenario.name}: {note}" for row in report.rows for note in row.prediction.notes]


def records(report: PredictReport) -> list[dict[str, Any]]:
    """One flat record per scenario (RECORD_COLUMNS), in MB: the CSV and markdown formats."""
    out = []
    for row in report.rows:
        p = row.prediction
        terms = {f"{term}_mb": _rounded_mb(p.term(term)) for term in TERMS}
        out.append(
            {
                "scenario": row.scenario.name,
                "params": p.params,
                **terms,
                "peak_mb": round(p.peak / MB, 1),
                "peak_phase": p.peak_phase,
                "peak_term": p.peak_term,
                "need_mb": round(row.need_mb, 1),
                "fits": row.fits,  # None without --gpu-memory (or unknown: ScenarioMemory)
            }
        )
    return out


def to_csv(report: PredictReport) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, RECORD_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(records(report))
    return buffer.getvalue()


def to_markdown(report: PredictReport) -> str:
    rows = [[md_cell("-" if r[c] is None else r[c]) for c in RECORD_COLUMNS] for r in records(report)]
    title = f"## gpubench predict: {md_cell(report.matrix)} (MB = 2^20 bytes)"
    lines = [title, "", md_cell(report.calibration.source), "", *md_table(RECORD_COLUMNS, rows)]
    return "\n".join(lines) + "\n"


def to_data(report: PredictReport) -> dict[str, Any]:
    def scenario(row: ScenarioMemory) -> dict[str, Any]:
        p = row.prediction
        terms = {k: None if (v := p.term(k)) is None else v / MB for k in TERMS}
        return {
            "scenario": row.scenario.name,
            "model": row.model,
            "params": p.params,
            "terms_mb": terms,
            "phases_mb": {k: v / MB for k, v in p.phases.items()},
            "peak_mb": p.peak / MB,
            "peak_phase": p.peak_phase,
            "peak_term": p.peak_term,
            "need_mb": row.need_mb,
            "fits": row.fits,
            "measured_mb": row.measured,
            "predicted_counterparts_mb": row.predicted if row.measured else {},
            "notes": list(p.notes),
        }

    return {
        "schema": JSON_SCHEMA,
        "matrix": report.matrix,
        "unit": "MB = 2**20 bytes",
        "calibration": {
            "source": report.calibration.source,
            "context_mb": report.calibration.context_mb,
            "measured": report.calibration.measured,
        },
        "gpu_memory_mb": report.gpu_memory_mb,
        "scenarios": [scenario(r) for r in report.rows],
    }


def to_json(report: PredictReport) -> str:
    return json.dumps(to_data(report), indent=2) + "\n"
