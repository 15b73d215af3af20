"""`gpubench merge`: result directories of one matrix run in shards made one directory."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from .options import existing_path, path_value


def register(app: typer.Typer) -> None:
    app.command("merge")(merge)


def merge(
    out: Annotated[Path, typer.Argument(parser=path_value, help="The new result directory to write.")],
    dirs: Annotated[
        list[Path], typer.Argument(parser=existing_path, help="The shards: result directories of one matrix run.")
    ],
) -> None:
    """Merge the result directories of one matrix run in shards into one.

    For a night split over hosts (`--only` on each), lanes or Slurm steps: OUT gets every shard's
    rows in the plan's order, the first shard's env.json (with `merged`: each shard's host and
    time) and the union of their scenarios.json, so `compare`, `report` and `history` judge it as
    one run. Shards of another matrix, GPU model or software are refused. A scenario and repeat
    held by two shards keeps one row: a final row over an interrupted one, then the later started.

    Example: gpubench merge night results/night-host1 results/night-host2
    """
    from .. import api

    merged = api.merge(out, dirs)
    note = f", {merged.duplicates} duplicate row(s) resolved (final over interrupted, then the later)"
    print(
        f"merged {len(dirs)} directories: {len(merged.rows)} rows in {out}" + (note if merged.duplicates else ""),
        file=sys.stderr,
    )
