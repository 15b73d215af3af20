"""`gpubench fit`: the largest batch (or sequence) each scenario trains with in a given GPU memory."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from ..redact import redact_argv
from ..run.launcher import DEFAULT_LAUNCHER
from ..run.request import DEFAULT_TIMEOUT_S
from ..termtable import Column, FitTable, stdout_console
from .options import DeviceOpt, EngineOpt, MatrixOpt, ModelOpt, OnlyOpt, SeqLenOpt, path_value, split_names
from .predict_cmd import GpuMemoryOpt


class Dimension(StrEnum):
    batch_size = "batch_size"
    seq_len = "seq_len"


def register(app: typer.Typer) -> None:
    app.command("fit")(fit)


def fit(
    matrix: MatrixOpt = None,
    model: ModelOpt = None,
    device: DeviceOpt = "auto",
    only: OnlyOpt = None,
    gpu_memory: GpuMemoryOpt = None,
    dimension: Annotated[
        Dimension, typer.Option("--dimension", help="What to search: the per-device batch size or the sequence length.")
    ] = Dimension.batch_size,
    probes: Annotated[int, typer.Option("--probes", help="Real short runs per scenario at most (1-64).")] = 3,
    probe_steps: Annotated[
        int, typer.Option("--probe-steps", help="Timed optimizer steps per probe, after one warm-up step.")
    ] = 3,
    most: Annotated[int | None, typer.Option("--max", help="The largest value to search.")] = None,
    seq_len: SeqLenOpt = None,
    batch_size: Annotated[
        int | None,
        typer.Option("--batch-size", help="Per-device batch size, for every scenario (--dimension seq_len)."),
    ] = None,
    engine: EngineOpt = None,
    out: Annotated[
        Path | None, typer.Option(parser=path_value, help="Result directory. Default: results/<timestamp>/.")
    ] = None,
    timeout: Annotated[
        float, typer.Option(help="Seconds per probe; a scenario's own timeout_s wins.")
    ] = DEFAULT_TIMEOUT_S,
    launcher: Annotated[
        str, typer.Option(help="fork (the default on Linux) or spawn, as for `gpubench run`.")
    ] = DEFAULT_LAUNCHER,
    report: Annotated[bool, typer.Option("--report/--no-report", help="Write DIR/report.html at the end.")] = True,
) -> None:
    """Find the largest batch size each scenario trains with, and its throughput there.

    For each scenario the memory model predicts the largest batch (--dimension seq_len: sequence)
    whose peak fits --gpu-memory; short real runs then confirm it, bracketing the largest that
    trains and the smallest that runs out of memory. On a GPU, --gpu-memory caps the allocator
    (ask a 24 GB question on an 80 GB card); on the CPU, where nothing runs out of memory, the
    memory model's verdict stands in (docs/fit.md). Each probe is a row of DIR/results.csv (status
    ok or oom); DIR/fit.json holds each search; the table and the fastest recipe that fits go to stdout.

    Example: gpubench fit --matrix full --gpu-memory 24GB

    Exit codes: 0 every search ended on ok or oom probes; 1 a probe failed otherwise (error,
    crashed, timeout); 2 bad input, nothing ran; 130 interrupted.
    """
    from .. import api
    from ..fit.capacity_summary import TABLE_HEADER, table_rows, text_lines
    from ..fit.fitting import FitRequest
    from ..run.progress import RichReporter

    err = Console(stderr=True)
    request = FitRequest(
        matrix=matrix,
        model=model,
        device=device,
        only=split_names(only),
        out=out,
        overrides={"seq_len": seq_len, "batch_size": batch_size, "engine": engine},
        gpu_memory=gpu_memory,
        dimension=dimension.value,
        probes=probes,
        probe_steps=probe_steps,
        most=most,
        timeout_s=timeout,
        launcher=launcher,
        command=["gpubench", *redact_argv(sys.argv[1:])],  # env.json: no --db password
        report=report,
    )
    outcome = api.fit(
        request,
        RichReporter(err),
        warn=lambda m: err.print(f"[yellow]warning:[/yellow] {escape(m)}"),
        info=lambda m: err.print(m, highlight=False, markup=False),
    )
    summary = outcome.summary
    columns = [Column(TABLE_HEADER[0], name=True), *(Column(h, right=h != "probes") for h in TABLE_HEADER[1:-1])]
    columns.append(Column(TABLE_HEADER[-1], note=True))
    title = f"{summary.matrix}: largest {summary.dimension} that trains on {summary.device}"
    console = stdout_console()
    console.print(FitTable(columns, table_rows(summary), title=title))
    for line in text_lines(summary):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    err.print(f"out of memory: {summary.mechanism}", highlight=False, markup=False, soft_wrap=True)
    err.print(f"results: {outcome.out}", highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(int(outcome.exit_code))
