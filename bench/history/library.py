"""The library functions behind `gpubench history ...` and `gpubench run --record`.

Each takes the store (a SQLite path or a PostgreSQL URL, resolved at the CLI edge) and returns
data; bench.history.show and the CLI turn it into text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checks import ascii_digits
from ..errors import BadInput, did_you_mean
from ..redact import redact_url
from ..results.dirlock import check_unlocked
from . import queries
from .check import METRICS, STATUS_METRIC, CheckResult, Mark, Params, Series, judge_run, marks
from .ingest import read_result_dir
from .store import Store, open_store


@dataclass(frozen=True)
class Imported:
    path: Path
    run_id: int
    created: bool  # False: the run was stored already
    scenarios: int


@dataclass(frozen=True)
class SeriesView:
    """One series shown on one metric: its newest points, each judged."""

    series: Series
    metric: str
    marks: tuple[Mark, ...]  # aligned with points
    points: tuple[Any, ...]


def import_dirs(db: str, paths: Sequence[Path], *, unlocked_only: bool = True) -> list[Imported]:
    """Store result directories; every one is read and checked before anything is written.
    `unlocked_only`: refuse one that a run still holds (run --record, which holds it, says False)."""
    for p in (
        paths if unlocked_only else ()
    ):  # a run still being written is no night yet: importing it would store half of it
        folder = Path(p) if Path(p).is_dir() else Path(p).parent
        check_unlocked(folder, hint="import it once the run has ended (a run still writing is not a finished night)")
    records = [(Path(p), read_result_dir(Path(p))) for p in paths]
    with open_store(db, write=True) as store:
        out = []
        for path, record in records:
            run_id, created = store.add_run(record)
            out.append(Imported(path, run_id, created, len(record.results)))
        return out


def record_after_run(
    db: str, out: Path, *, unfinished: bool, warn: Callable[[str], None], info: Callable[[str], None]
) -> Imported | None:
    """`gpubench run --record`: store the run that just finished. Never raises: the results
    are on disk whatever happens here, and the run's exit code is not this function's to change."""
    if unfinished:  # interrupted, or stopped at --time-limit
        warn(
            f"the run did not finish, so it is not recorded in the history; finish it with "
            f"`gpubench run --resume {out} --record`"
        )
        return None
    try:
        stored = import_dirs(db, [out], unlocked_only=False)[0]  # this run holds the lock, and has ended
    except Exception as exc:  # noqa: BLE001 - any store failure is only a warning here
        warn(
            f"the run was not recorded in the history ({exc}); its results are in {out}: "
            f"add them later with `gpubench history import {out}`"
        )
        return None
    info(f"history: {'recorded' if stored.created else 'already stored:'} run {stored.run_id} in {redact_url(db)}")
    return stored


def list_runs(db: str, limit: int | None = 20) -> list[dict[str, Any]]:
    with open_store(db, write=False) as store:
        return store.read(lambda conn: queries.list_runs(conn, limit))


def show(
    db: str, scenario: str, metric: str, params: Params, *, gpu: str | None = None, last: int | None = 30
) -> list[SeriesView]:
    """The series of a scenario (one per GPU model and settings), newest series first."""
    with open_store(db, write=False) as store:
        found = store.read(lambda conn: queries.load_series(conn, scenario=scenario, gpu=gpu))
        if not found:
            _no_such_scenario(store, scenario, gpu)
    views = []
    for series in sorted(found, key=lambda s: s.points[-1].created_at, reverse=True):
        judged = marks(series, metric, params)
        keep = slice(-last, None) if last else slice(None)
        views.append(SeriesView(series, metric, tuple(judged[keep]), series.points[keep]))
    return views


def check(db: str, params: Params, *, run: str | None = None, metrics: Sequence[str] = METRICS) -> CheckResult:
    """Judge a run (default: the newest) against the history of each of its series."""
    with open_store(db, write=False) as store:

        def judge(conn: Any) -> CheckResult:
            found = _resolve_run(conn, store, run)
            keys = [r["series_key"] for r in queries.run_results(conn, int(found["id"]))]
            series = queries.load_series(conn, keys=keys)
            return judge_run(found, series, params, metrics=metrics, earlier_gpus=queries.earlier_gpus(conn, found))

        return store.read(judge)


def accept(
    db: str, note: str, *, scenarios: Sequence[str] = (), metric: str | None = None, run: str | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Mark a run (default: the newest) as the start of a new level for some of its scenarios
    (default: all), on one metric or all; returns the run and the accepted steps."""
    if not note.strip():
        raise BadInput("--note is empty", hint="say why the change is intended")
    if metric is not None and metric not in (*METRICS, STATUS_METRIC):
        raise BadInput(f"--metric {metric!r} is not one of {', '.join((*METRICS, STATUS_METRIC))}")
    with open_store(db, write=True) as store:

        def rows(conn: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
            found = _resolve_run(conn, store, run)
            results = queries.run_results(conn, int(found["id"]))
            names = [r["scenario"] for r in results]
            for name in scenarios:
                if name not in names:
                    hint = did_you_mean(name, names)
                    raise BadInput(f"scenario '{name}' is not in run {found['id']}", hint=hint)
            chosen = [r for r in results if not scenarios or r["scenario"] in scenarios]
            steps = [
                {
                    "series_key": r["series_key"],
                    "scenario": r["scenario"],
                    "metric": metric,
                    "run_id": found["id"],
                    "note": note.strip(),
                }
                for r in chosen
            ]
            return found, steps

        found, steps = store.read(rows)
        store.add_accepts(steps)
    return found, steps


def _resolve_run(conn: Any, store: Store, run: str | None) -> dict[str, Any]:
    """None: the newest run; digits: a run id; otherwise a result directory that was stored."""
    if run is None:
        found = queries.newest_run(conn)
        if found is None:
            raise BadInput(f"{store.name}: no runs stored yet")
        return found
    if not run.strip():
        raise BadInput("--run is empty", hint="give a run id (see `gpubench history list`) or a result directory")
    if ascii_digits(run.strip()):
        found = queries.run_by_id(conn, int(run))
        if found is None:
            raise BadInput(f"{store.name}: no run {run}", hint="see `gpubench history list`")
        return found
    record = read_result_dir(Path(run))
    found = queries.stored_run(conn, record)
    if found is None:
        raise BadInput(
            f"{run}: this result directory is not in {store.name}", hint=f"add it with `gpubench history import {run}`"
        )
    return found


def _no_such_scenario(store: Store, scenario: str, gpu: str | None) -> None:
    names = store.read(queries.scenario_names)
    if scenario in names and gpu:
        raise BadInput(f"scenario '{scenario}' has no runs on GPU '{gpu}' in {store.name}")
    hint = did_you_mean(scenario, names) or (f"stored: {', '.join(names)}" if names else None)
    raise BadInput(f"scenario '{scenario}' is not in {store.name}", hint=hint)
