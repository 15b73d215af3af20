"""Options shared by several commands, declared once as `Annotated` aliases."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from ..history import DB_ENV, DEFAULT_DB


class OutputFormat(StrEnum):
    table = "table"
    markdown = "markdown"
    json = "json"
    csv = "csv"


MatrixOpt = Annotated[
    str | None,
    typer.Option(
        "--matrix", "-m", help="A matrix name (scenarios/NAME.toml) or a path to a .toml file. Default: full."
    ),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="bert-large, bert-base, tiny, a local checkpoint directory, or auto (bert-large on a GPU, tiny on "
        "the CPU; predict takes bert-large). Overrides the matrix.",
    ),
]
DeviceOpt = Annotated[str, typer.Option("--device", help="auto, cpu, cuda or cuda:N.")]
OnlyOpt = Annotated[str | None, typer.Option("--only", help="Comma-separated scenario names.")]
SeqLenOpt = Annotated[int | None, typer.Option("--seq-len", help="Sequence length, for every scenario (guide: 512).")]
EngineOpt = Annotated[str | None, typer.Option("--engine", help="trainer or accelerate, for every scenario.")]
FormatOpt = Annotated[OutputFormat, typer.Option("--format", "-f", help="Output format.")]
OutputFileOpt = Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.")]
ThresholdOpt = Annotated[
    float,
    typer.Option("--threshold", min=0.0, help="Speed threshold in % (samples_per_s, step_time_median_ms)."),
]
MemoryThresholdOpt = Annotated[float, typer.Option("--memory-threshold", min=0.0, help="Peak memory threshold in %.")]
DbOpt = Annotated[
    str | None,
    typer.Option(
        "--db",
        envvar=DB_ENV,
        show_default=False,
        help=f"The history store: a SQLite file path or a postgresql:// URL (env {DB_ENV}; default {DEFAULT_DB}).",
    ),
]


def db_target(db: str | None) -> str:
    """--db or $GPUBENCH_DB (read by the option), else the default SQLite file."""
    return db if db else DEFAULT_DB


def split_names(text: str | None) -> list[str] | None:
    """--only a,b,c as a list (None when not given)."""
    return [s.strip() for s in text.split(",") if s.strip()] if text else None
