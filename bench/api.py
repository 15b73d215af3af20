"""The library functions behind the commands: the CLI only parses their arguments and renders.

One name per command (`history` has one per subcommand); each is the function the command calls,
or a thin wrapper where the command does more than one library step (the report after a run or a
fit). Rendering (tables, markdown, JSON) stays with the command or its package's `render` module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .compare.comparison import compare
from .compare.power import plan as detect
from .export.mlflow import export_dir as export
from .fit.fitting import FitOutcome, FitRequest
from .fit.fitting import fit as _fit
from .planner import matrix as matrix_mod
from .planner.planning import plan_scenarios
from .predict import predict_matrix as predict
from .recommend.searching import RecommendRequest, recommend
from .report.content import load_many as report
from .results import load_run
from .results.cost import project as cost
from .results.merge import merge_dirs as merge
from .run.outcome import RunOutcome
from .run.plan import RunPlan
from .run.request import RunRequest
from .run.runner import Reporter
from .run.session import environment, report_or_warn
from .run.session import run as _run
from .run.slurm import run_slurm
from .verify.verifying import VerifyRequest, verify

__all__ = [
    "FitRequest",
    "RecommendRequest",
    "RunRequest",
    "VerifyRequest",
    "compare",
    "cost",
    "detect",
    "environment",
    "export",
    "fit",
    "history_accept",
    "history_check",
    "history_import",
    "history_list",
    "history_show",
    "list_scenarios",
    "load_run",
    "merge",
    "predict",
    "recommend",
    "report",
    "run",
    "run_slurm",
    "verify",
    "write_report",
]

# each command and the library function behind it (tests/test_api.py walks the CLI against it)
COMMANDS: dict[str, str] = {
    "run": "run",
    "list": "list_scenarios",
    "env": "environment",
    "compare": "compare",
    "report": "report",
    "history list": "history_list",
    "history show": "history_show",
    "history check": "history_check",
    "history import": "history_import",
    "history accept": "history_accept",
    "predict": "predict",
    "fit": "fit",
    "cost": "cost",
    "merge": "merge",
    "export": "export",
    "recommend": "recommend",
    "verify": "verify",
}


def write_report(result_dirs: Path | Sequence[Path], output: Path | None = None, baseline: str | None = None) -> Path:
    """`gpubench report` (HTML): the report of one or more result directories (bench/report/html.py)."""
    from .report import html  # looked up when called, so a test can stand in for the writer

    return html.write_report(result_dirs, output, baseline)


# -- the history: SQLAlchemy is imported when a history command runs, not by every command
def history_list(db: str, limit: int | None = 20) -> list[dict[str, Any]]:
    """`gpubench history list`: the recorded runs, newest first."""
    from .history import library

    return library.list_runs(db, limit)


def history_show(db: str, scenario: str, metric: str, params: Any, **where: Any) -> Any:
    """`gpubench history show`: one scenario's series of one metric, judged (bench/history/library.py)."""
    from .history import library

    return library.show(db, scenario, metric, params, **where)


def history_check(db: str, params: Any, **where: Any) -> Any:
    """`gpubench history check`: every series' verdict on the last run (or --run)."""
    from .history import library

    return library.check(db, params, **where)


def history_import(db: str, paths: Sequence[Path], **how: Any) -> list[Any]:
    """`gpubench history import`: result directories into the history."""
    from .history import library

    return library.import_dirs(db, paths, **how)


def history_accept(db: str, note: str, **which: Any) -> Any:
    """`gpubench history accept`: a run's level as the new normal."""
    from .history import library

    return library.accept(db, note, **which)


def _report_writer(out: Path) -> object:
    return write_report(out)


def run(
    request: RunRequest,
    reporter: Reporter | None = None,
    warn: Callable[[str], None] = lambda _msg: None,
    record_db: str | None = None,
    info: Callable[[str], None] = lambda _msg: None,
    mlflow: tuple[str, str] | None = None,
) -> tuple[RunPlan, RunOutcome]:
    """`gpubench run`: plan, measure and keep a run; DIR/report.html is written under the run's lock
    before the history record and the MLflow export (unless request.report is off)."""
    return _run(
        request, reporter, warn=warn, record_db=record_db, info=info, mlflow=mlflow, write_report=_report_writer
    )


def fit(
    request: FitRequest,
    reporter: Reporter | None = None,
    warn: Callable[[str], None] = lambda _m: None,
    info: Callable[[str], None] = lambda _m: None,
) -> FitOutcome:
    """`gpubench fit`: the searches, then DIR/report.html of the probes that ran (a failure only warns)."""
    outcome = _fit(request, reporter, warn=warn, info=info)
    if outcome.rows and request.report:
        report_or_warn(_report_writer, outcome.out, warn)
    return outcome


def list_scenarios(matrix: str, overrides: dict[str, Any]) -> list[dict[str, Any]]:
    """`gpubench list`: each scenario of a matrix with what it changes versus the baseline (or the first
    scenario), and a note where an override left it; refused as `run` refuses (bench/planner/planning.py)."""
    m = matrix_mod.load_matrix(matrix, overrides=overrides)
    scenarios = m.scenarios
    plan_scenarios(scenarios, "cpu")  # what `run` refuses, refused here too (bench/planner/planning.py)
    reference = next((s for s in scenarios if s.name == "baseline"), scenarios[0])
    return [
        {
            "scenario": s,
            "changes": matrix_mod.diff_from(s, reference),
            "reference": reference.name,
            "note": m.notes.get(s.name, ""),  # why a command-line setting left it (bench/planner/matrix.py OWN_FIELDS)
        }
        for s in scenarios
    ]
