"""Options shared by several commands, declared once as `Annotated` aliases."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from ..checks import ascii_digits
from ..errors import BadInput
from ..history import DB_ENV, DEFAULT_DB
from ..metrics import default_threshold_pct, in_group, names
from ..recipe.engine_registry import ENGINES
from ..safetext import control_char


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
        help="A preset (docs/models.md: bert-*, llama-*, qwen2-*, qwen3-0.6b, mistral-7b, mixtral-*, vit-*, tiny), "
        "a local checkpoint directory, a directory or .json file holding only config.json (random weights), "
        "an org/name already in the local Hugging Face cache (never downloaded), or auto (bert-large on a GPU, "
        "tiny on the CPU; predict takes bert-large). Overrides the matrix and its \\[model] table.",
    ),
]
DeviceOpt = Annotated[str, typer.Option("--device", help="auto, cpu, cuda or cuda:N.")]
OnlyOpt = Annotated[str | None, typer.Option("--only", help="Comma-separated scenario names.")]
SeqLenOpt = Annotated[int | None, typer.Option("--seq-len", help="Sequence length, for every scenario (guide: 512).")]
EngineOpt = Annotated[
    str | None,
    typer.Option(
        "--engine",
        help=f"{' or '.join(ENGINES)}, for every scenario that takes \\[base]'s engine "
        "(one that sets its own keeps it).",
    ),
]
FormatOpt = Annotated[OutputFormat, typer.Option("--format", "-f", help="Output format.")]
MlflowExperimentOpt = Annotated[
    str, typer.Option("--experiment", metavar="NAME", help="The MLflow experiment (created when absent).")
]


def path_value(text: str | Path) -> Path:
    """A path from the command line (typer's parser): an empty one is an error, never the current
    folder that Path("") would silently mean."""
    if isinstance(text, Path):  # a default, already a path
        return text
    if not text.strip():
        raise typer.BadParameter("is empty; give a path")
    char = control_char(text)
    if char is not None:  # a newline in --out would be a new line of the sbatch script
        raise typer.BadParameter(f"{text!r} holds a control character ({char})")
    return Path(text)


def existing_path(text: str | Path) -> Path:
    path = path_value(text)
    if not path.exists():
        raise typer.BadParameter(f"{str(path)!r} does not exist")
    return path


OutputFileOpt = Annotated[
    Path | None, typer.Option("--output", "-o", parser=path_value, help="Write to this file instead of stdout.")
]
SPEED_PCT, MEMORY_PCT = default_threshold_pct("speed"), default_threshold_pct("memory")  # bench.metrics
ENERGY_PCT = default_threshold_pct("energy")
ThresholdOpt = Annotated[
    float,
    typer.Option("--threshold", min=0.0, help=f"Speed threshold in % ({', '.join(names(in_group('speed')))})."),
]
MemoryThresholdOpt = Annotated[float, typer.Option("--memory-threshold", min=0.0, help="Peak memory threshold in %.")]
EnergyThresholdOpt = Annotated[
    float,
    typer.Option(
        "--energy-threshold", min=0.0, help="Energy per sample threshold in % (GPU rows with NVML's counter)."
    ),
]
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
    """--db or $GPUBENCH_DB (read by the option), else the default SQLite file; --db "" is an
    error (bench.history.store), not the default."""
    return DEFAULT_DB if db is None else db


def split_names(text: str | None, flag: str = "--only") -> list[str] | None:
    """--only a,b,c as a list (None when not given); an empty name ("", "a,,b") is an error, not "all"."""
    if text is None:
        return None
    names = [s.strip() for s in text.split(",")]
    if not all(names):
        raise BadInput(f"{flag} {text!r} holds an empty scenario name", hint=f"write {flag} a,b,c")
    return names


def gpus_value(text: str | None) -> int | str | None:
    """--gpus: "all" or a whole number (the scenario checks its range)."""
    if text is None or text == "all":
        return text
    if not ascii_digits(text):
        raise typer.BadParameter('must be a whole number or "all"')
    return int(text)


GpusOpt = Annotated[
    str | None,
    typer.Option(
        help='Processes per node for every multi-process scenario: a number or "all" (GPUs; gloo on the CPU).'
    ),
]
