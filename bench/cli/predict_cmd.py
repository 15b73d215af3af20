"""`gpubench predict`: each scenario's memory, by term and phase, before running it (no GPU needed)."""

from __future__ import annotations

import io
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ..fsio import atomic_write_text
from .options import EngineOpt, MatrixOpt, ModelOpt, OnlyOpt, OutputFileOpt, SeqLenOpt, existing_path, split_names


class PredictFormat(StrEnum):
    table = "table"
    json = "json"


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
    batch_size: Annotated[int | None, typer.Option(help="Per-device batch size, for every scenario.")] = None,
    engine: EngineOpt = None,
    gpu_memory: GpuMemoryOpt = None,
    calibrate: CalibrateOpt = None,
    fmt: Annotated[PredictFormat, typer.Option("--format", "-f", help="Output format.")] = PredictFormat.table,
    output: OutputFileOpt = None,
) -> None:
    """Predict each scenario's GPU memory by term and phase, without a GPU.

    Weights, gradients, optimizer states, activations and cuBLAS workspaces are computed from the
    model's config and the scenario (docs/memory.md gives every formula and its source); the
    peak is the largest of the forward, backward and optimizer-step phases. The CUDA context and
    the allocator's slack are not predicted: --calibrate DIR takes them from a run on the same GPU.

    Example: gpubench predict --matrix full --model bert-large --gpu-memory 24GB
    """
    from .. import memory  # pandas (a calibration run's results): only when the command runs
    from ..memory import render

    report = memory.predict_matrix(
        "full" if matrix is None else matrix,
        model=model,
        only=split_names(only),
        overrides={"seq_len": seq_len, "batch_size": batch_size, "engine": engine},
        gpu_memory=gpu_memory,
        calibrate_dir=calibrate,
    )
    if output is None and fmt is PredictFormat.table:
        render.print_report(report, Console(width=None if sys.stdout.isatty() else 200))
        return
    if fmt is PredictFormat.json:
        text = render.to_json(report)
    else:
        buffer = io.StringIO()
        render.print_report(report, Console(file=buffer, width=200, color_system=None))
        text = buffer.getvalue()
    if output is None:
        typer.echo(text, nl=False)
    else:
        atomic_write_text(output, text)
