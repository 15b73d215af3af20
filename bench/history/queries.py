"""Read the history database: runs, and series of points ready for bench.history.check."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Select, and_, case, func, or_, select

from ..checks import is_finite
from ..errors import BadInput
from ..results import FAILED_STATUSES, row_cpu_loop_ms
from . import schema
from .check import Point, Series, Step

if TYPE_CHECKING:
    from .ingest import RunRecord

RUN_INFO = ("git_commit", "git_branch", "host", "driver", "cuda", "torch", "transformers", "accelerate", "bitsandbytes")


def run_by_id(conn: Connection, run_id: int) -> dict[str, Any] | None:
    row = conn.execute(select(schema.runs).where(schema.runs.c.id == run_id)).mappings().first()
    return dict(row) if row else None


def stored_run(conn: Connection, record: RunRecord) -> dict[str, Any] | None:
    """The stored run that `record` is: the one with its key, or one from the same results.csv
    (its time, host and bytes), which a gpubench whose reader read that file otherwise stored."""
    runs, run = schema.runs, record.run
    same_file = and_(
        runs.c.created_at == run["created_at"],
        runs.c.host == run["host"],
        runs.c.results_sha256 == run["results_sha256"],
    )
    query = select(runs).where(or_(runs.c.run_key == record.run_key, same_file)).order_by(runs.c.id)
    row = conn.execute(query).mappings().first()
    return dict(row) if row else None


def newest_run(conn: Connection) -> dict[str, Any] | None:
    runs = schema.runs
    row = conn.execute(select(runs).order_by(runs.c.created_at.desc(), runs.c.id.desc())).mappings().first()
    return dict(row) if row else None


def list_runs(conn: Connection, limit: int | None) -> list[dict[str, Any]]:
    """The newest runs first, each with its number of scenarios and of failed scenarios."""
    runs, results = schema.runs, schema.results
    failed = func.sum(_case_failed(results.c.status))
    counts = (
        select(results.c.run_id, func.count().label("scenarios"), failed.label("failed"))
        .group_by(results.c.run_id)
        .subquery()
    )
    query = (
        select(runs, counts.c.scenarios, counts.c.failed)
        .outerjoin(counts, counts.c.run_id == runs.c.id)
        .order_by(runs.c.created_at.desc(), runs.c.id.desc())
    )
    if limit is not None:
        query = query.limit(limit)
    out = []
    for row in conn.execute(query).mappings():
        item = {k: v for k, v in row.items() if k != "env_json"}
        item["scenarios"], item["failed"] = int(row["scenarios"] or 0), int(row["failed"] or 0)
        out.append(item)
    return out


def earlier_gpus(conn: Connection, run: dict[str, Any]) -> list[str]:
    """The GPU model of each run stored before this one (by its time)."""
    runs = schema.runs
    before = or_(
        runs.c.created_at < run["created_at"], and_(runs.c.created_at == run["created_at"], runs.c.id < run["id"])
    )
    return [str(g) for g in conn.execute(select(runs.c.gpu_model).where(before)).scalars()]


def scenario_names(conn: Connection) -> list[str]:
    query = select(schema.results.c.scenario).distinct().order_by(schema.results.c.scenario)
    return [str(s) for s in conn.execute(query).scalars()]


def run_results(conn: Connection, run_id: int) -> list[dict[str, Any]]:
    results = schema.results
    query = select(results).where(results.c.run_id == run_id).order_by(results.c.id)
    return [dict(r) for r in conn.execute(query).mappings()]


def load_series(
    conn: Connection,
    *,
    keys: Sequence[str] | None = None,
    scenario: str | None = None,
    gpu: str | None = None,
) -> list[Series]:
    """Every stored series that matches, its points oldest first, with its accepted steps."""
    results, runs = schema.results, schema.runs
    info = [runs.c[c] for c in RUN_INFO]
    query = select(
        results.c.id,
        results.c.run_id,
        results.c.scenario,
        results.c.series_key,
        results.c.series_json,
        results.c.model,
        results.c.status,
        runs.c.created_at,
        runs.c.gpu_model,
        *info,
    )
    query = _filtered(query.join(runs, runs.c.id == results.c.run_id), keys, scenario, gpu)
    # within a run, by series key: the order SQLite gave through its series-key index before, now on both backends
    order = (runs.c.created_at, runs.c.id, results.c.series_key, results.c.id)
    rows = list(conn.execute(query.order_by(*order)).mappings())
    medians = _medians(conn, keys, scenario, gpu)
    values, cpu_loops = _ok_repeats(conn, keys, scenario, gpu)
    grouped: dict[str, list[Any]] = defaultdict(list)
    for row in rows:
        grouped[row["series_key"]].append(row)
    steps = _steps(conn, list(grouped))
    return [_series(key, members, medians, values, cpu_loops, steps.get(key, ())) for key, members in grouped.items()]


def _medians(
    conn: Connection, keys: Sequence[str] | None, scenario: str | None, gpu: str | None
) -> dict[int, dict[str, float]]:
    """result id -> metric -> its stored median (FIGURES only), checked."""
    results, runs, figures = schema.results, schema.runs, schema.result_figures
    query = (
        select(figures.c.result_id, figures.c.metric, figures.c.median)
        .join(results, results.c.id == figures.c.result_id)
        .join(runs, runs.c.id == results.c.run_id)
        .where(figures.c.metric.in_(schema.FIGURES))
    )
    out: dict[int, dict[str, float]] = defaultdict(dict)
    for result_id, metric, median in conn.execute(_filtered(query, keys, scenario, gpu)):
        out[int(result_id)][metric] = stored_figure(median, metric, f"result {result_id}")
    return out


def _ok_repeats(
    conn: Connection, keys: Sequence[str] | None, scenario: str | None, gpu: str | None
) -> tuple[dict[int, dict[str, list[float]]], dict[int, list[float]]]:
    """Per result id: its ok repeats' values of each figure (in repeat order), and the CPU probe
    around each ok repeat's window (from its stored row)."""
    results, runs, repeats, figures = schema.results, schema.runs, schema.repeats, schema.repeat_figures
    ok = (
        select(repeats.c.result_id, repeats.c.row_json)
        .join(results, results.c.id == repeats.c.result_id)
        .join(runs, runs.c.id == results.c.run_id)
        .where(repeats.c.status == "ok")
    )
    cpu_loops: dict[int, list[float]] = defaultdict(list)
    for result_id, row_json in conn.execute(
        _filtered(ok, keys, scenario, gpu).order_by(repeats.c.result_id, repeats.c.repeat)
    ):
        cpu = row_cpu_loop_ms(_stored_json(row_json, f"repeat of result {result_id}"))
        if cpu is not None:
            cpu_loops[int(result_id)].append(cpu)
    stored = (
        select(repeats.c.result_id, figures.c.metric, figures.c.value)
        .join(repeats, repeats.c.id == figures.c.repeat_id)
        .join(results, results.c.id == repeats.c.result_id)
        .join(runs, runs.c.id == results.c.run_id)
        .where(repeats.c.status == "ok", figures.c.metric.in_(schema.FIGURES))
    )
    ordered = _filtered(stored, keys, scenario, gpu).order_by(repeats.c.result_id, repeats.c.repeat)
    values: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for result_id, metric, value in conn.execute(ordered):
        values[int(result_id)][metric].append(stored_figure(value, metric, f"repeat of result {result_id}"))
    return values, cpu_loops


def _filtered(query: Select[Any], keys: Sequence[str] | None, scenario: str | None, gpu: str | None) -> Select[Any]:
    if keys is not None:
        query = query.where(schema.results.c.series_key.in_(list(keys)))
    if scenario is not None:
        query = query.where(schema.results.c.scenario == scenario)
    if gpu is not None:
        query = query.where(schema.runs.c.gpu_model == gpu)
    return query


def _steps(conn: Connection, keys: list[str]) -> dict[str, tuple[Step, ...]]:
    if not keys:
        return {}
    accepts = schema.accepts
    query = select(accepts).where(accepts.c.series_key.in_(keys)).order_by(accepts.c.accepted_at, accepts.c.id)
    out: dict[str, list[Step]] = defaultdict(list)
    for row in conn.execute(query).mappings():
        out[row["series_key"]].append(Step(int(row["run_id"]), row["metric"], str(row["note"])))
    return {k: tuple(v) for k, v in out.items()}


def _series(
    key: str,
    rows: list[Any],
    medians: dict[int, dict[str, float]],
    values: dict[int, dict[str, list[float]]],
    cpu_loops: dict[int, list[float]],
    steps: tuple[Step, ...],
) -> Series:
    first = rows[0]
    points = tuple(
        Point(
            run_id=int(row["run_id"]),
            created_at=row["created_at"],
            status=str(row["status"]),
            values={f: medians.get(row["id"], {}).get(f) for f in schema.FIGURES},
            repeats={f: tuple(v) for f, v in values.get(row["id"], {}).items()},
            info={c: row[c] for c in RUN_INFO},
            cpu_loop_ms=_median(cpu_loops.get(row["id"], [])),
        )
        for row in rows
    )
    return Series(
        key=key,
        scenario=str(first["scenario"]),
        gpu_model=str(first["gpu_model"]),
        model=str(first["model"]),
        settings=_stored_json(first["series_json"], f"result {first['id']}"),
        points=points,
        steps=steps,
    )


def stored_figure(value: Any, figure: str, where: str) -> float:
    """A figure read back from the database, checked like one read from a results.csv: a finite
    number, not below zero (a loss may be), so that an edited or damaged row cannot pass a gate."""
    number = value if is_finite(value) else None
    if number is None or (figure != "final_loss" and number < 0):
        raise BadInput(
            f"history database: {where}: {figure} = {value!r} is not a finite number"
            + ("" if figure == "final_loss" else " of at least 0"),
            hint="the database was edited or damaged; rebuild it from the result directories (history import)",
        )
    return float(number)


def _stored_json(text: Any, where: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        raise BadInput(
            f"history database: {where}: unreadable JSON", hint="the database was edited or damaged"
        ) from None


def _median(values: list[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def _case_failed(status: Any) -> Any:
    return case((status.in_(FAILED_STATUSES), 1), else_=0)
