"""`gpubench report` through the CLI, and the report that `gpubench run` writes at its end."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from harness import gpubench_in_process
from report_fixtures import cpu_rows, cpu_set, gpu_set, scaling_sets
from typer.testing import CliRunner

from bench import api
from bench.cli import report_cmd
from bench.errors import ExitCode
from bench.recipe.scenario import Scenario
from bench.report import content as report_data
from bench.report import markdown as report_md
from bench.report import records
from bench.results import write_results
from bench.run import session
from bench.run.outcome import RunOutcome
from bench.run.plan import RunPlan
from bench.run.request import RunRequest

REPO = Path(__file__).resolve().parents[1]


def make_app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None: ...

    report_cmd.register(app)
    return app


def invoke(*args: str | Path) -> Any:
    return CliRunner().invoke(make_app(), ["report", *map(str, args)], terminal_width=200)


def gpubench(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", "from bench.cli import main; main()", *map(str, args)]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout)


# -- CliRunner -------------------------------------------------------------------------------------
def test_html_goes_to_dir_report_html(tmp_path: Path) -> None:
    directory = gpu_set(tmp_path)
    result = invoke(directory)
    assert result.exit_code == 0, result.output
    path = directory / "report.html"
    assert result.stdout == ""
    size_kb = round(path.stat().st_size / 1024)
    assert result.stderr == f"gpubench: wrote {path} ({size_kb} KB)\n"
    assert "<h1>gpubench report: full on NVIDIA H200</h1>" in path.read_text(encoding="utf-8")


def test_html_output_option(tmp_path: Path) -> None:
    directory, out = cpu_set(tmp_path), tmp_path / "site" / "index.html"
    result = invoke(directory / "results.csv", "-o", out)
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8").count("<svg ") == 3
    assert not (directory / "report.html").exists()


def test_markdown_is_printed(tmp_path: Path) -> None:
    directory = gpu_set(tmp_path)
    result = invoke(directory, "--format", "markdown")
    assert result.exit_code == 0, result.output
    assert result.stdout == report_md.render(report_data.load(directory))
    assert result.stdout.startswith("## gpubench report: full on NVIDIA H200\n")
    assert not (directory / "report.html").exists()


def test_markdown_output_option(tmp_path: Path) -> None:
    directory, out = gpu_set(tmp_path), tmp_path / "summary.md"
    result = invoke(directory, "-f", "markdown", "--output", out)
    assert result.exit_code == 0, result.output
    assert result.stdout == "" and result.stderr == f"gpubench: wrote {out}\n"
    assert out.read_text(encoding="utf-8") == report_md.render(report_data.load(directory))


def test_table_is_the_run_summary(tmp_path: Path) -> None:
    directory = gpu_set(tmp_path)
    result = invoke(directory, "--format", "table")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "full on NVIDIA H200"
    assert "samples/s ± CV" in lines[2] and "peak MB" in lines[2]
    assert next(line for line in lines if "big-batch" in line).split("│")[1:3] == [" big-batch ", " oom     "]
    assert "peak MB source: nvml-process" in lines[-2:]
    assert not (directory / "report.html").exists()


def test_json_and_csv_hold_the_summary_per_scenario(tmp_path: Path) -> None:
    directory = gpu_set(tmp_path)
    data = json.loads(invoke(directory, "--format", "json").stdout)
    assert list(data) == ["schema", "title", "source", "baseline", "env", "notes", "scenarios"]
    assert (data["schema"], data["title"], data["baseline"]) == ("gpubench.report/1", "full on NVIDIA H200", "baseline")
    assert [list(s) for s in data["scenarios"]] == [records.SUMMARY_COLUMNS] * 8
    big = next(s for s in data["scenarios"] if s["scenario"] == "big-batch")
    assert big["status"] == "oom" and big["samples_per_s"] is None
    out = tmp_path / "summary.csv"
    result = invoke(directory, "-f", "csv", "-o", out)
    assert result.stdout == "" and result.stderr == f"gpubench: wrote {out}\n"
    lines = out.read_text().splitlines()
    assert lines[0] == ",".join(records.SUMMARY_COLUMNS) and len(lines) == 9


def test_baseline_option(tmp_path: Path) -> None:
    result = invoke(gpu_set(tmp_path), "-f", "markdown", "--baseline", "fp16")
    assert result.exit_code == 0, result.output
    assert "| fp16 ★ ◆    | ok      |     3/3 |     52.50 |    1.0 |             ref |" in result.stdout
    assert "| baseline    | ok      |     3/3 |     34.00 |    2.9 |           −35.2 |" in result.stdout


def test_help_has_an_example() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    assert "gpubench report results/guide-table/full --format markdown" in result.stdout


# -- the real command: exit codes and one-line errors ----------------------------------------------
def test_missing_directory_is_bad_input(tmp_path: Path) -> None:
    done = gpubench("report", tmp_path / "nope")
    assert done.returncode == ExitCode.BAD_INPUT
    assert done.stderr == f"gpubench: error: {tmp_path / 'nope'}: no such results file\n"


def test_unknown_baseline_is_bad_input(tmp_path: Path) -> None:
    directory = gpu_set(tmp_path)
    done = gpubench("report", directory, "--baseline", "fp61")
    assert done.returncode == ExitCode.BAD_INPUT
    assert done.stderr == (
        f"gpubench: error: {directory / 'results.csv'}: no scenario named 'fp61' "
        "to use as the baseline (did you mean 'fp16'?)\n"
    )
    assert not (directory / "report.html").exists()


def test_unknown_format_is_a_usage_error(tmp_path: Path) -> None:
    result = invoke(cpu_set(tmp_path), "--format", "pdf")
    assert result.exit_code == 2
    words = " ".join(result.stderr.replace("│", " ").split())
    assert (
        "Invalid value for '--format' / '-f': Value error, 'pdf' is not one of 'html', 'table', 'markdown', "
        "'json', 'csv'." in words
    )


def test_the_cli_starts_without_matplotlib() -> None:
    code = "import sys, bench.cli; print('matplotlib' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.stdout == "False\n", done.stderr


# -- gpubench run writes DIR/report.html -----------------------------------------------------------
@pytest.fixture
def fake_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunRequest:
    """api.run with the planning and the workers replaced: the CPU fixture rows, exit code 1."""
    out = tmp_path / "run"
    plan = RunPlan(
        matrix="quick",
        scenarios=(Scenario(name="baseline"),),
        repeats=1,
        device="cpu",
        gpu_uuid=None,
        model="tiny",
        out=out,
        timeout_s=60.0,
    )

    def execute(
        plan: RunPlan,
        gpu_name: str | None,
        reporter: Any = None,
        warn: Any = None,
        deadline: Any = None,
        launcher: Any = None,
    ) -> RunOutcome:
        rows = cpu_rows()
        write_results(plan.results_csv, rows)
        return RunOutcome(rows=rows, exit_code=ExitCode.FAILED, interrupted=False)

    monkeypatch.setattr(session, "prepare", lambda request, scratch: (plan, {}))
    monkeypatch.setattr(session, "execute", execute)
    return RunRequest(matrix="quick", out=out, command=["gpubench", "run"])


def test_run_writes_the_report(fake_run: RunRequest) -> None:
    warnings: list[str] = []
    plan, outcome = api.run(fake_run, warn=warnings.append)
    assert warnings == []
    html = (plan.out / "report.html").read_text(encoding="utf-8")
    assert "<h1>gpubench report: quick on CPU</h1>" in html and "tf32 is a CUDA matmul mode" in html


def test_an_interrupted_run_still_gets_the_report_of_what_ran(
    fake_run: RunRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C after some rows: the session returns them and api.run writes their report (the
    session itself imports no report writer: bench.api hands it in)."""
    from bench.run import session

    measured = session.execute

    def interrupted(*args: Any, **kwargs: Any) -> RunOutcome:
        outcome = measured(*args, **kwargs)
        return RunOutcome(rows=outcome.rows, exit_code=ExitCode.INTERRUPTED, interrupted=True)

    monkeypatch.setattr(session, "execute", interrupted)
    plan, outcome = api.run(fake_run)
    assert outcome.exit_code == ExitCode.INTERRUPTED and len(outcome.rows) == 5
    assert "<h1>gpubench report: quick on CPU</h1>" in (plan.out / "report.html").read_text(encoding="utf-8")
    shutil.rmtree(plan.out)
    plan, outcome = session.run(fake_run)
    assert outcome.rows and not (plan.out / "report.html").exists()  # no writer handed in: no report


def test_a_failing_report_is_only_a_warning(fake_run: RunRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    import bench.report.html

    def broken(*args: Any, **kwargs: Any) -> Path:
        raise RuntimeError("no fonts today")

    monkeypatch.setattr(bench.report.html, "write_report", broken)
    warnings: list[str] = []
    plan, outcome = api.run(fake_run, warn=warnings.append)
    assert warnings == [f"could not write the HTML report in {plan.out}: no fonts today"]
    assert outcome.exit_code == ExitCode.FAILED and len(outcome.rows) == 5
    assert (plan.out / "results.csv").is_file() and not (plan.out / "report.html").exists()


def section_text(html: str, section_id: str) -> str:
    start = html.index(f'<section id="{section_id}">')
    return html[start : html.index("</section>", start)]


# -- several result directories --------------------------------------------------------------------
def test_two_directories_make_one_report_with_scaling_curves(tmp_path: Path) -> None:
    one, two = scaling_sets(tmp_path)
    out = tmp_path / "scaling.html"
    done = gpubench_in_process("report", one, two, "-o", out)
    assert (done.code, done.out) == (0, "")
    assert done.err == f"gpubench: wrote {out} ({round(out.stat().st_size / 1024)} KB)\n"
    assert '<section id="scaling">' in out.read_text(encoding="utf-8")
    assert not (one / "report.html").exists() and not (two / "report.html").exists()


def test_two_directories_pool_their_summary(tmp_path: Path) -> None:
    one, two = scaling_sets(tmp_path)
    done = gpubench_in_process("report", one, two, "--format", "json")
    assert done.code == 0, done.err
    assert [r["scenario"] for r in json.loads(done.out)["scenarios"]] == [
        "single",
        "one-gpu/fsdp",
        "ddp",
        "two-gpus/fsdp",
    ]


def test_two_directories_need_an_output_for_html(tmp_path: Path) -> None:
    one, two = scaling_sets(tmp_path)
    done = gpubench_in_process("report", one, two)
    assert done.code == ExitCode.BAD_INPUT
    assert done.err == (
        "gpubench: error: 2 result directories pooled into one HTML report: say where it goes with "
        "--output FILE (only a single DIR gets DIR/report.html)\n"
    )
    assert not (one / "report.html").exists()


def test_a_directory_given_twice_is_bad_input(tmp_path: Path) -> None:
    one, _ = scaling_sets(tmp_path)
    done = gpubench_in_process("report", one, one / "results.csv", "-o", tmp_path / "x.html")
    assert done.code == ExitCode.BAD_INPUT
    assert done.err == (
        f"gpubench: error: {one / 'results.csv'}: given twice (as {one} too); give each result directory once\n"
    )
    assert not (tmp_path / "x.html").exists()


def test_a_missing_second_directory_is_bad_input(tmp_path: Path) -> None:
    one, _ = scaling_sets(tmp_path)
    done = gpubench_in_process("report", one, tmp_path / "nope", "-o", tmp_path / "x.html")
    assert done.code == ExitCode.BAD_INPUT
    assert done.err == f"gpubench: error: {tmp_path / 'nope'}: no such results file\n"
