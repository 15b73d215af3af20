"""bench.history.store and api on both backends: what is stored, idempotent import, concurrent
writers, and refusing corrupt, foreign or newer databases without touching them."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from history_support import (
    BACKENDS,
    H200_RUN,
    env,
    execute,
    nights,
    reps,
    store_target,
    write_run,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.errors import BadInput
from bench.history import library, schema, store
from bench.history.check import Params
from bench.history.ingest import read_result_dir
from bench.history.store import open_store

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(params=BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_target(request.param, tmp_path, request)


@pytest.fixture
def sqlite_db(tmp_path: Path) -> str:
    return str(tmp_path / "history.sqlite")


def count(db: str, table: str) -> int:
    return int(execute(db, f"SELECT COUNT(*) FROM {table}")[0][0])


def figure(alias: str, metric: str) -> str:
    """A join of results (as r) to its figure on metric (as alias): the long-form store's column."""
    return f"LEFT JOIN result_figures {alias} ON {alias}.result_id = r.id AND {alias}.metric = '{metric}'"


# -- what is stored --------------------------------------------------------------------------------
def test_a_run_is_stored_with_its_environment_results_and_repeats(db: str, tmp_path: Path) -> None:
    rows = reps("baseline", [100.0, 110.0, 90.0]) + reps("fp16", [0.0], status="oom")
    directory = write_run(tmp_path / "run", rows, env(3))
    [stored] = library.import_dirs(db, [directory])
    assert (stored.run_id, stored.created, stored.scenarios) == (1, True, 2)
    run = execute(
        db,
        "SELECT created_at, host, git_commit, git_branch, gpu_model, gpu_count, driver, cuda, torch, "
        "transformers, accelerate, bitsandbytes, command, status, source FROM runs",
    )[0]
    assert str(run[0])[:19] == "2026-11-03 02:00:00"  # UTC
    assert run[1:] == (
        "gpu-node-1",
        "0123456789abcdef0123456789abcdef01234567",
        "main",
        "NVIDIA H200",
        1,
        "580.65",
        "13.0",
        "2.11.0",
        "5.17.0",
        "1.15.0",
        "0.50.2",
        "gpubench run --matrix full --repeats 3 --record",
        "failed",
        str(directory.resolve()),
    )
    results = execute(
        db,
        "SELECT r.scenario, r.status, r.repeats, r.ok_repeats, s.median, s.spread_pct, "
        f"m.median, r.settings_json, r.series_json FROM results r {figure('s', 'samples_per_s')} "
        f"{figure('m', 'peak_mem_mb')} ORDER BY r.id",
    )
    assert results[0][:7] == ("baseline", "ok", 3, 3, 100.0, 20.0, 1000.0)
    settings, series = json.loads(results[0][7]), json.loads(results[0][8])
    assert (settings["batch_size"], settings["model"], settings["device"]) == (4, "auto", "cuda:0")
    assert (series["batch_size"], series["model"], series["gpu_model"]) == (4, "bert-large", "NVIDIA H200")
    assert "device" not in series and "torch" not in series
    assert results[1][:5] == ("fp16", "oom", 1, 0, None)
    assert count(db, "repeats") == 4
    repeat = execute(
        db,
        "SELECT p.repeat, p.status, f.value, p.row_json FROM repeats p LEFT JOIN repeat_figures f "
        "ON f.repeat_id = p.id AND f.metric = 'samples_per_s' ORDER BY p.id LIMIT 1",
    )[0]
    assert repeat[:3] == (0, "ok", 100.0)
    assert json.loads(repeat[3])["scenario"] == "baseline"


def test_a_real_h200_run_is_stored_and_importing_it_again_stores_nothing(db: str, tmp_path: Path) -> None:
    copy = shutil.copytree(H200_RUN, tmp_path / "elsewhere")  # same run, another path
    first = library.import_dirs(db, [H200_RUN])[0]
    again = library.import_dirs(db, [H200_RUN, copy])
    assert first.created and first.scenarios == 11
    assert [(i.run_id, i.created) for i in again] == [(first.run_id, False), (first.run_id, False)]
    assert (count(db, "runs"), count(db, "results"), count(db, "repeats")) == (1, 11, 11)
    gpu, driver, torch = execute(db, "SELECT gpu_model, driver, torch FROM runs")[0]
    assert (gpu, driver, torch) == ("NVIDIA H200", "580.159.04", "2.11.0")
    bf16 = execute(
        db, f"SELECT s.median, r.model FROM results r {figure('s', 'samples_per_s')} WHERE scenario = 'bf16'"
    )[0]
    assert bf16[1] == "bert-large" and bf16[0] == pytest.approx(44.4927, abs=1e-4)


def test_a_changed_results_file_is_another_run(db: str, tmp_path: Path) -> None:
    copy = shutil.copytree(H200_RUN, tmp_path / "edited")
    text = (copy / "results.csv").read_text()
    (copy / "results.csv").write_text(text.replace("33.786536661515704", "30.0"))
    ids = [i.run_id for i in library.import_dirs(db, [H200_RUN, copy])]
    assert ids == [1, 2]


# -- a results.csv re-saved by another tool is the same run ---------------------------------------
def resaved(directory: Path, to: Path, how: dict[str, Any], columns: list[int], rows: list[int]) -> Path:
    """A copy of a result directory whose results.csv pandas read and wrote back: the same cells
    (`how`: to_csv's quoting, line endings, float format), the columns and rows in another order."""
    shutil.copytree(directory, to)
    numeric = how.pop("numeric")  # read as numbers (written back in the float format) or as text
    frame = pd.read_csv(directory / "results.csv", **({} if numeric else {"dtype": str, "keep_default_na": False}))
    frame = frame.iloc[rows, columns]
    (to / "results.csv").write_text(frame.to_csv(index=False, **how), newline="")
    return to


RESAVES = st.fixed_dictionaries(
    {
        "numeric": st.booleans(),
        "quoting": st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL, csv.QUOTE_NONNUMERIC]),
        "lineterminator": st.sampled_from(["\n", "\r\n"]),
        "float_format": st.sampled_from([None, "%.17g", "%.17e"]),  # each reads back as the same float
    }
)
SPEEDS = st.lists(st.floats(1e-3, 1e6, allow_nan=False), min_size=1, max_size=4)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(how=RESAVES, speeds=SPEEDS, loss=st.floats(allow_nan=False, allow_infinity=False), data=st.data())
def test_a_resaved_results_csv_is_the_same_run_and_a_changed_value_another(
    tmp_path_factory: pytest.TempPathFactory, how: dict[str, Any], speeds: list[float], loss: float, data: st.DataObject
) -> None:
    root = tmp_path_factory.mktemp("resaved")
    rows = reps("baseline", speeds) + reps("fp16", [0.0], status="oom")
    for row in rows:
        row["final_loss"] = loss if row["status"] == "ok" else None
    original = write_run(root / "run", rows, env(1))
    width, length = len(pd.read_csv(original / "results.csv").columns), len(rows)
    columns = data.draw(st.permutations(range(width)), label="columns")
    order = data.draw(st.permutations(range(length)), label="rows")
    copy = resaved(original, root / "copy", dict(how), columns, order)
    assert read_result_dir(copy).run_key == read_result_dir(original).run_key

    changed = [dict(r) for r in rows]
    changed[data.draw(st.integers(0, len(speeds) - 1), label="row")]["samples_per_s"] *= 1.5
    other = resaved(write_run(root / "changed", changed, env(1)), root / "changed-copy", dict(how), columns, order)
    assert read_result_dir(other).run_key != read_result_dir(original).run_key


def test_importing_a_resaved_results_csv_stores_nothing(db: str, tmp_path: Path) -> None:
    width, length = len(pd.read_csv(H200_RUN / "results.csv").columns), 11
    how = {"numeric": True, "quoting": csv.QUOTE_NONNUMERIC, "lineterminator": "\r\n", "float_format": "%.17e"}
    copy = resaved(H200_RUN, tmp_path / "resaved", how, list(range(width))[::-1], list(range(length))[::-1])
    assert (copy / "results.csv").read_bytes() != (H200_RUN / "results.csv").read_bytes()
    first, again = library.import_dirs(db, [H200_RUN, copy])
    assert (first.created, again.created, again.run_id) == (True, False, first.run_id)
    assert (count(db, "runs"), count(db, "repeats")) == (1, 11)


def test_version_1_keys_are_made_again_from_the_stored_rows(db: str, tmp_path: Path) -> None:
    """A store written by version 1 (run_key: the sha256 of the file's bytes) is migrated: the
    unchanged file and a re-saved copy are both the run it holds."""
    library.import_dirs(db, [H200_RUN])
    created_at, host, sha = execute(db, "SELECT created_at, host, results_sha256 FROM runs")[0]
    moment = created_at if isinstance(created_at, datetime) else datetime.fromisoformat(str(created_at))
    old_key = hashlib.sha256(f"{moment.isoformat()}|{host}|{sha}".encode()).hexdigest()
    execute(db, f"UPDATE runs SET run_key = '{old_key}'")
    execute(db, "UPDATE schema_version SET version = 1")
    how = {"numeric": False, "quoting": csv.QUOTE_ALL, "lineterminator": "\r\n", "float_format": None}
    copy = resaved(
        H200_RUN,
        tmp_path / "resaved",
        how,
        list(range(len(pd.read_csv(H200_RUN / "results.csv").columns))),
        list(range(11)),
    )
    again = library.import_dirs(db, [copy, H200_RUN])
    assert [(i.run_id, i.created) for i in again] == [(1, False), (1, False)]
    assert execute(db, "SELECT run_key FROM runs") == [(read_result_dir(H200_RUN).run_key,)]
    assert execute(db, "SELECT version FROM schema_version") == [(schema.SCHEMA_VERSION,)]


def test_version_2_gains_energy_per_sample_filled_from_the_stored_rows(db: str, tmp_path: Path) -> None:
    """A store written by version 2 has no energy figures: a writer adds them and fills them from
    each repeat's stored row (median and spread over the ok repeats). Here a store of today's
    tables marked version 2 with its energy rows taken out; test_history_migrate.py migrates a
    version 2 store made from one that version 3 wrote."""
    rows = reps("bf16", [100.0, 50.0])
    for row, joules in zip(rows, (700.0, 1400.0), strict=True):
        row["energy_per_sample_j"] = joules
    library.import_dirs(db, [write_run(tmp_path / "run", rows, env(1))])
    for table in ("result_figures", "repeat_figures"):
        execute(db, f"DELETE FROM {table} WHERE metric = 'energy_per_sample_j'")
    execute(db, "UPDATE schema_version SET version = 2")
    library.import_dirs(db, [write_run(tmp_path / "later", reps("bf16", [100.0]), env(2))])
    assert execute(db, "SELECT version FROM schema_version") == [(schema.SCHEMA_VERSION,)]
    got = execute(
        db, f"SELECT e.median, e.spread_pct FROM results r {figure('e', 'energy_per_sample_j')} ORDER BY r.run_id"
    )
    assert got[0] == pytest.approx((1050.0, 100 * (1400.0 - 700.0) / 1050.0))
    assert got[1][0] == pytest.approx(700.0) and got[1][1] is None  # one repeat at 100/s: no spread
    energy = execute(db, "SELECT value FROM repeat_figures WHERE metric = 'energy_per_sample_j'")
    assert sorted(v for (v,) in energy) == [700.0, 700.0, 1400.0]


def test_an_unchanged_file_is_its_stored_run_whatever_its_stored_rows_give(db: str) -> None:
    """A run stored by a gpubench whose reader read the file otherwise (other rows, so another
    key after the migration) is still found by the file's bytes."""
    library.import_dirs(db, [H200_RUN])
    execute(db, 'UPDATE repeats SET row_json = \'{"read": "otherwise"}\'')
    execute(db, "UPDATE schema_version SET version = 1")
    [again] = library.import_dirs(db, [H200_RUN])
    assert (again.run_id, again.created) == (1, False)
    assert execute(db, "SELECT run_key FROM runs") != [(read_result_dir(H200_RUN).run_key,)]


def test_the_series_key_ignores_software_versions_but_not_settings_or_gpu(db: str, tmp_path: Path) -> None:
    dirs = [
        write_run(tmp_path / "a", reps("bf16", [100.0]), env(1, torch="2.11.0")),
        write_run(tmp_path / "b", reps("bf16", [100.0]), env(2, torch="2.12.0")),
        write_run(tmp_path / "c", reps("bf16", [100.0], batch_size=8), env(3)),
        write_run(tmp_path / "d", reps("bf16", [100.0]), env(4, gpu="NVIDIA A100-SXM4-80GB")),
    ]
    library.import_dirs(db, dirs)
    keys = [k for (k,) in execute(db, "SELECT series_key FROM results ORDER BY run_id")]
    assert keys[0] == keys[1]
    assert len({keys[0], keys[2], keys[3]}) == 3


def test_a_setting_added_later_keeps_the_keys_of_series_recorded_before_it(db: str, tmp_path: Path) -> None:
    """compile_scope came after the first recorded runs: at its default it stays out of the key."""
    dirs = [
        write_run(tmp_path / "before", reps("compile", [100.0], compile=True), env(1)),
        write_run(tmp_path / "default", reps("compile", [100.0], compile=True, compile_scope="model"), env(2)),
        write_run(tmp_path / "layers", reps("compile", [100.0], compile=True, compile_scope="layers"), env(3)),
    ]
    old = pd.read_csv(dirs[0] / "results.csv")  # as written before the column existed
    old.drop(columns="compile_scope").to_csv(dirs[0] / "results.csv", index=False)
    library.import_dirs(db, dirs)
    keys = [k for (k,) in execute(db, "SELECT series_key FROM results ORDER BY run_id")]
    assert keys[0] == keys[1] != keys[2]


def test_a_directory_without_env_json_is_refused_before_anything_is_stored(db: str, tmp_path: Path) -> None:
    good = write_run(tmp_path / "good", reps("baseline", [100.0]), env(1))
    bad = write_run(tmp_path / "bad", reps("baseline", [100.0]), None)
    with pytest.raises(BadInput, match="no env.json"):
        library.import_dirs(db, [good, bad])
    with pytest.raises(BadInput, match="no history database|empty"):
        library.list_runs(db)


# -- judging through the store ---------------------------------------------------------------------
def test_check_and_accept_through_the_store(db: str, tmp_path: Path) -> None:
    steady = {"bf16": [100.0, 100.5, 99.5], "fp16": [200.0, 201.0, 199.0]}
    slower = {"bf16": [80.0, 80.5, 79.5], "fp16": [200.0, 201.0, 199.0]}
    library.import_dirs(db, nights(tmp_path, [steady] * 6 + [slower] * 2))
    result = library.check(db, Params())
    verdicts = {(r["scenario"], r["metric"]): r["verdict"] for r in result.rows.to_dict("records")}
    assert result.exit_code == 1 and result.run["id"] == 8
    assert verdicts[("bf16", "samples_per_s")] == "regression"
    assert verdicts[("fp16", "samples_per_s")] == "unchanged"
    run, steps = library.accept(db, "new attention kernel: slower on purpose", scenarios=["bf16"], run="7")
    assert run["id"] == 7 and [s["scenario"] for s in steps] == ["bf16"]
    assert library.check(db, Params()).exit_code == 0
    assert (
        library.check(db, Params(), run="7")
        .rows.set_index(["scenario", "metric"])
        .loc[("bf16", "samples_per_s"), "verdict"]
        == "accepted"
    )


def test_check_reads_the_cpu_probe_of_each_stored_repeat(db: str, tmp_path: Path) -> None:
    """The CPU probe comes back from the stored rows: the slow nights' CPU (16 and 17 ms) against
    the steady nights' (12 ms) is in the regression's note; rows without the probe give none.
    Five steady nights first: a series' first 5 runs only warn (they measure its noise)."""
    dirs = []
    for night in range(1, 8):
        speeds, loop = ([100.0, 100.5, 99.5], (12.0, 12.0)) if night <= 5 else ([80.0, 80.5, 79.5], (16.0, 17.0))
        rows = [{**r, "cpu_loop_start_ms": loop[0], "cpu_loop_end_ms": loop[1]} for r in reps("bf16", speeds)]
        rows += reps("fp16", speeds)  # made before the probe existed
        dirs.append(write_run(tmp_path / f"night{night}", rows, env(night)))
    library.import_dirs(db, dirs)
    rows = library.check(db, Params()).rows.set_index(["scenario", "metric"])
    assert rows.loc[("bf16", "samples_per_s"), "verdict"] == "regression"
    assert "(a fixed Python loop: 16.5 vs 12.0 ms, +38%)" in rows.loc[("bf16", "samples_per_s"), "note"]
    assert rows.loc[("fp16", "samples_per_s"), "verdict"] == "regression"
    assert "CPU" not in rows.loc[("fp16", "samples_per_s"), "note"]


def test_check_picks_a_run_by_its_result_directory(db: str, tmp_path: Path) -> None:
    dirs = nights(tmp_path, [{"bf16": [100.0, 100.0, 100.0]}] * 3)
    library.import_dirs(db, dirs)
    assert library.check(db, Params(), run=str(dirs[1])).run["id"] == 2
    stray = write_run(tmp_path / "stray", reps("bf16", [1.0]), env(9))
    with pytest.raises(BadInput, match="not in"):
        library.check(db, Params(), run=str(stray))
    with pytest.raises(BadInput, match="no run 42"):
        library.check(db, Params(), run="42")


# -- two writers at once ---------------------------------------------------------------------------
WRITER = """
import sys, time
from pathlib import Path
from bench.history.library import import_dirs
db, go, dirs = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
deadline = time.monotonic() + 60
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.01)
for d in dirs:  # one store opening and one transaction per directory: as many races as we can
    import_dirs(db, [Path(d)])
"""


def test_two_processes_recording_at_once_lose_nothing(db: str, tmp_path: Path) -> None:
    per_writer = 6
    dirs = [
        write_run(
            tmp_path / f"run{i:02d}",
            reps("bf16", [100.0 + i, 101.0, 99.0]) + reps("fp16", [200.0]),
            env(i + 1, host=f"runner-{i % 2}"),
        )
        for i in range(2 * per_writer)
    ]
    go = tmp_path / "go"
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, db, str(go), *map(str, dirs[w::2])],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(2)
    ]
    time.sleep(1.0)  # both are importing their modules; then they start together
    go.touch()
    for writer in writers:
        _, stderr = writer.communicate(timeout=180)
        assert writer.returncode == 0, stderr
    assert count(db, "runs") == 2 * per_writer
    assert count(db, "results") == 2 * 2 * per_writer
    assert count(db, "repeats") == 4 * 2 * per_writer
    assert execute(db, "SELECT COUNT(*) FROM schema_version")[0][0] == 1
    sources = {Path(s).name for (s,) in execute(db, "SELECT source FROM runs")}
    assert sources == {d.name for d in dirs}


# -- databases that are not ours, broken, or newer -------------------------------------------------
def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_corrupt_sqlite_file_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite"
    path.write_bytes(b"this is not a database, just some bytes\n" * 50)
    before = digest(path)
    directory = write_run(tmp_path / "run", reps("baseline", [100.0]), env(1))
    with pytest.raises(BadInput, match="file is not a database"):
        library.import_dirs(str(path), [directory])
    with pytest.raises(BadInput, match="file is not a database"):
        library.list_runs(str(path))
    assert digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history.sqlite", "run"]


def test_a_foreign_database_is_refused_untouched(db: str, tmp_path: Path) -> None:
    execute(db, "CREATE TABLE invoices (id INTEGER PRIMARY KEY, amount REAL)")
    execute(db, "INSERT INTO invoices (id, amount) VALUES (1, 9.5)")
    directory = write_run(tmp_path / "run", reps("baseline", [100.0]), env(1))
    with pytest.raises(BadInput, match=r"not a gpubench history database \(it holds other tables: invoices\)"):
        library.import_dirs(db, [directory])
    assert execute(db, "SELECT * FROM invoices") == [(1, 9.5)]
    assert count(db, "invoices") == 1 and "runs" not in str(execute_tables(db))


def execute_tables(db: str) -> list[str]:
    from sqlalchemy import create_engine, inspect
    from sqlalchemy.engine import URL

    engine = create_engine(db if "://" in db else URL.create("sqlite", database=db))
    try:
        return inspect(engine).get_table_names()
    finally:
        engine.dispose()


def test_a_schema_from_a_newer_release_is_refused_untouched(db: str, tmp_path: Path) -> None:
    library.import_dirs(db, [write_run(tmp_path / "run", reps("baseline", [100.0]), env(1))])
    execute(db, "UPDATE schema_version SET version = 99")
    later = write_run(tmp_path / "later", reps("baseline", [100.0]), env(2))
    for attempt in (
        lambda: library.import_dirs(db, [later]),
        lambda: library.list_runs(db),
        lambda: library.check(db, Params()),
    ):
        with pytest.raises(
            BadInput,
            match=rf"newer gpubench \(schema version 99; this release reads up to {schema.SCHEMA_VERSION}\)",
        ):
            attempt()
    assert count(db, "runs") == 1
    assert execute(db, "SELECT version FROM schema_version") == [(99,)]


def test_an_older_schema_is_migrated_by_a_writer(db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    library.import_dirs(db, [write_run(tmp_path / "run", reps("baseline", [100.0]), env(1))])
    from sqlalchemy import text

    now = schema.SCHEMA_VERSION
    monkeypatch.setattr(schema, "SCHEMA_VERSION", now + 1)
    monkeypatch.setitem(store.MIGRATIONS, now, lambda conn: conn.execute(text("ALTER TABLE runs ADD COLUMN note TEXT")))
    with pytest.raises(BadInput, match=f"schema version {now} is older than {now + 1}"):
        library.list_runs(db)
    library.import_dirs(db, [write_run(tmp_path / "later", reps("baseline", [100.0]), env(2))])
    assert execute(db, "SELECT version FROM schema_version") == [(now + 1,)]
    assert execute(db, "SELECT COUNT(note) FROM runs") == [(0,)]
    assert len(library.list_runs(db)) == 2


@pytest.mark.parametrize(
    "target, message",
    [
        ("mysql://user@localhost/db", "unsupported database 'mysql'"),
        ("postgresql://gpubench:secret@127.0.0.1:1/history", r"127\.0\.0\.1:1/history: connection failed"),
        ("not a url://", "not a database URL"),
        ("", "--db is empty"),
    ],
)
def test_a_wrong_url_is_one_clear_error(target: str, message: str) -> None:
    with pytest.raises(BadInput, match=message) as caught:
        open_store(target, write=True)
    assert "secret" not in str(caught.value)


def test_reading_a_missing_sqlite_file_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "history.sqlite"
    with pytest.raises(BadInput, match="no history database here"):
        library.list_runs(str(path))
    assert not path.parent.exists()
