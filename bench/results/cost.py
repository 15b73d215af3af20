"""What training a whole run would take, from a row's measured throughput and energy: the time
and energy to train D tokens (or samples) at the row's own rate, the GPU-hours and, given a price
per GPU-hour, the bill; beside it the seed's C = 6PD (P: the model's parameters, D: tokens) and the
time that many FLOPs take at the row's achieved FLOP rate. Pure arithmetic on measured figures
(medians over a scenario's ok repeats): nothing here is argued from a datasheet. A projection that
overflows (no finite number) is refused, so no format ever shows or writes Infinity or NaN.
`render` gives the rows as JSON, CSV or markdown; the terminal table is the command's."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from ..errors import BadInput
from ..fmt import csv_escape, md_cell, md_table, num

SCHEMA = "gpubench.cost/1"
# the key of each row, and its header where a table shows it (CSV and JSON keep the key)
KEYS = ("scenario", "unit", "work", "gpus", "hours", "gpu_hours", "energy_kwh", "price", "flops_6pd", "hours_6pd")
HEADERS = {"scenario": "scenario", "hours": "hours", "gpu_hours": "GPU-hours", "energy_kwh": "kWh", "price": "price",
           "flops_6pd": "6PD FLOPs", "hours_6pd": "hours at 6PD"}  # fmt: skip
LARGE = 1e9  # a figure from here on is shown as 1.23e+09: never a line of digits that squeezes the names

FIGURES = ("samples_per_s", "tokens_per_s", "energy_per_sample_j", "energy_per_token_j", "achieved_tflops",
           "model_params", "world_size")  # fmt: skip


def _median(frame: pd.DataFrame, column: str) -> float | None:
    if column not in frame:
        return None
    values = pd.to_numeric(frame[column], errors="coerce").dropna()
    return float(values.median()) if len(values) else None


def project(
    frame: pd.DataFrame,
    tokens: float | None = None,
    samples: float | None = None,
    price_per_gpu_hour: float | None = None,
) -> list[dict[str, Any]]:
    """One projection per scenario with ok rows (matrix order); exactly one of tokens and samples."""
    if (tokens is None) == (samples is None):
        raise BadInput("give the work to project: --train-tokens N or --train-samples N (one of them)")
    for name, value in (
        ("--train-tokens", tokens),
        ("--train-samples", samples),
        ("--price-per-gpu-hour", price_per_gpu_hour),
    ):
        if value is not None and (not math.isfinite(value) or value <= 0):
            raise BadInput(f"{name} {value!r}: must be a positive number")
    out = []
    for scenario, group in frame.groupby("scenario", sort=False):
        ok = group[group["status"] == "ok"]
        if ok.empty:
            continue
        f = {k: _median(ok, k) for k in FIGURES}
        unit, work = ("tokens", tokens) if tokens is not None else ("samples", samples)
        assert work is not None
        rate = f["tokens_per_s"] if unit == "tokens" else f["samples_per_s"]
        per_j = f["energy_per_token_j"] if unit == "tokens" else f["energy_per_sample_j"]
        gpus = f["world_size"] or 1.0
        row: dict[str, Any] = {"scenario": scenario, "unit": unit, "work": work, "gpus": gpus}
        hours: float | None = work / rate / 3600 if rate else None
        row["hours"] = hours
        row["gpu_hours"] = hours * gpus if hours is not None else None
        row["energy_kwh"] = per_j * work / 3.6e6 if per_j else None
        row["price"] = row["gpu_hours"] * price_per_gpu_hour if price_per_gpu_hour and row["gpu_hours"] else None
        tps, sps = f["tokens_per_s"], f["samples_per_s"]
        d_tokens = tokens if tokens is not None else (work * tps / sps if tps and sps else None)
        row["flops_6pd"] = 6 * f["model_params"] * d_tokens if f["model_params"] and d_tokens else None
        achieved = f["achieved_tflops"]
        row["hours_6pd"] = row["flops_6pd"] / (achieved * 1e12) / 3600 if row["flops_6pd"] and achieved else None
        _check_finite(row, "--train-tokens" if tokens is not None else "--train-samples", price_per_gpu_hour)
        out.append(row)
    if not out:
        raise BadInput("no scenario has an ok row to project from")
    return out


def _check_finite(row: dict[str, Any], flag: str, price: float | None) -> None:
    """BadInput when a projected figure overflowed (inf) or is not a number."""
    for key in KEYS[2:]:
        value = row[key]
        if isinstance(value, float) and not math.isfinite(value):
            given = f"{flag} {row['work']:g}" + (f" and --price-per-gpu-hour {price:g}" if price else "")
            raise BadInput(
                f"{given}: scenario '{row['scenario']}' projects {key} = {value}, not a finite number",
                hint="give less work (or a lower price)",
            )


def cell(key: str, value: Any) -> str:
    """A figure as the table and markdown show it: 2 decimals, a large one as 1.23e+12, none as -."""
    if key == "scenario":
        return str(value)
    if isinstance(value, int | float) and not isinstance(value, bool) and abs(value) >= LARGE:
        return f"{value:.3g}"
    return num(value, 2)


def render(rows: Sequence[dict[str, Any]], fmt: str) -> str:
    """The projection as JSON (schema gpubench.cost/1), CSV (one row per scenario, KEYS) or markdown."""
    if fmt == "json":
        return (
            json.dumps({"schema": SCHEMA, "rows": [{k: r[k] for k in KEYS} for r in rows]}, indent=2, default=str)
            + "\n"
        )
    if fmt == "csv":
        return (
            pd.DataFrame([{k: r[k] for k in KEYS} for r in rows], columns=list(KEYS))
            .map(csv_escape)
            .to_csv(index=False)
        )
    if fmt == "markdown":
        title = f"Training {rows[0]['work']:.3g} {rows[0]['unit']}"
        body = [[md_cell(cell(k, r[k])) for k in HEADERS] for r in rows]
        numeric = [k != "scenario" for k in HEADERS]
        return f"## {title}\n\n" + "\n".join(md_table(list(HEADERS.values()), body, numeric)) + "\n"
    raise ValueError(f"unknown format {fmt!r}")
