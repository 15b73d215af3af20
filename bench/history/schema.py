"""The history database's tables (SQLAlchemy Core): one schema for SQLite and PostgreSQL.

SCHEMA_VERSION is stored in the `schema_version` table (one row, app = "gpubench"). A release
that changes the tables raises it and adds a step to bench.history.migrate.MIGRATIONS.
Times are stored as naive UTC datetimes. The figures are long-form: one row per result and metric
(`result_figures`) and one per repeat and metric (`repeat_figures`), the metric's name a value,
so a metric judged in the history later needs no new column and no migration. A figure that is
missing or not finite has no row.
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from ..metrics import metrics_in, names

# 2: run_key hashes the rows of results.csv, not its bytes; 3: energy_per_sample_j; 4: long-form figures
SCHEMA_VERSION = 4
APP = "gpubench"
# the figures kept per repeat and judged per result (median over ok repeats, spread in %): the
# metrics judged in the history (bench.metrics); their names are data in the figure tables
FIGURES = names(metrics_in("history"))
REPEAT_EXTRAS = ("tokens_per_s", "mfu")

metadata = MetaData()

schema_version = Table(
    "schema_version",
    metadata,
    Column("app", String(32), primary_key=True),
    Column("version", Integer, nullable=False),
    Column("updated_at", DateTime, nullable=False),
)

runs = Table(
    "runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    # identity: sha256 of env.json created_at + host + the sha256 of results.csv's rows as read
    # (bench.results.identity.content_sha256), so a re-saved copy of the file is the same run
    Column("run_key", String(64), nullable=False, unique=True),
    Column("created_at", DateTime, nullable=False),  # env.json created_at, UTC
    Column("recorded_at", DateTime, nullable=False),
    Column("host", Text, nullable=False),
    Column("git_commit", String(64)),
    Column("git_branch", Text),
    Column("gpu_model", Text, nullable=False),  # a GPU name, or "CPU"
    Column("gpu_count", Integer, nullable=False),
    Column("driver", Text),
    Column("cuda", Text),
    Column("torch", Text),
    Column("transformers", Text),
    Column("accelerate", Text),
    Column("bitsandbytes", Text),
    Column("gpubench", Text),
    Column("python", Text),
    Column("device", Text),
    Column("matrix", Text),
    Column("command", Text),
    Column("status", String(16), nullable=False),  # ok, failed, interrupted
    Column("source", Text),  # the result directory it was read from
    Column("results_sha256", String(64), nullable=False),  # of the file's bytes
    Column("env_json", Text, nullable=False),  # the whole env.json
)
Index("ix_runs_created_at", runs.c.created_at)

results = Table(
    "results",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("scenario", Text, nullable=False),
    # sha256 (first 16 hex digits) of the scenario, its settings, the GPU model and the model;
    # the software versions under test are not part of it
    Column("series_key", String(16), nullable=False),
    Column("series_json", Text, nullable=False),  # what the series key was made from
    Column("settings_json", Text, nullable=False),  # the scenario's resolved settings (results.csv)
    Column("model", Text),
    Column("status", String(16), nullable=False),  # ok, skipped, or the worst failed status
    Column("repeats", Integer, nullable=False),
    Column("ok_repeats", Integer, nullable=False),
    UniqueConstraint("run_id", "scenario", name="uq_results_run_scenario"),
)
Index("ix_results_series_key", results.c.series_key)

repeats = Table(
    "repeats",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("result_id", Integer, ForeignKey("results.id", ondelete="CASCADE"), nullable=False),
    Column("repeat", Integer, nullable=False),
    Column("status", String(16), nullable=False),
    Column("error", Text),
    Column("started_at", Text),
    Column("row_json", Text, nullable=False),  # the whole results.csv row
    UniqueConstraint("result_id", "repeat", name="uq_repeats_result_repeat"),
)

# a result's figure: the median over its ok repeats that have the metric, their number, and their
# spread ((max - min) / median x 100, with 2 or more); no row when no ok repeat has it
result_figures = Table(
    "result_figures",
    metadata,
    Column("result_id", Integer, ForeignKey("results.id", ondelete="CASCADE"), primary_key=True),
    Column("metric", String(64), primary_key=True),
    Column("median", Float, nullable=False),
    Column("spread_pct", Float),
    Column("n", Integer, nullable=False),
)

# a repeat's figure, as its results.csv row has it (FIGURES and REPEAT_EXTRAS); no row when empty
repeat_figures = Table(
    "repeat_figures",
    metadata,
    Column("repeat_id", Integer, ForeignKey("repeats.id", ondelete="CASCADE"), primary_key=True),
    Column("metric", String(64), primary_key=True),
    Column("value", Float, nullable=False),
)

# an accepted step: from run_id on, the series' level is the new normal for metric (NULL: all)
accepts = Table(
    "accepts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("series_key", String(16), nullable=False),
    Column("scenario", Text, nullable=False),
    Column("metric", String(64)),
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("note", Text, nullable=False),
    Column("accepted_at", DateTime, nullable=False),
    Column("accepted_by", Text),
)
Index("ix_accepts_series_key", accepts.c.series_key)

TABLES = tuple(metadata.tables)
