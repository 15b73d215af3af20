"""`gpubench history ...` and `gpubench run --record` as users meet them: output, formats, the
--db option and GPUBENCH_DB, exit codes and one-line errors."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
import typer
from harness import gpubench_in_process
from history_support import BACKENDS, env, nights, reps, store_target, write_run
from typer.testing import CliRunner

from bench.cli import history_cmd
from bench.errors import BadInput
from bench.history import library
from bench.history.check import CHECK_COLUMNS
from bench.history.show import POINT_COLUMNS, RUN_COLUMNS

REPO = Path(__file__).resolve().parents[1]
STEADY = {"bf16": [100.0, 100.5, 99.5], "fp16": [200.0, 201.0, 199.0]}
SLOWER = {"bf16": [80.0, 80.5, 79.5], "fp16": [200.0, 201.0, 199.0]}


def cli(*args: str | Path, env_vars: dict[str, str] | None = None) -> tuple[int, str]:
    app = typer.Typer()
    history_cmd.register(app)
    app.command("noop")(lambda: None)  # two commands, so that "history" stays a sub-command
    result = CliRunner().invoke(app, ["history", *map(str, args)], env=env_vars or {"GPUBENCH_DB": ""})
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def gpubench(*args: str | Path, cwd: Path = REPO, **extra_env: str) -> subprocess.CompletedProcess[str]:
    """`gpubench ARGS` as a user's shell runs it, in `cwd`, without GPUBENCH_DB: bench.cli.main, the
    console script's function, in this process (a new interpreter costs ~1.5 s of CPU)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("GPUBENCH_DB", raising=False)
        for name, value in {"COLUMNS": "200", **extra_env}.items():
            patch.setenv(name, value)
        patch.chdir(cwd)
        done = gpubench_in_process(*args)
    return subprocess.CompletedProcess(list(args), done.code, done.out, done.err)


@pytest.fixture(params=BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_target(request.param, tmp_path, request)


@pytest.fixture(scope="module")
def regressed_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite store of 8 nights: bf16 20% slower in the last two (importing them: ~1.5 s of CPU)."""
    tmp = tmp_path_factory.mktemp("regressed")
    library.import_dirs(str(tmp / "history.sqlite"), nights(tmp / "nights", [STEADY] * 6 + [SLOWER] * 2))
    return tmp / "history.sqlite"


@pytest.fixture
def regressed(regressed_once: Path, tmp_path: Path) -> str:
    """A copy of that store of its own (a test may accept a step in it), in the test's folder."""
    target = tmp_path / "history.sqlite"
    with (
        contextlib.closing(sqlite3.connect(regressed_once)) as source,
        contextlib.closing(sqlite3.connect(target)) as copy,
    ):
        source.backup(copy)  # through the WAL journal: what a reader of the store sees
    return str(target)


# -- import and list -------------------------------------------------------------------------------
def test_import_twice_stores_once_and_says_so(db: str, tmp_path: Path) -> None:
    directory = write_run(tmp_path / "run", reps("baseline", [100.0]), env(1))
    assert cli("import", directory, "--db", db) == (0, f"run 1: stored {directory} (1 scenarios)\n")
    assert cli("import", directory, "--db", db) == (0, f"run 1: already stored {directory} (1 scenarios)\n")


def test_list_shows_date_commit_gpu_versions_and_status(regressed: str) -> None:
    code, out = cli("list", "--db", regressed, "--limit", "3")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].strip() == f"3 runs in {regressed}"
    assert "run" in lines[2] and "commit" in lines[2] and "torch" in lines[2] and "status" in lines[2]
    assert lines[4].split("│")[1:4] == ["   8 ", " 2026-11-08 02:00 ", " 0123456789 "]
    assert "NVIDIA H200" in lines[4] and "2.11.0" in lines[4] and "580.65" in lines[4]


def test_list_as_json_has_fixed_keys(regressed: str) -> None:
    code, out = cli("list", "--db", regressed, "--format", "json", "--limit", "0")
    runs = json.loads(out)
    assert code == 0 and len(runs) == 8
    assert list(runs[0]) == RUN_COLUMNS
    assert (runs[0]["id"], runs[0]["created_at"], runs[0]["status"]) == (8, "2026-11-08 02:00", "ok")


def test_the_store_comes_from_gpubench_db_when_no_option_is_given(regressed: str) -> None:
    code, out = cli("list", "--format", "csv", env_vars={"GPUBENCH_DB": regressed})
    assert code == 0 and out.splitlines()[0] == ",".join(RUN_COLUMNS) and len(out.splitlines()) == 9


def test_the_default_store_is_results_history_sqlite(tmp_path: Path) -> None:
    missing = gpubench("history", "list", cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.startswith("gpubench: error: results/history.sqlite: no history database here")
    directory = write_run(tmp_path / "run", reps("baseline", [100.0]), env(1))
    stored = gpubench("history", "import", directory, cwd=tmp_path)
    assert stored.returncode == 0, stored.stderr
    assert (tmp_path / "results" / "history.sqlite").is_file()


# -- show ------------------------------------------------------------------------------------------
def test_show_prints_the_series_with_a_sparkline_and_flags(regressed: str) -> None:
    code, out = cli("show", "--db", regressed, "--scenario", "bf16", "--metric", "samples_per_s")
    assert code == 0
    assert "bf16: samples_per_s on NVIDIA H200 (bert-large)" in out
    spark, markers, legend = [line for line in out.splitlines() if line.startswith("  ")][-3:]
    assert spark.strip().startswith("▇▇▇▇▇▇▁▁") or spark.strip().startswith("██████▁▁")
    assert markers == "  " + " " * 6 + "!!"
    assert legend.strip().startswith("! flagged")
    assert out.count("│ beyond ") == 2 and out.count("│ within ") == 5


def test_show_marks_an_accepted_step(regressed: str) -> None:
    assert (
        cli("accept", "--db", regressed, "--scenario", "bf16", "--run", "7", "--note", "slower kernel on purpose")[0]
        == 0
    )
    code, out = cli("show", "--db", regressed, "-s", "bf16", "--format", "json")
    points = json.loads(out)
    assert code == 0 and list(points[0]) == POINT_COLUMNS
    assert [p["flag"] for p in points][-3:] == ["within", "accepted", "within"]
    assert points[-2]["note"] == "accepted: slower kernel on purpose"
    _, table = cli("show", "--db", regressed, "-s", "bf16")
    assert [line for line in table.splitlines() if line.startswith("  ")][-2] == "  " + " " * 6 + "| "


def test_show_writes_an_svg_chart(regressed: str, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    chart = tmp_path / "bf16.svg"
    code, out = cli("show", "--db", regressed, "-s", "bf16", "--svg", chart)
    assert code == 0 and "bf16: samples_per_s on NVIDIA H200" in out  # the table too
    svg = chart.read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "bf16: samples_per_s" in svg


def test_show_output_writes_the_document_and_refuses_an_svg_name(regressed: str, tmp_path: Path) -> None:
    """-o/--output means what it means everywhere: the document (here the table, or --format), not
    the chart; an old `-o x.svg` (the chart, before --svg) is one line and exit 2, nothing written."""
    table, points = tmp_path / "bf16.txt", tmp_path / "bf16.csv"
    assert cli("show", "--db", regressed, "-s", "bf16", "-o", table)[0] == 0
    assert cli("show", "--db", regressed, "-s", "bf16", "-f", "csv", "--output", points)[0] == 0
    assert "bf16: samples_per_s on NVIDIA H200" in table.read_text()
    assert points.read_text().splitlines()[0] == ",".join(POINT_COLUMNS)
    with pytest.raises(BadInput) as refused:
        cli("show", "--db", regressed, "-s", "bf16", "-o", tmp_path / "old.svg")
    assert refused.value.exit_code == 2 and "\n" not in str(refused.value)
    assert f"draw the chart with --svg {tmp_path / 'old.svg'}" in str(refused.value)
    assert not (tmp_path / "old.svg").exists()


def test_metric_has_no_short_flag_in_show(regressed: str) -> None:
    """-m is --matrix in run, list and predict; in history show it means nothing."""
    app = typer.Typer()
    history_cmd.register(app)
    app.command("noop")(lambda: None)
    result = CliRunner().invoke(app, ["history", "show", "--db", regressed, "-s", "bf16", "-m", "peak_mem_mb"])
    assert result.exit_code == 2 and "No such option: -m" in result.output


def test_show_names_an_unknown_scenario(regressed: str) -> None:
    done = gpubench("history", "show", "--db", regressed, "--scenario", "bf61")
    assert done.returncode == 2
    assert done.stderr == f"gpubench: error: scenario 'bf61' is not in {regressed} (did you mean 'bf16'?)\n"


# -- check -----------------------------------------------------------------------------------------
def test_check_fails_on_two_slow_nights_with_exit_1(regressed: str) -> None:
    done = gpubench("history", "check", "--db", regressed)
    assert done.returncode == 1, done.stderr
    assert "FAIL (exit 1): run 8 of 2026-11-08 02:00 on NVIDIA H200: REGRESSION 3, unchanged 5" in done.stdout
    row = next(line for line in done.stdout.splitlines() if "regression" in line)
    assert "bf16" in row and "samples/s" in row and "-20.0%" in row and "2/2" in row


def test_check_passes_after_one_slow_night_unless_consecutive_is_1(tmp_path: Path) -> None:
    target = str(tmp_path / "history.sqlite")
    library.import_dirs(target, nights(tmp_path / "nights", [STEADY] * 6 + [SLOWER]))
    code, out = cli("check", "--db", target, "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["gate"] == "pass" and data["counts"]["watch"] == 3  # samples/s, step time, energy
    assert cli("check", "--db", target, "--consecutive", "1")[0] == 1


def test_check_json_has_fixed_keys(regressed: str) -> None:
    code, out = cli("check", "--db", regressed, "--format", "json")
    data = json.loads(out)
    assert code == 1
    assert list(data) == ["schema", "gate", "exit_code", "run", "params", "method", "counts", "notes", "rows"]
    assert data["schema"] == "gpubench.history.check/1"
    assert data["params"] == {
        "window": 7,
        "consecutive": 2,
        "speed_pct": 5.0,
        "memory_pct": 2.0,
        "alpha": 0.05,
        "drift_nights": 10,
        "noise_factor": 3.0,
    }
    assert all(list(row) == CHECK_COLUMNS for row in data["rows"])
    assert data["run"]["id"] == 8 and "env_json" not in data["run"]


def test_check_markdown_for_a_job_summary(regressed: str) -> None:
    code, out = cli("check", "--db", regressed, "--format", "markdown")
    assert code == 1
    assert out.startswith("## gpubench history check: FAIL (exit 1): run 8")
    assert "| " + " | ".join(CHECK_COLUMNS) + " |" in out


def test_accepting_the_step_makes_the_check_pass(regressed: str) -> None:
    code, out = cli("accept", "--db", regressed, "--run", "7", "-s", "bf16", "--note", "torch 2.12 upgrade")
    assert (code, out) == (0, "accepted: bf16 (all metrics) from run 7 on: torch 2.12 upgrade\n")
    assert cli("check", "--db", regressed)[0] == 0


def test_accept_names_an_unknown_scenario(regressed: str) -> None:
    done = gpubench("history", "accept", "--db", regressed, "-s", "bf17", "--note", "x")
    assert done.returncode == 2
    assert done.stderr == "gpubench: error: scenario 'bf17' is not in run 8 (did you mean 'bf16'?)\n"


def test_check_on_a_new_gpu_with_other_gpus_in_the_store_is_incomparable(tmp_path: Path) -> None:
    target = str(tmp_path / "history.sqlite")
    library.import_dirs(target, nights(tmp_path / "h200", [STEADY] * 2))
    library.import_dirs(target, [write_run(tmp_path / "a100", reps("bf16", [50.0]), env(5, gpu="NVIDIA A100"))])
    done = gpubench("history", "check", "--db", target)
    assert done.returncode == 3
    assert done.stderr.startswith("gpubench: error: run 3 (NVIDIA A100) has no history")
    assert len(done.stderr.splitlines()) == 1


@pytest.mark.parametrize("content", [b"garbage " * 100, b"SQLite format 3\x00" + b"\x00" * 200])
def test_check_on_a_corrupt_store_is_one_line_and_exit_2(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "history.sqlite"
    path.write_bytes(content)
    done = gpubench("history", "check", "--db", path)
    assert done.returncode == 2
    assert done.stderr.startswith(f"gpubench: error: history database {path}: ")
    assert len(done.stderr.splitlines()) == 1 and path.read_bytes() == content


def test_an_unreachable_postgresql_url_is_exit_2_without_the_password(tmp_path: Path) -> None:
    done = gpubench("history", "list", "--db", "postgresql://bench:hunter2@127.0.0.1:1/history")
    assert done.returncode == 2
    assert done.stderr.startswith(
        "gpubench: error: history database postgresql+psycopg://bench:***@127.0.0.1:1/history"
    )
    assert "hunter2" not in done.stderr


def test_every_history_command_has_help_with_an_example() -> None:
    for command in ("list", "show", "check", "import", "accept"):
        code, out = cli(command, "--help")
        assert code == 0 and "Example" in out, command


# -- gpubench run --record -------------------------------------------------------------------------
def test_record_after_run_only_warns_when_the_store_fails(tmp_path: Path) -> None:
    directory = write_run(tmp_path / "run", reps("baseline", [100.0]), env(1))
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"garbage " * 100)
    warnings: list[str] = []
    infos: list[str] = []
    stored = library.record_after_run(
        str(corrupt), directory, unfinished=False, warn=warnings.append, info=infos.append
    )
    assert stored is None and infos == []
    assert warnings == [
        f"the run was not recorded in the history (history database {corrupt}: file is not a database); its "
        f"results are in {directory}: add them later with `gpubench history import {directory}`"
    ]
    warnings.clear()
    assert (
        library.record_after_run(
            str(tmp_path / "h.sqlite"), directory, unfinished=True, warn=warnings.append, info=infos.append
        )
        is None
    )
    assert "did not finish" in warnings[0] and not (tmp_path / "h.sqlite").exists()
    stored = library.record_after_run(
        str(tmp_path / "h.sqlite"), directory, unfinished=False, warn=warnings.append, info=infos.append
    )
    assert stored is not None and infos == [f"history: recorded run 1 in {tmp_path / 'h.sqlite'}"]
