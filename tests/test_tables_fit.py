"""Every table fits (issue 58, item 9): at any terminal width from 60 to 240 columns, every command's
table (run summary and `report --format table`, predict, compare, compare --detect, history list and
check, cost) keeps every scenario name, status and verdict whole, no line is wider than the
terminal, and the columns it leaves out for want of width are named under it."""

from __future__ import annotations

import functools
import io
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from harness import REPO, gpubench_in_process, user_env
from hypothesis import given, settings
from hypothesis import strategies as st
from report_fixtures import gpu_rows
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from bench.compare.comparison import Thresholds, compare
from bench.compare.power import plan
from bench.compare.tables import compare_table, plan_table
from bench.history import library as history_api
from bench.history.check import Params
from bench.history.show import check_table, runs_table
from bench.predict import predict_matrix
from bench.predict.printout import breakdown_table
from bench.report.table import summary_table
from bench.results import load_run, summarize, to_frame
from bench.termtable import FitTable

RESULTS = REPO / "results"
WIDTHS = st.integers(60, 240)
DROPPED = "not shown at this width: "


@functools.cache
def published(name: str):  # type: ignore[no-untyped-def]
    return load_run(RESULTS / name)


@functools.cache
def history_store() -> str:
    folder = Path(os.environ.get("PYTEST_TMP", "/tmp")) / f"gpubench-fit-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "history.sqlite"
    if not db.exists():
        history_api.import_dirs(str(db), [RESULTS / n for n in ("gate-noise/aa/a", "guide-table/full")])
    return str(db)


def _compare() -> FitTable:
    a, b = published("guide-table/full"), published("guide-table/throughput")
    return compare_table(compare(a.frame, b.frame, a.env, b.env, allow_env_mismatch=True))


def _plan() -> FitTable:
    frames = [published(n).frame for n in ("gate-noise/aa/a", "guide-table/full")]
    return plan_table(plan(frames, 2.0, Thresholds(), ["a", "full"]))


@functools.cache
def _predict() -> FitTable:
    return breakdown_table(predict_matrix("full", model="bert-large", gpu_memory="24GB"))


# each table, and the header of the column that is filled on every row's first line
TABLES: dict[str, tuple[Callable[[], FitTable], str]] = {
    "run summary": (lambda: summary_table(summarize(to_frame(gpu_rows())), title="full on cuda"), "status"),
    "report table": (lambda: summary_table(summarize(published("guide-table/faults").frame)), "status"),
    "predict": (_predict, "fits 24,576"),
    "compare": (_compare, "Verdict"),
    "compare --detect": (_plan, "Scenario"),
    "history check": (lambda: check_table(history_api.check(history_store(), Params())), "verdict"),
    "history list": (lambda: runs_table(history_api.list_runs(history_store()), "2 runs"), "status"),
}


def render(fit: FitTable, width: int) -> list[str]:
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None).print(fit)
    return buffer.getvalue().splitlines()


def check_fits(fit: FitTable, width: int, key: str) -> None:
    lines = render(fit, width)
    shown_text = "\n".join(lines)
    assert all(cell_len(line) <= width for line in lines), shown_text
    head = next(line for line in lines if line.startswith("┃ "))
    shown = [h.strip() for h in head.split("┃")[1:-1]]
    index, k = [], 0  # each shown header's column (two may share a header: "vs base")
    for header in shown:
        while fit.columns[k].header != header:
            k += 1
        index.append(k)
        k += 1
    cells = [[c if isinstance(c, Text) else Text(c) for c in row] for row in fit.rows]
    filled = [c.header for i, c in enumerate(fit.columns) if not all(r[i].plain.strip() in ("", "-") for r in cells)]
    never_dropped = [c.header for c in fit.columns if not c.drop and c.header in filled]
    assert set(never_dropped) <= set(shown), f"{shown} at {width}\n{shown_text}"
    left_out = [c.header for i, c in enumerate(fit.columns) if c.header in filled and i not in index]
    named = " ".join(lines[next((k for k, line in enumerate(lines) if line.startswith(DROPPED)), len(lines)) :])
    assert bool(left_out) == bool(named), shown_text
    assert all(header in " ".join(named.split()) for header in left_out), shown_text
    # every row: its name whole read down its column, every other cell but a note whole on its first line
    rows: list[list[list[str]]] = []
    for line in lines:
        if line.startswith("│ "):
            parts = [c.strip() for c in line.split("│")[1:-1]]
            if parts[shown.index(key)]:
                rows.append([])
            rows[-1].append(parts)
    assert len(rows) == len(cells), shown_text
    for row, source in zip(rows, cells, strict=True):
        for at, (header, i) in enumerate(zip(shown, index, strict=True)):
            if fit.columns[i].name:
                assert "".join(part[at] for part in row) == source[i].plain, shown_text
            elif not fit.columns[i].note:
                assert row[0][at] == source[i].plain.strip(), f"{header} at {width}\n{shown_text}"


@functools.cache
def built(table: str) -> FitTable:
    return TABLES[table][0]()


@settings(max_examples=12, deadline=None)
@given(width=WIDTHS)
@pytest.mark.parametrize("table", list(TABLES))
def test_every_table_fits_with_names_statuses_and_verdicts_whole(table: str, width: int) -> None:
    check_fits(built(table), width, TABLES[table][1])


@pytest.mark.parametrize("table", list(TABLES))
def test_every_table_fits_at_the_narrowest_and_widest(table: str) -> None:
    for width in (60, 80, 240):
        check_fits(built(table), width, TABLES[table][1])


def test_predict_at_80_columns_keeps_every_scenario_and_verdict_whole() -> None:
    """The reported case: `COLUMNS=80 gpubench predict ...` squeezed the scenario, params and peak
    columns to nothing and cut the verdict to `un…`."""
    env = {**user_env(), "COLUMNS": "80"}
    done = subprocess.run([sys.executable, "-m", "bench", "predict", "--matrix", "quick", "--gpu-memory", "2GB"],
                          env=env, capture_output=True, text=True, timeout=300, cwd=REPO)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    table = [line for line in lines if line[:1] in "┏┃┡│└"]
    assert all(cell_len(line) <= 80 for line in table) and "…" not in "".join(table), done.stdout
    head = [h.strip() for h in next(line for line in lines if line.startswith("┃ ")).split("┃")[1:-1]]
    assert head[0] == "scenario" and "peak" in head and head[-1] == "fits 2,048", done.stdout
    body = [[c.strip() for c in line.split("│")[1:-1]] for line in lines if line.startswith("│ ")]
    assert [r[0] for r in body][:3] == ["baseline", "grad-accum", "grad-ckpt"] and {r[-1] for r in body} == {"no"}
    assert DROPPED in done.stdout and "half copies" in done.stdout.split(DROPPED)[1], done.stdout


@pytest.mark.parametrize("width", ["60", "80"])
def test_cost_and_report_tables_fit_narrow_terminals(width: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", width)
    for args in (
        ["cost", str(RESULTS / "guide-table/full"), "--price-per-gpu-hour", "3.5", "--train-samples", "1000000"],
        ["report", str(RESULTS / "guide-table/faults"), "--format", "table"],
    ):
        done = gpubench_in_process(*args)
        assert done.code == 0, done.err
        assert all(cell_len(line) <= int(width) for line in done.out.splitlines()), done.out
