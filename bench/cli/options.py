"""Options shared by several commands, declared once."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer


class OutputFormat(StrEnum):
    table = "table"
    markdown = "markdown"
    json = "json"
    csv = "csv"


MatrixOpt = Annotated[
    str, typer.Option("--matrix", "-m", help="A matrix name (scenarios/NAME.toml) or a path to a .toml file.")
]
ModelOpt = Annotated[
    str,
    typer.Option(
        "--model",
        help="bert-large, bert-base, tiny, a local checkpoint directory, or auto "
        "(bert-large on a GPU, tiny on the CPU). Overrides the matrix.",
    ),
]
OutputFileOpt = Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.")]
