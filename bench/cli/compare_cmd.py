"""`gpubench compare`: the regression gate between two result sets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ..fsio import atomic_write_text
from .options import FormatOpt, MemoryThresholdOpt, OutputFileOpt, OutputFormat, ThresholdOpt, path_value


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_command)


def compare_command(
    base: Annotated[
        Path, typer.Argument(parser=path_value, help="The baseline: a result directory or its results.csv.")
    ],
    new: Annotated[Path, typer.Argument(parser=path_value, help="The new run: a result directory or its results.csv.")],
    threshold: ThresholdOpt = 5.0,
    memory_threshold: MemoryThresholdOpt = 2.0,
    allow_missing: Annotated[
        bool,
        typer.Option("--allow-missing", help="A scenario missing from the new run does not fail."),
    ] = False,
    allow_env_mismatch: Annotated[
        bool,
        typer.Option("--allow-env-mismatch", help="Compare runs from different GPU models anyway."),
    ] = False,
    fmt: FormatOpt = OutputFormat.table,
    output: OutputFileOpt = None,
) -> None:
    """Compare a new run against a baseline and fail on regressions.

    Repeats are aggregated per scenario: the median over its ok repeats.
    samples_per_s, step_time_median_ms and peak_mem_mb regress when the
    median moves past the threshold and, with 3 or more ok repeats on each
    side, a one-sided exact Mann-Whitney U test (alpha 0.05) finds the move
    significant; past the threshold but not significant is "noisy".
    With fewer repeats the threshold alone decides.
    A loss turning non-finite, a scenario that stops running (oom, timeout,
    error, ...) and a scenario missing from the new run also fail the gate.
    Runs from different GPU models are refused; software versions are shown.

    Example:
      gpubench compare baselines/h200 results/nightly -f markdown -o sum.md

    Exit codes:
      0  no regression
      1  a regression, a new failure or a missing scenario
      2  bad input (a missing, empty or malformed results file)
      3  incomparable environments (different GPU models)
    """
    from ..compare.core import Thresholds, compare  # pandas: only when a command needs it
    from ..compare.render import gate_line, print_table, render, stdout_console
    from ..results import load_run

    diagnostics = Console(stderr=True)
    base_run, new_run = load_run(base), load_run(new)
    result = compare(
        base_run.frame,
        new_run.frame,
        base_run.env,
        new_run.env,
        Thresholds(speed_pct=threshold, memory_pct=memory_threshold),
        allow_missing=allow_missing,
        allow_env_mismatch=allow_env_mismatch,
        labels=(str(base_run.csv_path), str(new_run.csv_path)),
    )
    for note in result.notes:
        diagnostics.print(f"gpubench: note: {note}", highlight=False, markup=False, soft_wrap=True)
    if output is not None:
        atomic_write_text(output, render(result, fmt.value))
        diagnostics.print(
            f"gpubench: wrote {output}: {gate_line(result)}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    elif fmt is OutputFormat.table:
        print_table(result, stdout_console())
    else:
        typer.echo(render(result, fmt.value), nl=False)
    raise typer.Exit(result.exit_code)
