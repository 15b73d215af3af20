"""The report's summary as records, one per scenario: `gpubench report --format csv|json`."""

from __future__ import annotations

import json
import math
from typing import Any

from .content import Report

JSON_SCHEMA = "gpubench.report/1"
SUMMARY_COLUMNS = [
    "scenario",
    "model",  # the model's short name (bench/results/summary.py model_label)
    "status",
    "repeats",
    "ok",
    "samples_per_s",
    "samples_per_s_cv_pct",
    "samples_per_s_vs_baseline_pct",
    "peak_mem_mb",
    "peak_mem_source",
    "peak_mem_mb_vs_baseline_pct",
    "torch_max_allocated_mb",
    "final_loss",
    "mfu",
    "is_baseline",
    "pareto",
    "error",
]


def to_csv(report: Report) -> str:
    return report.summary.to_csv(index=False, columns=SUMMARY_COLUMNS)


def to_data(report: Report) -> dict[str, Any]:
    """The JSON document; its keys are locked by a test."""
    return {
        "schema": JSON_SCHEMA,
        "title": report.title,
        "source": str(report.source),
        "baseline": report.baseline,
        "env": report.env,
        "notes": list(report.notes),
        "scenarios": [{c: _plain(row[c]) for c in SUMMARY_COLUMNS} for row in report.summary.to_dict("records")],
    }


def to_json(report: Report) -> str:
    return json.dumps(to_data(report), indent=2) + "\n"


def _plain(value: Any) -> Any:
    if hasattr(value, "item") and not isinstance(value, str):  # numpy scalars
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
