"""The steps that upgrade an older history database, one per schema version; each runs in the
transaction that opens the store for writing (bench.history.store), so a step that fails leaves
the database as it was. A step also takes a store whose tables a later release made and that was
marked older (by hand, or by a test), so it checks what is there before it changes anything.

Since version 4 the figures are long-form (bench.history.schema): a metric judged in the history
later is new rows, not a new column, so it needs no step here.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, Float, String, func, insert, inspect, literal, null, select, text, update
from sqlalchemy.sql import column, table

from ..results.identity import content_sha256
from . import schema
from .ingest import figure_values, number, run_key

SQLITE_DROP_COLUMN = (3, 35, 0)  # the first SQLite with ALTER TABLE ... DROP COLUMN
SPREAD = "_spread_pct"  # version 3's results held FIGURE and FIGURE_spread_pct for each figure


def _content_run_keys(conn: Connection) -> None:
    """1 -> 2: a run's key hashes the rows of its results.csv as read, no longer the file's bytes
    (bench.history.ingest), so a re-saved copy of a run stored before is that run too. Each key is
    made again from the run's stored rows (repeats.row_json: each row as it was read); a run whose
    new key an earlier run already took (a re-saved copy that version 1 stored as a second run)
    keeps its old key, so nothing is merged or lost. An unchanged file is found by its bytes
    whatever its rows give (queries.stored_run)."""
    runs, results, repeats = schema.runs, schema.results, schema.repeats
    rows: dict[int, list[dict[str, Any]]] = defaultdict(list)
    stored = select(results.c.run_id, repeats.c.row_json).join(repeats, repeats.c.result_id == results.c.id)
    for run_id, row_json in conn.execute(stored):
        rows[int(run_id)].append(json.loads(row_json))
    taken: set[str] = set()
    for run_id, created_at, host in conn.execute(
        select(runs.c.id, runs.c.created_at, runs.c.host).order_by(runs.c.id)
    ).all():
        key = run_key(created_at, host, content_sha256(rows[int(run_id)]))
        if key not in taken:
            taken.add(key)
            conn.execute(update(runs).where(runs.c.id == run_id).values(run_key=key))


def _energy_columns(conn: Connection) -> None:
    """2 -> 3: energy_per_sample_j is judged in the history (bench.metrics): its columns in results
    (median, spread) and repeats, filled from each stored repeat's row (repeats.row_json; empty for
    runs whose rows had no energy: CPU runs, GPU runs from before the GPU probe). Version 3's
    tables had a column per figure; step 3 -> 4 moves them into the figure tables."""
    name, spread = "energy_per_sample_j", f"energy_per_sample_j{SPREAD}"
    kind = Float().compile(dialect=conn.dialect)
    for table_name, columns in (("results", (name, spread)), ("repeats", (name,))):
        have = {c["name"] for c in inspect(conn).get_columns(table_name)}
        for added in columns:
            if added not in have:
                conn.execute(text(f"ALTER TABLE {table_name} ADD COLUMN {_quoted(conn, added)} {kind}"))
    results = table("results", column("id"), column(name), column(spread))
    repeats = table("repeats", column("id"), column("result_id"), column("status"), column("row_json"), column(name))
    ok_rows: dict[int, list[dict[str, Any]]] = defaultdict(list)
    stored = select(repeats.c.id, repeats.c.result_id, repeats.c.status, repeats.c.row_json)
    for repeat_id, result_id, status, row_json in conn.execute(stored).all():
        row = json.loads(row_json)
        value = number(row.get(name))
        if value is not None:
            conn.execute(update(repeats).where(repeats.c.id == repeat_id).values({name: value}))
        if status == "ok":
            ok_rows[int(result_id)].append(row)
    for result_id, rows in ok_rows.items():
        found = figure_values(rows, (name,)).get(name)
        if found is not None:
            values = {name: found.median, spread: found.spread_pct}
            conn.execute(update(results).where(results.c.id == result_id).values(values))


def _long_figures(conn: Connection) -> None:
    """3 -> 4: the figures long-form. Each figure column of results (FIGURE, FIGURE_spread_pct) and
    of repeats becomes rows of result_figures and repeat_figures (a NULL becomes no row; a result's
    n counts its ok repeats that have the figure), then the columns are dropped. Whatever figure
    columns the database holds are moved, not only today's FIGURES; a figure that the tables hold
    already is kept as it is, so the step can run again and change nothing."""
    schema.result_figures.create(conn, checkfirst=True)
    schema.repeat_figures.create(conn, checkfirst=True)
    wide_results = _wide_columns(conn, schema.results)
    wide_repeats = _wide_columns(conn, schema.repeats)
    for figure in [c for c in wide_results if not c.endswith(SPREAD)]:
        spread = f"{figure}{SPREAD}" if f"{figure}{SPREAD}" in wide_results else None
        _move_result_figure(conn, figure, spread, figure in wide_repeats)
    for figure in wide_repeats:
        _move_repeat_figure(conn, figure)
    _drop_columns(conn, "results", wide_results)
    _drop_columns(conn, "repeats", wide_repeats)


def _wide_columns(conn: Connection, current: Any) -> list[str]:
    """The columns of a table in the database that its version 4 definition does not have."""
    return [c["name"] for c in inspect(conn).get_columns(current.name) if c["name"] not in current.c]


def _move_result_figure(conn: Connection, figure: str, spread: str | None, per_repeat: bool) -> None:
    results = table(
        "results", column("id"), column("ok_repeats"), column(figure), *([column(spread)] if spread else [])
    )
    repeats = table("repeats", column("result_id"), column("status"), column(figure))
    done = schema.result_figures
    if per_repeat:  # the ok repeats that have it
        n: Any = (
            select(func.count())
            .select_from(repeats)
            .where(repeats.c.result_id == results.c.id, repeats.c.status == "ok", repeats.c[figure].is_not(None))
            .scalar_subquery()
        )
    else:
        n = results.c.ok_repeats
    there = select(done.c.result_id).where(done.c.result_id == results.c.id, done.c.metric == figure).exists()
    rows = select(
        results.c.id, literal(figure, String), results.c[figure], results.c[spread] if spread else null(), n
    ).where(results.c[figure].is_not(None), ~there)
    conn.execute(insert(done).from_select(["result_id", "metric", "median", "spread_pct", "n"], rows))


def _move_repeat_figure(conn: Connection, figure: str) -> None:
    repeats = table("repeats", column("id"), column(figure))
    done = schema.repeat_figures
    there = select(done.c.repeat_id).where(done.c.repeat_id == repeats.c.id, done.c.metric == figure).exists()
    rows = select(repeats.c.id, literal(figure, String), repeats.c[figure]).where(
        repeats.c[figure].is_not(None), ~there
    )
    conn.execute(insert(done).from_select(["repeat_id", "metric", "value"], rows))


def _drop_columns(conn: Connection, table_name: str, columns: list[str]) -> None:
    """Drop the columns; on SQLite older than 3.35 (no DROP COLUMN, and rebuilding a table that
    others reference needs its foreign keys off, which a transaction cannot switch) they stay,
    emptied: nothing reads or writes them any more."""
    if not columns:
        return
    if conn.dialect.name == "sqlite" and sqlite_version() < SQLITE_DROP_COLUMN:
        conn.execute(table(table_name, *map(column, columns)).update().values(dict.fromkeys(columns)))
        return
    for name in columns:
        conn.execute(text(f"ALTER TABLE {table_name} DROP COLUMN {_quoted(conn, name)}"))


def sqlite_version() -> tuple[int, ...]:
    return sqlite3.sqlite_version_info


def _quoted(conn: Connection, name: str) -> str:
    return str(conn.dialect.identifier_preparer.quote(name))


# version v -> the step that upgrades a database from v to v + 1
MIGRATIONS: dict[int, Callable[[Connection], None]] = {1: _content_run_keys, 2: _energy_columns, 3: _long_figures}
