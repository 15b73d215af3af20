"""Made tests/data/history-v3.* with gpubench at commit 88f4dc8 (history schema version 3, one SQL
column per judged figure): the database that test_history_migrate.py migrates, as today's users
have it. It runs only against that commit's code (later code writes another schema):

    git worktree add /tmp/v3 88f4dc8 && cd /tmp/v3
    PYTHONPATH=$PWD python /path/to/make_history_v3.py /path/to/tests/data

It writes history-v3.sqlite (the store), history-v3.postgresql.sql (the same store as PostgreSQL
DDL and INSERTs, for a fresh database) and history-v3.expected.json (what `history check` and
`history show` printed from it, as JSON).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from sqlalchemy import create_engine, insert, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import CreateIndex, CreateTable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: history_support, harness
from history_support import env, reps, write_run  # noqa: E402

from bench.history import api, schema  # noqa: E402

# what the expected file records: each command's arguments after `gpubench history`
COMMANDS = {
    "check": ["check", "--format", "json"],
    "check-run-2": ["check", "--run", "2", "--format", "json"],
    "show-bf16-speed": ["show", "--scenario", "bf16", "--metric", "samples_per_s", "--format", "json", "--last", "0"],
    "show-bf16-energy": ["show", "--scenario", "bf16", "--metric", "energy_per_sample_j", "--format", "json"],
    "show-fp32-memory": ["show", "--scenario", "fp32", "--metric", "peak_mem_mb", "--format", "json"],
    "show-fp32-loss": ["show", "--scenario", "fp32", "--metric", "final_loss", "--format", "json"],
    "list": ["list", "--format", "json", "--limit", "0"],
}


def night_rows(night: int) -> list[dict]:
    """bf16 (three repeats, energy, tokens and MFU), fp32 (no energy: a GPU before the probe; out of
    memory on the last night) and a skipped one; night 4 is slower on bf16."""
    speed = 100.0 if night < 4 else 80.0
    bf16 = reps("bf16", [speed, speed + 0.5 * night, speed - 0.5], precision="bf16")
    for i, row in enumerate(bf16):
        row.update({"tokens_per_s": row["samples_per_s"] * 512, "mfu": 0.30 + 0.01 * i})
        row.update({"cpu_loop_start_ms": 12.0 + night, "cpu_loop_end_ms": 12.5})
    fp32 = (
        reps("fp32", [50.0 + night, 50.5], mem=2000.0 + 10 * night) if night < 4 else reps("fp32", [0.0], status="oom")
    )
    for row in fp32:
        row.pop("energy_per_sample_j", None)
        row.pop("gpu_energy_j", None)
        row.pop("gpu_energy_source", None)
    skipped = reps("fp8", [0.0], status="skipped")
    return bf16 + fp32 + skipped


def pg_dump(db: Path) -> str:
    """The store as PostgreSQL statements: the version 3 tables, their rows, the id sequences."""
    dialect = postgresql.dialect()
    engine = create_engine(f"sqlite:///{db}")
    lines = ["-- gpubench history schema version 3 (commit 88f4dc8), made by make_history_v3.py"]
    for table in schema.metadata.sorted_tables:
        lines.append(str(CreateTable(table).compile(dialect=dialect)).strip() + ";")
        lines.extend(str(CreateIndex(i).compile(dialect=dialect)) + ";" for i in sorted(table.indexes, key=str))
    with engine.connect() as conn:
        for table in schema.metadata.sorted_tables:
            order = [c for c in table.primary_key.columns]
            for row in conn.execute(select(table).order_by(*order)).mappings():
                statement = insert(table).values(**dict(row))
                lines.append(str(statement.compile(dialect=dialect, compile_kwargs={"literal_binds": True})) + ";")
            if "id" in table.c:
                lines.append(
                    f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                    f"(SELECT COALESCE(MAX(id), 1) FROM {table.name}));"
                )
    engine.dispose()
    return "\n".join(lines) + "\n"


def main(out: Path) -> None:
    assert schema.SCHEMA_VERSION == 3, "run this with gpubench at commit 88f4dc8"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        db = root / "history.sqlite"
        dirs = [write_run(root / f"night{n}", night_rows(n), env(n)) for n in range(1, 5)]
        api.import_dirs(str(db), dirs)
        api.accept(str(db), "fp32 out of memory on purpose", scenarios=["fp32"], run="4")
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA journal_mode = DELETE")  # one file, no -wal beside it
            conn.execute("VACUUM")
        expected = {}
        for name, args in COMMANDS.items():
            done = subprocess.run(
                [sys.executable, "-m", "bench", "history", *args, "--db", str(db)],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert done.returncode in (0, 1), done.stderr
            expected[name] = {"args": args, "exit_code": done.returncode, "stdout": json.loads(done.stdout)}
        shutil.copyfile(db, out / "history-v3.sqlite")
        (out / "history-v3.postgresql.sql").write_text(pg_dump(db))
        (out / "history-v3.expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
