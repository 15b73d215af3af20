"""`gpubench history ...`: runs stored in a database, trends, and regressions over time.

The store (bench.history) is imported inside each command, so `gpubench --help` stays fast.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from ..checks import MAX_COUNT
from ..errors import BadInput
from ..metrics import SAMPLES_PER_S, metrics_in, names
from ..redact import redact_url
from ..safetext import for_terminal
from ..termtable import stdout_console
from .options import (
    ENERGY_PCT,
    MEMORY_PCT,
    SPEED_PCT,
    DbOpt,
    EnergyThresholdOpt,
    FormatOpt,
    MemoryThresholdOpt,
    OutputFileOpt,
    OutputFormat,
    ThresholdOpt,
    db_target,
    existing_path,
    path_value,
)
from .output import emit, plain, say

if TYPE_CHECKING:
    from ..history.check import Params


# the choices of --metric, from bench.metrics: what the history stores (show), what it judges (accept);
# mypy cannot see members made from data, hence the ignores
Metric = StrEnum("Metric", [(n, n) for n in names(metrics_in("history"))])  # type: ignore[misc]
AcceptMetric = StrEnum(  # type: ignore[misc]
    "AcceptMetric", [(n, n) for n in (*names(metrics_in("history", thresholded=True)), "status")]
)
SHOWN_BY_DEFAULT = Metric(SAMPLES_PER_S.name)


WindowOpt = Annotated[
    int, typer.Option("--window", min=1, help="Earlier runs of a series in its baseline (median; flagged ones out).")
]
DriftOpt = Annotated[
    int,
    typer.Option("--drift-nights", min=0, help="Flag a steady drift over a series' newest N runs; 0: no drift check."),
]
NoiseOpt = Annotated[
    float,
    typer.Option(
        "--noise-factor", min=0, help="Widen the threshold to K x a series' night-to-night noise; 0: threshold alone."
    ),
]
RunOpt = Annotated[
    str | None,
    typer.Option("--run", help="A run id (see `history list`) or a stored result directory. Default: the newest run."),
]


def register(app: typer.Typer) -> None:
    history = typer.Typer(
        name="history",
        help="Store every run in a database (a SQLite file or PostgreSQL) and judge new runs against "
        "the history of each scenario. Example: gpubench history check",
        no_args_is_help=True,
    )
    history.command("list")(list_command)
    history.command("show")(show_command)
    history.command("check")(check_command)
    history.command("import")(import_command)
    history.command("accept")(accept_command)
    app.add_typer(history, name="history")


def _table(draw: Callable[[Console], None], output: Path | None, what: str = "") -> None:
    """A table on the terminal, fitted to its width; or, with --output, as plain text in the file."""
    if output is None:
        draw(stdout_console())
    else:
        emit(plain(draw), output, what)


def _params(
    window: int,
    threshold: float,
    memory_threshold: float,
    energy_threshold: float = ENERGY_PCT,
    consecutive: int = 2,
    drift_nights: int = 10,
    noise_factor: float = 3.0,
) -> Params:
    from ..compare.comparison import Thresholds
    from ..history.check import Params

    return Params(
        window=window,
        consecutive=consecutive,
        thresholds=Thresholds(speed_pct=threshold, memory_pct=memory_threshold, energy_pct=energy_threshold),
        drift_nights=drift_nights,
        noise_factor=noise_factor,
    )


def list_command(
    db: DbOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=0, max=MAX_COUNT, help="The newest N runs; 0: all.")] = 20,
    fmt: FormatOpt = OutputFormat.table,
    output: OutputFileOpt = None,
) -> None:
    """List the stored runs, newest first: date, git commit, GPU, versions, status.

    Example: gpubench history list --limit 10
    """
    from .. import api
    from ..history import show

    runs = api.history_list(db_target(db), limit or None)
    if fmt is OutputFormat.table:
        table = show.runs_table(runs, f"{len(runs)} runs in {redact_url(db_target(db))}")
        _table(lambda console: console.print(table), output)
    else:
        emit(show.render_records(show.run_rows(runs), show.RUN_COLUMNS, fmt.value), output)


def show_command(
    scenario: Annotated[str, typer.Option("--scenario", "-s", help="The scenario to show.")],
    metric: Annotated[Metric, typer.Option("--metric", help="The figure to show.")] = SHOWN_BY_DEFAULT,
    db: DbOpt = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="Only runs on this GPU model (e.g. 'NVIDIA H200').")] = None,
    last: Annotated[
        int, typer.Option("--last", min=0, max=MAX_COUNT, help="Show the newest N runs of each series; 0: all.")
    ] = 30,
    window: WindowOpt = 7,
    threshold: ThresholdOpt = SPEED_PCT,
    memory_threshold: MemoryThresholdOpt = MEMORY_PCT,
    energy_threshold: EnergyThresholdOpt = ENERGY_PCT,
    drift_nights: DriftOpt = 10,
    noise_factor: NoiseOpt = 3.0,
    fmt: FormatOpt = OutputFormat.table,
    output: OutputFileOpt = None,
    svg: Annotated[
        Path | None,
        typer.Option("--svg", parser=path_value, help="Also draw the chart into this SVG file (needs matplotlib)."),
    ] = None,
) -> None:
    """Show a scenario's series over time: a table and a sparkline (and, with --svg, a chart).

    Each point is judged as `history check` would judge it: flagged (!) when beyond the
    threshold against the median of the earlier unflagged runs since the last accepted step (|),
    or when the newest runs drift steadily.
    A scenario run on several GPU models or with other settings has one series for each.

    Example: gpubench history show --scenario bf16 --metric samples_per_s --svg bf16.svg
    """
    from .. import api
    from ..history import chart, show

    if output is not None and output.suffix.lower() == ".svg":
        raise BadInput(
            f"-o/--output {output} writes the {fmt.value} document, not a chart: draw the chart with --svg {output}"
        )
    params = _params(
        window, threshold, memory_threshold, energy_threshold, drift_nights=drift_nights, noise_factor=noise_factor
    )
    views = api.history_show(db_target(db), scenario, metric.value, params, gpu=gpu, last=last or None)
    if svg is not None:
        chart.write_svg(views, svg, f"{scenario}: {metric.value}")
        say(f"wrote {svg}")
    if fmt is OutputFormat.table:
        _table(lambda console: show.print_series(views, console), output)
    else:
        emit(show.render_records(show.point_rows(views), show.POINT_COLUMNS, fmt.value), output)


def check_command(
    db: DbOpt = None,
    run: RunOpt = None,
    consecutive: Annotated[
        int,
        typer.Option(
            "--consecutive",
            min=1,
            help="Fail when the newest N runs of a series are all flagged (1: a single run fails).",
        ),
    ] = 2,
    window: WindowOpt = 7,
    threshold: ThresholdOpt = SPEED_PCT,
    memory_threshold: MemoryThresholdOpt = MEMORY_PCT,
    energy_threshold: EnergyThresholdOpt = ENERGY_PCT,
    drift_nights: DriftOpt = 10,
    noise_factor: NoiseOpt = 3.0,
    fmt: FormatOpt = OutputFormat.table,
    output: OutputFileOpt = None,
) -> None:
    """Judge the newest run against the history of each of its scenarios; exit 1 on a regression.

    Runs (nights) are the unit: each is its median. Per series (scenario, settings, GPU model,
    model) and metric, the baseline is the median of the last --window runs since the last
    accepted step, leaving out runs flagged before, so a regression stays red until `history
    accept` or a run back within the threshold. A run is flagged when its median is beyond the
    threshold (5% speed, 2% peak memory, or --noise-factor x the series' night-to-night noise if
    larger) the wrong way and, with 3 or more ok repeats, a one-sided Mann-Whitney U test of its
    repeats against the baseline runs' medians confirms it; or when the newest --drift-nights runs
    drift steadily beyond the threshold. A regression is a series flagged in its newest
    --consecutive runs (default 2), so one noisy night alone does not fail; a series' first 5 runs
    only warn. A scenario failing after ok runs counts the same way.

    Example: gpubench history check --format markdown >> "$GITHUB_STEP_SUMMARY"

    Exit codes: 0 no regression; 1 a regression or new failure; 2 bad input (no store, a
    corrupt or foreign database, an unknown run); 3 the run has no comparable history.
    """
    from .. import api
    from ..history import show

    params = _params(window, threshold, memory_threshold, energy_threshold, consecutive, drift_nights, noise_factor)
    result = api.history_check(db_target(db), params, run=run)
    for text in result.notes:
        say(f"note: {text}")
    if fmt is OutputFormat.table:
        table = show.check_table(result)
        _table(lambda console: console.print(table), output, show.gate_line(result))
    else:
        emit(show.render_check(result, fmt.value), output, show.gate_line(result))
    raise typer.Exit(result.exit_code)


def import_command(
    dirs: Annotated[
        list[Path],
        typer.Argument(parser=existing_path, help="Result directories (each with results.csv and env.json)."),
    ],
    db: DbOpt = None,
) -> None:
    """Add existing result directories to the history; a directory stored before is skipped.

    The result directories stay the source of truth: the database can be rebuilt from them.
    Prints one line per directory (no --format: `history list` shows what is stored).

    Example: gpubench history import results/2026-11-29T10-00-00/ results/nightly/
    """
    from .. import api

    for item in api.history_import(db_target(db), dirs):
        what = "stored" if item.created else "already stored"
        typer.echo(for_terminal(f"run {item.run_id}: {what} {item.path} ({item.scenarios} scenarios)"))


def accept_command(
    note: Annotated[str, typer.Option("--note", help="Why the change is intended (e.g. 'torch 2.12 upgrade').")],
    scenario: Annotated[
        list[str] | None,
        typer.Option("--scenario", "-s", help="A scenario to accept (repeatable). Default: every scenario of the run."),
    ] = None,
    metric: Annotated[
        AcceptMetric | None, typer.Option("--metric", help="Accept only this metric. Default: all, and the status.")
    ] = None,
    run: RunOpt = None,
    db: DbOpt = None,
) -> None:
    """Accept a run's level as the new normal (a deliberate upgrade, a new driver).

    From that run on, baselines are counted again from it, so the intended step is not a
    regression; `history show` marks it. Prints one line per accepted series (no --format).

    Example: gpubench history accept --scenario bf16 --note "torch 2.12: new SDPA kernels"
    """
    from .. import api

    found, steps = api.history_accept(
        db_target(db), note, scenarios=scenario or (), metric=metric.value if metric else None, run=run
    )
    what = metric.value if metric else "all metrics"
    for step in steps:
        typer.echo(for_terminal(f"accepted: {step['scenario']} ({what}) from run {found['id']} on: {step['note']}"))
