"""`gpubench export`: result directories logged where ML engineers keep their runs (MLflow)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from .options import MlflowExperimentOpt, existing_path


def register(app: typer.Typer) -> None:
    app.command("export")(export)


def export(
    dirs: Annotated[
        list[Path], typer.Argument(parser=existing_path, help="Result directories (`gpubench run --out`).")
    ],
    mlflow: Annotated[
        str,
        typer.Option("--mlflow", metavar="URI", help="An MLflow tracking URI, e.g. http://127.0.0.1:5000."),
    ],
    experiment: MlflowExperimentOpt = "gpubench",
) -> None:
    """Log result directories to an MLflow tracking server, one MLflow run per scenario.

    Settings become params, each ok repeat's figures metrics at step = repeat and their median
    `<figure>.median`; env.json, results.csv, report.html and the scenario's logs artifacts
    (docs/mlflow.md). Exporting a directory again logs only what changed.

    Example: gpubench export results/nightly --mlflow http://127.0.0.1:5000 --experiment nightly
    """
    from .. import api
    from ..export.mlflow import check_tracking, redacted_uri

    check_tracking(mlflow)
    for folder in dirs:
        done = api.export(folder, mlflow, experiment, info=lambda m: print(m, file=sys.stderr))
        changed = sum(e.action != "unchanged" for e in done)
        print(
            f"{folder}: {len(done)} scenarios in experiment {experiment!r} at {redacted_uri(mlflow)} "
            f"({changed} logged, {len(done) - changed} already there)",
            file=sys.stderr,
        )
