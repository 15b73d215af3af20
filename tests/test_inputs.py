"""No input loses data (issue 21): every number is checked for finiteness, sign and range; an empty
string is an error, not "all" or "here"; a damaged results.csv stops --resume, compare and history
import at its line; a run never writes into another run's folder and locks its own; a full disk is
one line and exit 2 with what was saved kept; user text is escaped; bad URLs and undecodable files
are one line. In process: `gpubench` is bench.cli.main, and no test here starts a real run."""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import math
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import Done, leftover_temp_files, write_matrix, write_run
from harness import gpubench_in_process as gpubench
from history_support import env as history_env
from history_support import reps as history_reps
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from bench import fsio
from bench.cli import run_cmd
from bench.errors import BadInput
from bench.planner.matrix import expand, load_matrix
from bench.recipe.scenario import SETTING_KEYS, Scenario
from bench.report.table import summary_table
from bench.results import (
    NUMERIC_COLUMNS,
    STATUSES,
    read_results,
    summarize,
    to_frame,
    write_plan,
    write_results,
)
from bench.run import envinfo, plan, runner, session
from bench.run.outcome import RunOutcome
from bench.run.plan import RunPlan

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
WEEK_S = 7 * 24 * 3600


# -- gpubench in this process ------------------------------------------------------------------------
def assert_one_line(done: Done, *parts: str) -> str:
    """Exit 2 and a single `gpubench: error:` line holding every part, nothing on stdout."""
    assert done.code == 2, done.err
    assert len(done.lines) == 1 and done.lines[0].startswith("gpubench: error: "), done.err
    assert "Traceback" not in done.err and done.out == ""
    for part in parts:
        assert part in done.lines[0], done.lines[0]
    return done.lines[0]


@pytest.fixture(autouse=True)
def no_real_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that got past its checks would ask a child what torch sees: here that is a failure."""

    def probe(scratch: Path | None = None) -> dict[str, Any]:
        raise AssertionError("the run went past its checks")

    monkeypatch.setattr(plan, "probe", lambda device, scratch: probe(scratch))
    monkeypatch.setattr(run_cmd, "_sigterm_as_interrupt", lambda: None)  # leave this process's SIGTERM be
    monkeypatch.setattr(envinfo.cpuspeed, "probe", lambda only=None: {"passes": 8, "p90_over_p10": 1.1})


@pytest.fixture
def matrix(tmp_path: Path) -> Path:
    return write_matrix(tmp_path / "m.toml", {"baseline": {}, "fp16": {"precision": "fp16"}})


# -- 1. numbers: finite, signed right, in range --------------------------------------------------------
NUMBER_TEXT = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.sampled_from(["1e309", "-1e309", "NaN", "-nan", "+inf", "Infinity", "0", "-0", "0.0001", "1e-320"]),
    st.text(max_size=6),
)


def as_number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


@pytest.mark.parametrize(
    ("flag", "low", "high", "whole"),
    [("--timeout", 0, WEEK_S, False), ("--time-limit", 0, WEEK_S, False), ("--repeats", 1, 1000, True)],
)
@FUZZ
@given(text=NUMBER_TEXT)
def test_run_number_options_are_checked_before_anything(
    flag: str, low: float, high: float, whole: bool, text: str
) -> None:
    done = gpubench("run", "--matrix", "nosuch", flag, text)
    line = assert_one_line(done)
    number = as_number(text)
    valid = (
        number is not None and math.isfinite(number) and (number >= low if whole else number > low) and number <= high
    )
    valid = valid and (not whole or float(number).is_integer())  # type: ignore[arg-type]
    accepted = "unknown matrix 'nosuch'" in line  # the next check: the number passed
    if accepted:
        assert valid, line
    else:
        assert flag in line, line
    canonical = text in (repr(number), str(int(number)) if number is not None and math.isfinite(number) else None)
    if canonical and valid and text.strip() == text:
        assert accepted, line


@pytest.fixture(scope="module")
def twin_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("twins")
    rows = history_reps("baseline", [100.0, 101.0, 99.0])
    return write_run(folder / "a", rows, history_env(1)), write_run(folder / "b", rows, history_env(2))


@pytest.mark.parametrize("flag", ["--threshold", "--memory-threshold"])
@settings(FUZZ, max_examples=20)  # each accepted value runs a whole compare
@given(text=NUMBER_TEXT)
def test_compare_thresholds_are_finite_and_bounded(twin_runs: tuple[Path, Path], flag: str, text: str) -> None:
    done = gpubench("compare", *twin_runs, flag, text)
    number = as_number(text)
    if done.code == 0:  # accepted: then it was a real threshold
        assert number is not None and 0 <= number <= 1000, text
    else:
        assert_one_line(done)
    if text == repr(number) and number is not None and math.isfinite(number) and 0 <= number <= 1000:
        assert done.code == 0, done.err


TOML_VALUE = st.recursive(
    st.one_of(
        st.booleans(),
        st.integers(min_value=-(2**80), max_value=2**80),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=8),
        st.datetimes(),
        st.dates(),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=4,
)
WHOLE_LIMITS = {  # far beyond any benchmark: a larger value is a typo (or a seed numpy refuses)
    "batch_size": (1, 65_536),
    "grad_accum_steps": (1, 65_536),
    "samples": (1, 10_000_000),
    "seq_len": (1, 2**20),
    "dataloader_workers": (0, 1024),
    "warmup_steps": (0, 10_000_000),
    "seed": (0, 2**32 - 1),
}


def sane(sc: Scenario) -> bool:
    for key, (low, high) in WHOLE_LIMITS.items():
        value = getattr(sc, key)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            return False
    window = sc.window
    if not (window in ("epoch", "auto") or (type(window) is int and sc.warmup_steps + window <= sc.optimizer_steps)):
        return False
    timeout = sc.timeout_s
    if timeout is not None and (isinstance(timeout, bool) or not math.isfinite(timeout) or not 0 < timeout <= WEEK_S):
        return False
    return all(isinstance(getattr(sc, k), str) for k in ("name", "description", "model", "engine", "precision"))


@FUZZ
@given(
    key=st.sampled_from([k for k in SETTING_KEYS if k != "name"] + ["fp16", "bf16"]),
    value=TOML_VALUE,
    where=st.sampled_from(["base", "scenario", "description"]),
)
def test_any_toml_value_of_any_key_is_a_sane_scenario_or_bad_input(key: str, value: Any, where: str) -> None:
    data: dict[str, Any] = {"base": {"model": "tiny", "samples": 16, "seq_len": 32, "warmup_steps": 1}}
    if where == "description":
        data["matrix"] = {"description": value}
        data["scenarios"] = {"a": {}}
    elif where == "base":
        data["base"][key] = value
        data["scenarios"] = {"a": {}}
    else:
        data["scenarios"] = {"a": {key: value}}
    try:
        loaded = expand(data, origin="m.toml")
    except BadInput as exc:
        assert str(exc).startswith("m.toml: ") and "\n" not in str(exc)
        return
    assert isinstance(loaded.description, str)
    assert all(sane(sc) for sc in loaded.scenarios), loaded.scenarios


# -- 2. an empty string is an error, never "everything" or "here" ----------------------------------------
@pytest.mark.parametrize(
    ("args", "part"),
    [
        (["run", "--matrix", ""], "--matrix is empty"),
        (["list", "--matrix", ""], "--matrix is empty"),
        (["run", "--matrix", "{m}", "--only", ""], "--only '' holds an empty scenario name"),
        (["run", "--matrix", "{m}", "--only", "baseline,,fp16"], "--only 'baseline,,fp16' holds an empty"),
        (["run", "--matrix", "{m}", "--out", ""], "'--out': is empty"),
        (["run", "--resume", ""], "'--resume': is empty"),
        (["compare", "", "{m}"], "'base': is empty"),
        (["report", ""], "'DIR...': is empty"),
        (["history", "list", "--db", ""], "--db is empty"),
        (["history", "import", ""], "'dirs': is empty"),
    ],
)
def test_an_empty_string_is_an_error(
    tmp_path: Path, matrix: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], part: str
) -> None:
    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    assert_one_line(gpubench(*[a.replace("{m}", str(matrix)) for a in args]), part)
    assert list(here.iterdir()) == []  # nothing written "here"


# -- 3. a damaged results.csv: BadInput naming the file and the line -------------------------------------
def good_rows() -> list[dict[str, Any]]:
    ok = {"status": "ok", "error": "", "peak_mem_mb": 500.0, "step_time_median_ms": 40.0, "final_loss": 0.5}
    tail = 'Traceback (most recent call last):\n  File "x.py", line 1\nRuntimeError: a, "b"\n'
    return [
        {"scenario": "a", "repeat": 0, **ok, "samples_per_s": 100.5, "pred_peak_error_pct": -0.5, "exit_code": 0},
        {"scenario": "a", "repeat": 1, **ok, "samples_per_s": 99.5},
        {"scenario": "b", "repeat": 0, "status": "crashed", "error": "killed", "stderr_tail": tail, "exit_code": -9},
        {"scenario": "c", "repeat": 0, "status": "diverged", "samples_per_s": 50.0, "final_loss": math.nan},
    ]


def records(tmp_path: Path) -> list[list[str]]:
    path = tmp_path / "valid.csv"
    write_results(path, good_rows())
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def serialize(rows: list[list[str]], cut: tuple[int, int] | None = None) -> tuple[str, list[int]]:
    """The CSV text of `rows` (cut: row i after k cells, the end of the file) and each row's first line."""
    buffer, starts = io.StringIO(), []
    writer = csv.writer(buffer, lineterminator="\n")
    for i, row in enumerate(rows):
        starts.append(buffer.getvalue().count("\n") + 1)
        if cut is not None and i == cut[0]:
            writer.writerow(row[: cut[1]])
            return buffer.getvalue().rstrip("\n"), starts
        writer.writerow(row)
    return buffer.getvalue(), starts


BAD_CELLS = {  # column -> cells no gpubench run writes there
    "repeat": ["-1", "1.5", "x", "", "1e309", "nan"],
    "status": ["great", "", "OK"],
    "scenario": [""],
    "samples_per_s": ["nan", "", "inf", "-inf", "1e309", "-3", "0", "fast"],  # in an ok row
    "peak_mem_mb": ["inf", "1e309", "-1", "lots"],
    "step_time_median_ms": ["-inf", "-0.5", "x"],
    "exit_code": ["inf", "abc"],
}


def invariants_hold(frame: Any) -> None:
    assert set(frame["status"]) <= set(STATUSES)
    assert all(isinstance(r, int) and r >= 0 for r in frame["repeat"].tolist())
    assert not frame.duplicated(subset=["scenario", "repeat"]).any()
    ok = frame[frame["status"] == "ok"]
    assert all(math.isfinite(v) and v > 0 for v in ok["samples_per_s"])
    for column in [c for c in NUMERIC_COLUMNS if c in frame.columns and c != "final_loss"]:
        assert all(not math.isinf(float(v)) for v in frame[column] if v is not None)


@FUZZ
@given(data=st.data())
def test_a_damaged_results_csv_reads_right_or_names_its_line(tmp_path: Path, data: st.DataObject) -> None:
    rows = records(tmp_path)
    header, body = rows[0], rows[1:]
    kind = data.draw(st.sampled_from(["cut", "cell", "duplicate", "byte"]))
    path = tmp_path / "results.csv"
    expected_line = None
    if kind == "cut":
        i = data.draw(st.integers(0, len(body) - 1))
        text, starts = serialize(rows, (i + 1, data.draw(st.integers(1, len(header) - 1))))
        expected_line = starts[i + 1]
    elif kind == "cell":
        column = data.draw(st.sampled_from(sorted(BAD_CELLS)))
        ok_rows = [i for i, r in enumerate(body) if r[header.index("status")] == "ok"]
        i = data.draw(st.sampled_from(ok_rows if column == "samples_per_s" else range(len(body))))
        body[i][header.index(column)] = data.draw(st.sampled_from(BAD_CELLS[column]))
        text, starts = serialize(rows)
        expected_line = starts[i + 1]
    elif kind == "duplicate":
        i = data.draw(st.integers(0, len(body) - 1))
        text, starts = serialize([*rows, body[i]])
        expected_line = starts[-1]
    else:
        text, _ = serialize(rows)
        raw = bytearray(text.encode())
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
        path.write_bytes(bytes(raw))
    if kind != "byte":
        path.write_text(text, encoding="utf-8")
    try:
        frame = read_results(path)
    except BadInput as exc:
        message = str(exc)
        assert message.startswith(f"{path}: ") and "\n" not in message
        if expected_line is not None:
            assert message.startswith(f"{path}: line {expected_line}: "), message
        return
    assert expected_line is None, f"{kind}: read without an error"
    invariants_hold(frame)


def test_resume_compare_and_history_import_refuse_a_cut_off_results_csv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = history_reps("baseline", [100.0, 101.0, 99.0])
    good = write_run(tmp_path / "good", rows, history_env(1))
    cut = write_run(tmp_path / "cut", rows, history_env(2))
    text = (cut / "results.csv").read_text()
    (cut / "results.csv").write_text(text[: text.rindex("\n", 0, len(text) - 1) + 20])  # the last row: 20 characters
    where = f"{cut / 'results.csv'}: line 4: the row is cut off"
    assert_one_line(gpubench("compare", good, cut), where)
    assert_one_line(gpubench("history", "import", "--db", tmp_path / "h.db", cut), where)
    assert not (tmp_path / "h.db").exists()
    resumed = RunPlan("m", (Scenario(name="baseline"),), 3, "cpu", None, "tiny", cut, 60.0, resume=True)
    monkeypatch.setattr(session, "prepare", lambda request, scratch: (resumed, {}))
    monkeypatch.setattr(runner, "run_one", lambda *a: pytest.fail("ran a worker on a damaged results.csv"))
    assert_one_line(gpubench("run", "--resume", cut), where)


def test_a_run_saves_a_worker_figure_it_cannot_read_back_as_an_error(tmp_path: Path) -> None:
    plan_ = RunPlan("m", (Scenario(name="a"), Scenario(name="b")), 1, "cpu", None, "tiny", tmp_path, 60.0)
    figures = {"a": {"samples_per_s": math.inf, "peak_mem_mb": 5.0}, "b": {"samples_per_s": 9.0, "mfu": -1.0}}

    def run_one(plan: RunPlan, sc: Scenario, repeat: int, *args: Any) -> dict[str, Any]:
        return {"scenario": sc.name, "repeat": repeat, "status": "ok", "error": "", **figures[sc.name]}

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner, "run_one", run_one)
        runner.execute(plan_, None)
    frame = read_results(tmp_path).set_index("scenario")
    assert frame.loc["a", "status"] == "error" and "samples_per_s = inf" in frame.loc["a", "error"]
    assert frame.loc["b", "status"] == "ok" and math.isnan(frame.loc["b", "mfu"])  # a negative MFU is no figure


# -- 4. another run's folder; the lock --------------------------------------------------------------------
@pytest.mark.parametrize("entries", [["scenarios.json", "env.json"], ["logs"]])
def test_a_new_run_refuses_a_folder_holding_an_unfinished_run(tmp_path: Path, matrix: Path, entries: list[str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    for name in entries:
        if name.endswith(".json"):
            (out / name).write_text("{}")
        else:
            (out / name).mkdir()
    before = sorted(p.name for p in out.iterdir())
    assert_one_line(gpubench("run", "--matrix", matrix, "--out", out), f"--out {out} already holds another run's files")
    assert sorted(p.name for p in out.iterdir()) == before


@contextlib.contextmanager
def lock_held_elsewhere(folder: Path) -> Iterator[int]:
    """Another process holds flock on folder/.gpubench.lock, as a running gpubench does."""
    code = (
        "import fcntl, os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "os.write(fd, f'{os.getpid()}\\n'.encode())\n"
        "print('held', flush=True)\n"
        "time.sleep(120)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, str(folder / ".gpubench.lock")], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait(timeout=30)


def test_a_folder_another_run_is_writing_is_refused_at_once(tmp_path: Path, matrix: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with lock_held_elsewhere(out) as pid:
        busy = f"{out}: another gpubench run (pid {pid}) is writing this result directory"
        assert_one_line(gpubench("run", "--matrix", matrix, "--out", out), busy)
        write_plan(
            out, RunPlan("m", (Scenario(name="baseline"),), 1, "cpu", None, "tiny", out, 60.0).to_json(), {}, False
        )
        assert_one_line(gpubench("run", "--resume", out), busy)


def test_a_run_holds_the_lock_on_its_folder_while_it_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fcntl

    out = tmp_path / "out"
    the_plan = RunPlan("m", (Scenario(name="baseline"),), 1, "cpu", None, "tiny", out, 60.0)
    seen: list[str] = []

    def execute(plan: RunPlan, *args: Any, **kwargs: Any) -> RunOutcome:
        fd = os.open(out / ".gpubench.lock", os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            seen.append("free")
        except BlockingIOError:
            seen.append("held")
        finally:
            os.close(fd)
        return RunOutcome(rows=[], exit_code=0, interrupted=False)  # type: ignore[arg-type]

    monkeypatch.setattr(session, "prepare", lambda request, scratch: (the_plan, {}))
    monkeypatch.setattr(session, "execute", execute)
    assert gpubench("run", "--out", out).code == 0
    assert seen == ["held"]
    fd = os.open(out / ".gpubench.lock", os.O_RDONLY)  # and released at its end
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(fd)


# -- 5. a full disk: one line, exit 2, what was saved stays ------------------------------------------------
@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """os.fsync in bench.fsio's atomic write fails with ENOSPC for the names listed (the temporary
    file is named after its target), from the n-th write of that name on (the list's first item)."""
    failing: list[str] = []
    real = os.fsync
    counts: dict[str, int] = {}

    def fsync(fd: int) -> None:
        name = os.readlink(f"/proc/self/fd/{fd}").rsplit("/", 1)[-1]
        for target in failing[1:]:
            if name.startswith(f".{target}."):
                counts[target] = counts.get(target, 0) + 1
                if counts[target] >= int(failing[0]):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd)

    monkeypatch.setattr(fsio.os, "fsync", fsync)
    return failing


def test_a_full_disk_mid_run_ends_with_exit_2_and_keeps_the_rows_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, full_disk: list[str]
) -> None:
    out = tmp_path / "out"
    scenarios = tuple(Scenario(name=n) for n in ("a", "b", "c"))
    monkeypatch.setattr(
        session, "prepare", lambda request, scratch: (RunPlan("m", scenarios, 1, "cpu", None, "tiny", out, 60.0), {})
    )

    def run_one(plan: RunPlan, sc: Scenario, repeat: int, *args: Any) -> dict[str, Any]:
        return {"scenario": sc.name, "repeat": repeat, "status": "ok", "samples_per_s": 10.0, "peak_mem_mb": 1.0}

    monkeypatch.setattr(runner, "run_one", run_one)
    full_disk += ["2", "results.csv"]  # the second save of results.csv meets a full disk
    done = gpubench("run", "--out", out)
    assert done.code == 2 and "Traceback" not in done.err
    errors = [line for line in done.lines if line.startswith("gpubench:")]  # after the rows' progress lines
    expected = (
        f"gpubench: error: cannot write {out / 'results.csv'}: No space left on device (results.csv keeps every "
        f"row saved before; make room, then finish the run with `gpubench run --resume {out}`)"
    )
    assert errors == [done.lines[-1]] == [expected]
    assert list(read_results(out)["scenario"]) == ["a"]  # resumable: a is kept, b and c run again
    assert leftover_temp_files(out) == []


@pytest.mark.parametrize(
    "command", [["compare", "{a}", "{b}", "-f", "markdown", "-o", "{o}"], ["report", "{a}", "-o", "{o}"]]
)
def test_an_output_that_cannot_be_written_is_exit_2_not_a_regression(
    tmp_path: Path, twin_runs: tuple[Path, Path], full_disk: list[str], command: list[str]
) -> None:
    target = tmp_path / "summary.out"
    full_disk += ["1", "summary.out"]
    args = [c.format(a=twin_runs[0], b=twin_runs[1], o=target) for c in command]
    assert_one_line(gpubench(*args), f"cannot write {target}: No space left on device")
    assert not target.exists() and leftover_temp_files(tmp_path) == []


# -- 6. user text escaped: markdown, rich markup, CSV cells ---------------------------------------------
def test_results_csv_cells_never_start_a_formula_and_still_round_trip(tmp_path: Path) -> None:
    risky = {"error": '=HYPERLINK("http://x")', "description": "@SUM(A1)", "stderr_tail": "+cmd|' /C calc'!A0"}
    rows = [{**good_rows()[0], "scenario": "-x", **risky}, {**good_rows()[1], "error": "'=quoted already"}]
    path = tmp_path / "results.csv"
    write_results(path, rows)
    with open(path, newline="", encoding="utf-8") as fh:
        table = list(csv.reader(fh))
    for row in table[1:]:
        for column, cell in zip(table[0], row, strict=True):
            if cell.startswith(("=", "+", "-", "@")):
                assert column in NUMERIC_COLUMNS and as_number(cell) is not None, (column, cell)
    frame = read_results(path)
    assert frame["scenario"].tolist() == ["-x", "a"]
    assert [frame[k][0] for k in risky] == list(risky.values()) and frame["error"][1] == "'=quoted already"
    assert frame["pred_peak_error_pct"][0] == -0.5  # a negative number stays a number


def test_compare_exports_and_markdown_escape_user_text(tmp_path: Path) -> None:
    rows = history_reps("=cmd()", [100.0, 101.0, 99.0])
    gpu = {**history_env(1)["gpu"], "name": "H200 | x\r\n## injected"}
    base = write_run(tmp_path / "base", rows, {**history_env(1), "gpu": gpu})  # a newline in a path: exit 2
    slower = [{**r, "samples_per_s": r["samples_per_s"] * 0.5} for r in rows]
    new = write_run(tmp_path / "new", slower, {**history_env(2), "gpu": gpu})
    table = list(csv.reader(io.StringIO(gpubench("compare", base, new, "-f", "csv").out)))
    assert {r[0] for r in table[1:]} == {"'=cmd()"}
    assert any(as_number(r[4]) is not None and float(r[4]) < 0 for r in table[1:])  # change_pct: still a number
    text = gpubench("compare", base, new, "-f", "markdown").out
    assert "\r" not in text and "\n## injected" not in text and "H200 \\| x" in text


def test_a_carriage_return_in_a_text_cell_keeps_results_csv_readable(tmp_path: Path) -> None:
    write_results(tmp_path / "results.csv", [{**good_rows()[2], "error": "50%\r100%"}])
    assert read_results(tmp_path)["error"].tolist() == ["50%\n100%"]


def test_rich_tables_print_user_text_as_written() -> None:
    row = {**good_rows()[2], "error": "[/oops] [bold]boom[/bold]"}
    buffer = io.StringIO()
    Console(file=buffer, width=200, color_system=None).print(summary_table(summarize(to_frame([row])), title="[x]"))
    assert "[/oops] [bold]boom[/bold]" in buffer.getvalue() and "[x]" in buffer.getvalue()


# -- 7. undecodable files, database URLs, damaged databases ---------------------------------------------
def test_undecodable_files_are_one_line_errors(tmp_path: Path) -> None:
    toml = tmp_path / "m.toml"
    toml.write_bytes(b'[base]\nmodel = "tiny"\n[scenarios.a]\ndescription = "caf\xe9"\n')
    with pytest.raises(BadInput, match=rf"^{toml}: line 4: not UTF-8 text"):
        load_matrix(str(toml))
    (tmp_path / "env.json").write_bytes(b'{"host": "caf\xe9"}')
    with pytest.raises(BadInput, match="env.json: not valid JSON"):
        write_plan(tmp_path, {"scenarios": []}, {}, resumed=True)
    assert not (tmp_path / "scenarios.json").exists()


@pytest.mark.parametrize(
    ("db", "part"),
    [
        ("postgresql://", "--db postgresql://: names no database"),
        ("postgresql://[::1", "--db postgresql://[::1 is not a database URL"),
        ("postgresql://u@host:port/db", "is not a database URL"),
        ("postgresql://u@host:99999/db", "port 99999 is not a TCP port"),
    ],
)
def test_a_malformed_database_url_is_one_line(db: str, part: str) -> None:
    assert_one_line(gpubench("history", "list", "--db", db), part)


@pytest.fixture
def history_db(tmp_path: Path) -> Path:
    db = tmp_path / "h.db"
    env = {**history_env(1), "git": {"commit": "0" * 40, "branch": "[bold]feature[/bold]"}}
    first = write_run(tmp_path / "r1", history_reps("baseline", [100.0, 101.0, 99.0]), env)
    second = write_run(tmp_path / "r2", history_reps("baseline", [100.0, 101.0, 99.0]), history_env(2))
    assert gpubench("history", "import", "--db", db, first, second).code == 0
    return db


@pytest.mark.parametrize(
    "tamper",
    [
        "UPDATE result_figures SET median = 9e999 WHERE metric = 'samples_per_s'",
        "UPDATE repeat_figures SET value = -5 WHERE metric = 'peak_mem_mb'",
        "UPDATE result_figures SET median = 'fast' WHERE metric = 'step_time_median_ms'",
    ],
)
def test_a_damaged_history_row_stops_the_gate(history_db: Path, tamper: str) -> None:
    with sqlite3.connect(history_db) as conn:
        conn.execute(tamper)
    assert_one_line(gpubench("history", "check", "--db", history_db), "history database: ", "is not a finite number")


def test_history_tables_print_stored_text_as_written(history_db: Path) -> None:
    done = gpubench("history", "list", "--db", history_db)
    assert done.code == 0 and "[bold]feature[/bold]" in done.out
