"""What `gpubench run` prints at its end, in process, with the planning and the workers replaced:
the summary's spread is named, and the run says where the report is, that CPU figures test the
harness, and when the machine's CPU was unsteady."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from report_fixtures import cpu_rows
from typer.testing import CliRunner

from bench.cli import run_cmd
from bench.errors import ExitCode
from bench.recipe.scenario import Scenario
from bench.results import CPU_NOTE, write_results
from bench.run import envinfo, session
from bench.run.outcome import RunOutcome
from bench.run.plan import RunPlan

STEADY = {"passes": 8, "p10_ms": 10.0, "p90_ms": 11.0, "p90_over_p10": 1.1}
UNSTEADY = {"passes": 8, "p10_ms": 10.0, "p90_ms": 25.0, "p90_over_p10": 2.5}


def run_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: list[dict[str, Any]], cpu: dict) -> Any:
    out = tmp_path / "run"
    plan = RunPlan("quick", (Scenario(name="baseline"),), 2, "cpu", None, "tiny", out, 60.0)

    def execute(plan: RunPlan, *args: Any, **kwargs: Any) -> RunOutcome:
        write_results(plan.results_csv, rows)
        return RunOutcome(rows=rows, exit_code=ExitCode.OK, interrupted=False)

    monkeypatch.setattr(session, "prepare", lambda request, scratch: (plan, {}))
    monkeypatch.setattr(session, "execute", execute)
    monkeypatch.setattr(envinfo.cpuspeed, "probe", lambda only=None: cpu)
    monkeypatch.setattr(run_cmd, "_sigterm_as_interrupt", lambda: None)  # leave this process's SIGTERM be
    app = typer.Typer()
    run_cmd.register(app)
    app.command("unused")(lambda: None)  # two commands: `run` stays a subcommand
    return CliRunner().invoke(app, ["run", "--out", str(out)]), out


def ok_rows() -> list[dict[str, Any]]:
    return [r for r in cpu_rows() if r["status"] == "ok"]


def test_repeats_name_their_spread_and_the_run_says_where_the_report_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = ok_rows() + [{**r, "repeat": 1, "samples_per_s": r["samples_per_s"] * 1.1} for r in ok_rows()]
    result, out = run_with(tmp_path, monkeypatch, rows, STEADY)
    assert result.exit_code == 0, result.output
    assert "samples/s ± CV" in result.stdout
    assert f"report:  {out / 'report.html'}" in result.stderr and (out / "report.html").is_file()
    assert CPU_NOTE in " ".join(result.stderr.split())
    assert "unsteady" not in result.stderr


def test_one_repeat_has_no_spread_and_an_unsteady_cpu_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, _ = run_with(tmp_path, monkeypatch, ok_rows(), UNSTEADY)
    assert result.exit_code == 0, result.output
    assert "samples/s ± CV" not in result.stdout and "samples/s" in result.stdout
    words = " ".join(result.stderr.split())
    assert "warning: this machine's CPU speed was unsteady when the run started" in words
    assert "2.50x" in words


def test_the_changes_say_what_they_are_worth_and_cpu_figures_say_so_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, _ = run_with(tmp_path / "one", monkeypatch, ok_rows(), UNSTEADY)
    assert "+50.2% ?" in one.stdout and "? too few repeats (1 or 2) to tell a change from noise" in one.stdout
    output = " ".join(one.output.split())  # stdout and stderr as a terminal shows them
    assert output.count(CPU_NOTE) == 1 and output.count("CPU speed was unsteady") == 1
    assert output.index(CPU_NOTE) < output.index("samples/s"), "the caveats come before the table"
    noisy = [
        {**r, "repeat": i, "samples_per_s": r["samples_per_s"] * f}
        for r in ok_rows()
        for i, f in enumerate((0.7, 1, 1.3))
    ]
    three, _ = run_with(tmp_path / "three", monkeypatch, noisy, STEADY)
    table = three.stdout
    assert "+50.2% ~" in table and "~ within the noise" in table and "? too few" not in table
