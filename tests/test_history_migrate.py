"""The history's migration to long-form figures (schema version 4), on a database that gpubench
wrote at schema version 3 (tests/data/history-v3.*, made by tests/data/make_history_v3.py at
commit 88f4dc8, with what `history check`, `show` and `list` printed from it then): on SQLite and
on PostgreSQL, the migrated store prints the same; a second run of the step changes nothing; a
version 2 store goes through the chain; a metric judged later needs no migration."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from harness import gpubench, gpubench_in_process
from history_support import BACKENDS, env, execute, reps, store_target, write_run

from bench.history import ingest, library, migrate, queries, schema
from bench.history.store import open_store

DATA = Path(__file__).resolve().parent / "data"
EXPECTED: dict[str, Any] = json.loads((DATA / "history-v3.expected.json").read_text())
WIDE = ("samples_per_s", "step_time_median_ms", "peak_mem_mb", "final_loss", "energy_per_sample_j")
# figure rows: 4 runs of bf16 (3 ok repeats, 5 figures), fp32 (2 ok repeats, no energy, then oom), fp8 (skipped)
FIGURE_ROWS = (4 * 5 + 3 * 4, 4 * 3 * 7 + 3 * 2 * 4)  # result_figures, repeat_figures (with tokens, MFU)


@pytest.fixture(params=BACKENDS)
def v3(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store as gpubench wrote it at schema version 3."""
    target = store_target(request.param, tmp_path, request)
    if request.param == "sqlite":
        shutil.copyfile(DATA / "history-v3.sqlite", target)
    else:
        from sqlalchemy import create_engine

        engine = create_engine(target)
        with engine.begin() as conn:
            conn.exec_driver_sql((DATA / "history-v3.postgresql.sql").read_text())
        engine.dispose()
    return target


def migrated(target: str) -> None:
    """Open the store as a writer does (`history import`, `run --record`): that migrates it."""
    with open_store(target, write=True):
        pass


def columns(target: str, table: str) -> list[str]:
    from sqlalchemy import create_engine, inspect
    from sqlalchemy.engine import URL

    engine = create_engine(target if "://" in target else URL.create("sqlite", database=target))
    try:
        return [c["name"] for c in inspect(engine).get_columns(table)]
    finally:
        engine.dispose()


def contents(target: str) -> dict[str, list[tuple[Any, ...]]]:
    return {t: sorted(execute(target, f"SELECT * FROM {t}"), key=repr) for t in schema.TABLES}


def printed(name: str, target: str, *, subprocess: bool = False) -> tuple[int, Any]:
    """What `gpubench history ARGS` (an expected file's command) prints now, as JSON."""
    args = [*EXPECTED[name]["args"], "--db", target]
    if subprocess:
        done = gpubench("history", *args, timeout=120)
        assert not done.stderr, done.stderr
        return done.returncode, json.loads(done.stdout)
    inside = gpubench_in_process("history", *args)
    assert not inside.err, inside.err
    return inside.code, json.loads(inside.out)


def expected(name: str) -> tuple[int, Any]:
    return EXPECTED[name]["exit_code"], EXPECTED[name]["stdout"]


def test_a_version_3_store_is_migrated_and_prints_what_it_printed_before(v3: str) -> None:
    assert set(WIDE) <= set(columns(v3, "results")) and "result_figures" not in contents_tables(v3)
    migrated(v3)
    assert execute(v3, "SELECT version FROM schema_version") == [(4,)]
    for table in ("results", "repeats"):
        assert not set(columns(v3, table)) & {*WIDE, "tokens_per_s", "mfu", "samples_per_s_spread_pct"}
    got = [execute(v3, f"SELECT COUNT(*) FROM {t}")[0][0] for t in ("result_figures", "repeat_figures")]
    assert tuple(got) == FIGURE_ROWS
    for name in ("check", "show-bf16-speed"):  # as a user's shell runs them
        assert printed(name, v3, subprocess=True) == expected(name), name
    for name in ("check-run-2", "show-bf16-energy", "show-fp32-memory", "show-fp32-loss", "list"):
        assert printed(name, v3) == expected(name), name


def contents_tables(target: str) -> list[str]:
    rows = execute(
        target,
        "SELECT name FROM sqlite_master WHERE type = 'table'"
        if "://" not in target
        else "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()",
    )
    return [r[0] for r in rows]


def test_migrating_again_changes_nothing(v3: str) -> None:
    migrated(v3)
    before = contents(v3)
    from sqlalchemy import create_engine
    from sqlalchemy.engine import URL

    engine = create_engine(v3 if "://" in v3 else URL.create("sqlite", database=v3))
    with engine.begin() as conn:
        migrate.MIGRATIONS[3](conn)
    engine.dispose()
    assert contents(v3) == before
    migrated(v3)  # and opening it again as a writer
    assert contents(v3) == before


def test_a_version_2_store_goes_through_the_chain(v3: str) -> None:
    """Version 2 had no energy columns: the store made so from the version 3 one gets them back
    from the stored rows (step 2 -> 3), then long-form (3 -> 4), and prints the same energy."""
    for table, column in (
        ("results", "energy_per_sample_j"),
        ("results", "energy_per_sample_j_spread_pct"),
        ("repeats", "energy_per_sample_j"),
    ):
        execute(v3, f"ALTER TABLE {table} DROP COLUMN {column}")
    execute(v3, "UPDATE schema_version SET version = 2")
    migrated(v3)
    assert execute(v3, "SELECT version FROM schema_version") == [(4,)]
    assert printed("show-bf16-energy", v3) == expected("show-bf16-energy")
    assert printed("check", v3) == expected("check")


def test_an_sqlite_without_drop_column_keeps_the_old_columns_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite before 3.35 has no DROP COLUMN: the figure columns stay, emptied, and nothing reads them."""
    target = str(tmp_path / "history.sqlite")
    shutil.copyfile(DATA / "history-v3.sqlite", target)
    monkeypatch.setattr(migrate, "sqlite_version", lambda: (3, 34, 1))
    migrated(target)
    assert "samples_per_s" in columns(target, "results")
    assert execute(target, "SELECT COUNT(samples_per_s), COUNT(samples_per_s_spread_pct) FROM results") == [(0, 0)]
    assert execute(target, "SELECT COUNT(samples_per_s), COUNT(mfu) FROM repeats") == [(0, 0)]
    assert printed("check", target) == expected("check")
    later = write_run(tmp_path / "later", reps("bf16", [100.0, 100.5, 99.5], precision="bf16"), env(5))
    assert library.import_dirs(target, [later])[0].created


def test_a_metric_judged_later_needs_no_migration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A figure added to the history's metrics is stored and read back by a store made before it:
    its name is a value in the figure tables, and the schema version stays."""
    target = str(tmp_path / "history.sqlite")
    library.import_dirs(target, [write_run(tmp_path / "before", reps("bf16", [100.0]), env(1))])
    added = (*schema.FIGURES, "tokens_per_s")
    monkeypatch.setattr(schema, "FIGURES", added)
    monkeypatch.setattr(ingest, "FIGURES", added)
    rows = [{**r, "tokens_per_s": 51200.0 + i} for i, r in enumerate(reps("bf16", [100.0, 101.0, 99.0]))]
    library.import_dirs(target, [write_run(tmp_path / "after", rows, env(2))])
    assert execute(target, "SELECT version FROM schema_version") == [(schema.SCHEMA_VERSION,)]
    with open_store(target, write=False) as store:
        [series] = store.read(lambda conn: queries.load_series(conn, scenario="bf16"))
    assert [p.values["tokens_per_s"] for p in series.points] == [None, 51201.0]
    assert series.points[1].repeats["tokens_per_s"] == (51200.0, 51201.0, 51202.0)
