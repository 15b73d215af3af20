"""`gpubench compare`: the regression gate between two result sets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..termtable import stdout_console
from .options import FormatOpt, MemoryThresholdOpt, OutputFileOpt, OutputFormat, ThresholdOpt, path_value
from .output import emit, say


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
    from ..compare.render import gate_line, print_table, render
    from ..results import load_run

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
    for text in result.notes:
        say(f"note: {text}")
    if output is None and fmt is OutputFormat.table:
        print_table(result, stdout_console())
    else:
        emit(render(result, fmt.value), output, gate_line(result))
    raise typer.Exit(result.exit_code)
