"""`gpubench compare`: the regression gate between two result sets."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..checks import MAX_THRESHOLD_PCT
from ..termtable import stdout_console
from .options import (
    ENERGY_PCT,
    MEMORY_PCT,
    SPEED_PCT,
    EnergyThresholdOpt,
    FormatOpt,
    MemoryThresholdOpt,
    OutputFileOpt,
    OutputFormat,
    ThresholdOpt,
    path_value,
)
from .output import emit, say

if TYPE_CHECKING:
    from ..compare.comparison import Thresholds
    from ..results import Run


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_command)


def compare_command(
    base: Annotated[
        Path, typer.Argument(parser=path_value, help="The baseline: a result directory or its results.csv.")
    ],
    new: Annotated[
        Path | None,
        typer.Argument(
            parser=path_value, show_default=False, help="The new run: a result directory or its results.csv."
        ),
    ] = None,
    threshold: ThresholdOpt = SPEED_PCT,
    memory_threshold: MemoryThresholdOpt = MEMORY_PCT,
    energy_threshold: EnergyThresholdOpt = ENERGY_PCT,
    allow_missing: Annotated[
        bool,
        typer.Option("--allow-missing", help="A scenario missing from the new run does not fail."),
    ] = False,
    allow_env_mismatch: Annotated[
        bool,
        typer.Option(
            "--allow-env-mismatch",
            help="Compare anyway: runs from different GPU models or GPU counts, or scenarios measured with other "
            "settings or another memory source.",
        ),
    ] = False,
    detect: Annotated[
        float | None,
        typer.Option(
            "--detect",
            parser=percent_value,
            metavar="PCT",
            help="Compare nothing: say how many repeats a side it takes to catch a slow-down of PCT% in each "
            "scenario, from the spread of the repeats in BASE (and NEW).",
        ),
    ] = None,
    fmt: FormatOpt = OutputFormat.table,
    output: OutputFileOpt = None,
) -> None:
    """Compare a new run against a baseline and fail on regressions.

    Each scenario gets one verdict per quantity: speed (samples_per_s, the
    median step time shown beside it), peak memory, energy per sample (GPU
    rows; none on the CPU), and its status. A median
    change counts when it passes the threshold and, with 3 or more ok
    repeats a side, a one-sided t-test on the log figures, Holm-adjusted over
    all scenarios (alpha 0.05), finds it significant; past the threshold but
    not significant is "noisy". With fewer repeats the threshold alone
    decides. Each judged row gives the smallest change it could detect.
    A loss turning non-finite, a scenario that stops running (oom, timeout,
    error, ...) and a scenario missing from the new run also fail the gate.
    Runs from different GPU models or GPU counts, and scenarios whose
    settings or memory source differ, are refused; software is shown.
    Two `gpubench verify` runs: the claims whose verdict changed come first.

    Examples:
      gpubench compare baselines/h200 results/nightly -f markdown -o sum.md
      gpubench compare --detect 5 results/guide-table/full

    Exit codes:
      0  no regression (--detect: always)
      1  a regression, a new failure or a missing scenario
      2  bad input (a missing, empty or malformed results file)
      3  incomparable runs (GPU model or count, or a scenario's settings)
    """
    from .. import api  # pandas: only when a command needs it
    from ..compare.comparison import Thresholds
    from ..compare.tables import gate_line, print_table, render

    thresholds = Thresholds(speed_pct=threshold, memory_pct=memory_threshold, energy_pct=energy_threshold)
    if detect is not None:
        _detect(detect, [api.load_run(p) for p in (base, new) if p is not None], thresholds, fmt, output)
        return
    if new is None:
        raise typer.BadParameter("give the new run too (or --detect PCT)", param_hint="NEW")
    base_run, new_run = api.load_run(base), api.load_run(new)
    _verify_changes(base, new, fmt, output)
    result = api.compare(
        base_run.frame,
        new_run.frame,
        base_run.env,
        new_run.env,
        thresholds,
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


def _verify_changes(base: Path, new: Path, fmt: OutputFormat, output: Path | None) -> None:
    """Two `gpubench verify` runs (each holds verify.json): which claims' verdicts changed, before the
    gate (which refuses runs from different GPUs, exactly when verdicts are most worth comparing).
    On stdout before the table; on stderr when stdout carries another format or -o writes a file."""
    from ..verify.render import changes_text, read_verify, verdict_changes

    a, b = read_verify(base), read_verify(new)
    if a is None or b is None:
        return
    compared = len({r["id"] for r in a["results"]} | {r["id"] for r in b["results"]})
    text = changes_text(verdict_changes(a, b), compared)
    typer.echo(text, nl=False, err=not (fmt is OutputFormat.table and output is None))


def _detect(target: float, runs: list[Run], thresholds: Thresholds, fmt: OutputFormat, output: Path | None) -> None:
    from .. import api
    from ..compare.tables import print_plan, render_plan

    result = api.detect([r.frame for r in runs], target, thresholds, [str(r.csv_path) for r in runs])
    if output is None and fmt is OutputFormat.table:
        print_plan(result, stdout_console())
    else:
        emit(render_plan(result, fmt.value), output, f"repeats for {target:g}%")


def percent_value(text: str) -> float:
    """5, 5.0 or 5%: a change in % above 0 and at most MAX_THRESHOLD_PCT."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a number of percent (e.g. 5 or 5%)") from None
    if not (0 < value <= MAX_THRESHOLD_PCT):
        raise typer.BadParameter(f"{text!r} must lie above 0 and at most {MAX_THRESHOLD_PCT:g}")
    return value
