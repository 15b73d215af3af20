"""`gpubench cost`: the time, energy and price of a whole training run, from a run's measured rows."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..termtable import Column, FitTable, stdout_console
from .options import FormatOpt, OutputFileOpt, OutputFormat, existing_path
from .output import emit, plain


def register(app: typer.Typer) -> None:
    app.command("cost")(cost)


def cost(
    results: Annotated[Path, typer.Argument(parser=existing_path, help="A result directory or its results.csv.")],
    train_tokens: Annotated[
        float | None, typer.Option("--train-tokens", help="Tokens to train on (1e12, 2.5e9).")
    ] = None,
    train_samples: Annotated[float | None, typer.Option("--train-samples", help="Samples to train on.")] = None,
    price_per_gpu_hour: Annotated[
        float | None, typer.Option("--price-per-gpu-hour", help="What one GPU-hour costs you, for the bill.")
    ] = None,
    fmt: FormatOpt = OutputFormat.table,
    output: OutputFileOpt = None,
) -> None:
    """Project each scenario's measured rate onto a whole training run.

    Hours and GPU-hours at the scenario's median samples/s (or tokens/s) over its ok repeats,
    energy from its median J/sample (J/token; GPU rows with NVML's energy counter), the bill at
    --price-per-gpu-hour, and the seed's C = 6PD (P parameters, D tokens) with the hours those
    FLOPs take at the row's achieved FLOP rate. Only what the rows measured: a CPU run projects
    time but no energy.

    Example: gpubench cost results/decoders/llm --train-tokens 2e10 --price-per-gpu-hour 3.5
    """
    from .. import api
    from ..results.cost import HEADERS, cell, render

    rows = api.cost(api.load_run(results).frame, train_tokens, train_samples, price_per_gpu_hour)
    if fmt is not OutputFormat.table:
        emit(render(rows, fmt.value), output)
        return
    drop = {"price": 2, "flops_6pd": 1, "hours_6pd": 1}  # the columns a narrow terminal drops first
    columns = [Column(h, name=k == "scenario", right=k != "scenario", drop=drop.get(k, 0)) for k, h in HEADERS.items()]
    cells = [[cell(k, r[k]) for k in HEADERS] for r in rows]
    table = FitTable(columns, cells, title=f"training {rows[0]['work']:.3g} {rows[0]['unit']}")
    if output is None:
        stdout_console().print(table)
        return
    emit(plain(lambda console: console.print(table)), output)
