"""`gpubench verify`: the documents' claims, judged by measurement on this machine."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ..run.request import DEFAULT_TIMEOUT_S
from ..termtable import stdout_console
from .options import DeviceOpt, FormatOpt, OutputFileOpt, OutputFormat, path_value, split_names
from .output import emit, plain


def register(app: typer.Typer) -> None:
    app.command("verify")(verify_command)


def verify_command(
    claims: Annotated[
        str,
        typer.Option(
            "--claims",
            metavar="guide|talk|libraries|all|FILE",
            help="The shipped claim files (claims/*.toml) or your own claim file (docs/verify.md).",
        ),
    ] = "all",
    only: Annotated[str | None, typer.Option("--only", help="Comma-separated claim ids.")] = None,
    repeats: Annotated[int, typer.Option(min=1, help="Runs of each scenario: 2 or more a side give an interval.")] = 3,
    device: DeviceOpt = "auto",
    out: Annotated[
        Path | None,
        typer.Option(parser=path_value, help="Result directory. Default: results/verify-<timestamp>/."),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds per scenario.")] = DEFAULT_TIMEOUT_S,
    resume: Annotated[
        Path | None,
        typer.Option(
            parser=path_value,
            help=(
                "Finish a verify stopped by --time-limit or Ctrl-C in this directory; on a finished "
                "one, judge its claims again from its rows (no device)."
            ),
        ),
    ] = None,
    time_limit: Annotated[
        float | None,
        typer.Option(
            "--time-limit",
            help="Seconds for the whole run: no worker starts once they have passed; then exit 4 "
            "(finish with --resume DIR, the same --claims and --only).",
        ),
    ] = None,
    fmt: FormatOpt = OutputFormat.table,
    output: OutputFileOpt = None,
) -> None:
    """Check the guide's, the talk's and the libraries' claims on this machine.

    Runs the scenarios the claims need (one matrix, through `gpubench run`'s runner) and gives
    each claim a verdict: holds, does not hold, inconclusive (with the repeats that would
    decide) or not comparable here, with the measured figure, its 95% interval and the rows'
    bound label. Bytes per parameter and C = 6PD are arithmetic on the built model (nothing
    trains). Writes DIR/results.csv, DIR/env.json and DIR/verify.json. On the CPU the measured
    verdicts are a smoke test of the harness.

    Example: gpubench verify --claims guide --only guide-16-bytes-per-param,guide-6pd --device cpu

    Exit codes: 0 no claim fails; 1 a claim does not hold; 2 bad input (a bad claim file),
    nothing ran; 4 stopped at --time-limit and 130 interrupted (finish with --resume DIR).
    """
    from .. import api
    from ..results import CPU_NOTE
    from ..run.progress import RichReporter
    from ..verify.render import render, table
    from ..verify.verifying import VerifyRequest

    err = Console(stderr=True)
    request = VerifyRequest(
        claims=claims,
        only=split_names(only),
        repeats=repeats,
        device=device,
        out=out,
        timeout_s=timeout,
        command=["gpubench", *sys.argv[1:]],
        resume=resume,
        time_limit_s=time_limit,
    )
    outcome = api.verify(
        request,
        RichReporter(err),
        warn=lambda m: err.print(f"warning: {m}", highlight=False, markup=False),
        info=lambda m: err.print(m, highlight=False, markup=False),
    )
    records = [r.record() for r in outcome.results]
    if any(r.smoke_test for r in outcome.results):
        err.print(f"note: {CPU_NOTE}", highlight=False, markup=False, soft_wrap=True)
    title = f"gpubench verify --claims {claims} on {outcome.device}"
    footer = [f"results: {outcome.out}"]
    if fmt is OutputFormat.table and output is None:
        stdout_console().print(table(records, title, footer))
    elif fmt is OutputFormat.table:
        emit(plain(lambda console: console.print(table(records, title, footer))), output)
    else:
        emit(render(records, fmt.value, title), output)
    if outcome.exit_code:
        again = f"gpubench verify --claims {claims}{f' --only {only}' if only else ''} --resume {outcome.out}"
        why = f" ({outcome.limit_reason})" if outcome.limit_reason else ""
        err.print(f"not every scenario ran{why}: finish with `{again}`", highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(outcome.exit_code)
    raise typer.Exit(1 if any(r.verdict == "does not hold" for r in outcome.results) else 0)
