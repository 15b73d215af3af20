"""`gpubench predict`: each scenario's memory, by term and phase, before running it (no GPU needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..termtable import stdout_console
from .options import (
    EngineOpt,
    FormatOpt,
    GpusOpt,
    MatrixOpt,
    ModelOpt,
    OnlyOpt,
    OutputFileOpt,
    OutputFormat,
    SeqLenOpt,
    existing_path,
    gpus_value,
    split_names,
)
from .output import emit, plain, say

PREDICT_WIDTH = 200  # the breakdown's 13 columns, in a pipe or a file


def register(app: typer.Typer) -> None:
    app.command("predict")(predict)


GpuMemoryOpt = Annotated[
    str | None,
    typer.Option(
        "--gpu-memory", help="The GPU's memory (24GB, 24GiB, 81559MB; 1 GB = 1024 MB): mark which scenarios fit."
    ),
]
CalibrateOpt = Annotated[
    Path | None,
    typer.Option(
        "--calibrate",
        parser=existing_path,
        help="A previous run's result directory on the same GPU: measured context "
        "and allocator slack, and the measured terms beside the predicted ones.",
    ),
]


def predict(
    matrix: MatrixOpt = "full",
    model: ModelOpt = None,
    only: OnlyOpt = None,
    seq_len: SeqLenOpt = None,
    gpus: GpusOpt = None,
    batch_size: Annotated[int | None, typer.Option(help="Per-device batch size, for every scenario.")] = None,
    engine: EngineOpt = None,
    gpu_memory: GpuMemoryOpt = None,
    calibrate: CalibrateOpt = None,
    fmt: FormatOpt = OutputFormat.table,
    output: OutputFileOpt = None,
) -> None:
    """Predict each scenario's GPU memory by term and phase, without a GPU.

    Weights, gradients, optimizer states, activations and cuBLAS workspaces are computed from the
    model's config and the scenario (docs/memory.md gives every formula and its source); the
    peak is the largest of the forward, backward and optimizer-step phases. The CUDA context and
    the allocator's slack are not predicted: --calibrate DIR takes them from a run on the same GPU.

    The per-scenario caveats are notes on stderr; --format json also holds them.

    Example: gpubench predict --matrix full --model bert-large --gpu-memory 24GB
    """
    from .. import api
    from ..predict import printout  # pandas (a calibration run's results): only when it runs

    report = api.predict(
        "full" if matrix is None else matrix,
        model=model,
        only=split_names(only),
        overrides={"seq_len": seq_len, "batch_size": batch_size, "engine": engine, "gpus": gpus_value(gpus)},
        gpu_memory=gpu_memory,
        calibrate_dir=calibrate,
    )
    for text in printout.notes(report):
        say(f"note: {text}")
    if fmt is OutputFormat.table and output is None:
        printout.print_report(report, stdout_console(PREDICT_WIDTH))
        return
    renderers = {
        OutputFormat.json: printout.to_json,
        OutputFormat.csv: printout.to_csv,
        OutputFormat.markdown: printout.to_markdown,
        OutputFormat.table: lambda r: plain(lambda console: printout.print_report(r, console), PREDICT_WIDTH),
    }
    emit(renderers[fmt](report), output)
