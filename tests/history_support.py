"""Helpers for the history tests: result directories built with bench.results.write_results, and
the two stores every store test runs against (a SQLite file; a PostgreSQL schema of its own).

PostgreSQL comes from $GPUBENCH_TEST_PG_URL (.ci/run starts a server and sets it; default: a local
server at 127.0.0.1:5432, database gpubench_test). When none answers, the PostgreSQL variants are
skipped with the reason, except under CI=true, where they fail: CI must test both backends.
"""

from __future__ import annotations

import copy
import functools
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from harness import write_run  # also imported from here by the history tests

PG_ENV = "GPUBENCH_TEST_PG_URL"
PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/gpubench_test"
BACKENDS = ("sqlite", "postgresql")
H200_RUN = Path(__file__).resolve().parent / "data" / "history" / "h200-full"  # a real H200 full run

ENV: dict[str, Any] = {
    "gpubench": "0.1.0",
    "created_at": "2026-11-01T02:00:00+00:00",
    "command": "gpubench run --matrix full --repeats 3 --record",
    "host": "gpu-node-1",
    "python": "3.12.3",
    "device": "cuda:0",
    "gpu": {"name": "NVIDIA H200", "uuid": "GPU-1", "driver": "580.65", "memory_total_mb": 143771, "capability": "9.0"},
    "cuda_runtime": "13.0",
    "packages": {"torch": "2.11.0", "transformers": "5.17.0", "accelerate": "1.15.0", "bitsandbytes": "0.50.2"},
    "git": {"commit": "0123456789abcdef0123456789abcdef01234567", "branch": "main"},
    "matrix": "full",
}


def env(
    night: int = 1, *, gpu: str | None = "NVIDIA H200", torch: str = "2.11.0", host: str = "gpu-node-1"
) -> dict[str, Any]:
    """env.json of a run made on day `night` of November 2026 at 02:00 UTC."""
    out = copy.deepcopy(ENV)
    out["created_at"] = f"2026-11-{night:02d}T02:00:00+00:00"
    out["host"] = host
    out["packages"]["torch"] = torch
    if gpu is None:
        out["gpu"], out["device"] = None, "cpu"
    else:
        out["gpu"]["name"] = gpu
    return out


def reps(
    scenario: str, speeds: list[float], *, mem: float = 1000.0, status: str = "ok", **settings: Any
) -> list[dict[str, Any]]:
    """One results.csv row per repeat; a failed status leaves the figures empty."""
    base = {
        "model": "auto",
        "model_resolved": "bert-large",
        "batch_size": 4,
        "precision": "fp32",
        "samples": 512,
        "seq_len": 512,
        "device": "cuda:0",
        **settings,
    }
    rows = []
    for i, speed in enumerate(speeds):
        row = {**base, "scenario": scenario, "repeat": i, "status": status, "error": ""}
        if status == "ok":
            row.update(
                {
                    "samples_per_s": speed,
                    "peak_mem_mb": mem,
                    "step_time_median_ms": 4000.0 / speed,
                    "final_loss": 0.5,
                    "loss_finite": True,
                    "energy_per_sample_j": 70000.0 / speed,  # a GPU at 700 W whatever its speed
                    "gpu_energy_j": 70000.0 / speed * 512,
                    "gpu_energy_source": "nvml-counter",
                }
            )
        else:
            row["error"] = f"{status} on purpose"
        rows.append(row)
    return rows


def nights(
    root: Path, speeds_by_night: list[dict[str, list[float]]], *, mem: float = 1000.0, gpu: str = "NVIDIA H200"
) -> list[Path]:
    """One result directory per night: {scenario: repeat speeds}; night 1 is the oldest."""
    out = []
    for night, scenarios in enumerate(speeds_by_night, start=1):
        rows = [row for name, speeds in scenarios.items() for row in reps(name, speeds, mem=mem)]
        out.append(write_run(root / f"night{night:02d}", rows, env(night, gpu=gpu)))
    return out


# -- the stores ------------------------------------------------------------------------------------
def pg_url() -> str:
    return os.environ.get(PG_ENV) or PG_DEFAULT


@functools.cache
def pg_problem() -> str | None:
    """None when the test server answers, else why not (once per session)."""
    from sqlalchemy import create_engine, text

    try:
        engine = create_engine(pg_url(), connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
    except Exception as exc:  # noqa: BLE001 - any failure means: no server to test against
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    return None


def require_pg() -> None:
    problem = pg_problem()
    if problem is None:
        return
    message = (
        f"no PostgreSQL server for the history tests at {pg_url()} ({problem}); "
        f"start one and set {PG_ENV}=postgresql+psycopg://USER@HOST:PORT/DB (see .ci/run)"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def store_target(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A new, empty store: a SQLite file in tmp_path, or a PostgreSQL schema dropped afterwards."""
    if backend == "sqlite":
        return str(tmp_path / "history.sqlite")
    require_pg()
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    schema = f"gpubench_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(pg_url())
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))

    def drop() -> None:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()

    request.addfinalizer(drop)
    url = make_url(pg_url()).update_query_dict({"options": f"-csearch_path={schema}"})
    return url.render_as_string(hide_password=False)


def execute(target: str, sql: str) -> list[tuple[Any, ...]]:
    """Run raw SQL against a store behind gpubench's back (to damage it, or to count rows)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import URL

    url: str | URL = target if "://" in target else URL.create("sqlite", database=target)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            result = conn.execute(text(sql))
            return [tuple(r) for r in result] if result.returns_rows else []
    finally:
        engine.dispose()
