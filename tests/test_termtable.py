"""Tables that fit: bench.termtable's layout, and the run summary, `compare`, `history check` and
`history show` rendered at 80 and 120 columns from published result sets. Every scenario name and
status shows whole, no line is wider than the terminal, and a note repeated on many rows is one
footnote, so the line count stays near the row count."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
from report_fixtures import cpu_rows, gpu_rows
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from bench.compare.core import compare
from bench.compare.render import print_table
from bench.fmt import METRIC_LABELS
from bench.history import api as history_api
from bench.history.judge import Params
from bench.history.render import check_table, print_series
from bench.report.table import summary_table
from bench.results import load_run, summarize, to_frame
from bench.termtable import Column, FitTable, footnoted, note_parts

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results"
WIDTHS = (80, 120)
# published pairs: repeated notes (one repeat a side), long names with missing/new rows, all-status rows
COMPARE_PAIRS = [
    ("h200-bert-large/fidelity/engine-r0", "h200-bert-large/fidelity/engine-r1"),
    ("h200-bert-base/full", "h200-bert-base/cumulative"),
    ("h200-bert-large/full", "h200-bert-large/throughput"),
    ("h200-bert-large/aa/a", "h200-bert-large/aa/b"),
]
SUMMARY_SETS = ["h200-bert-large/full", "h200-bert-large/faults", "h200-bert-large/throughput"]
HISTORY_SETS = [RESULTS / "h200-bert-large/aa/a", RESULTS / "h200-bert-large/aa/b", RESULTS / "h200-bert-large/full"]


def rendered(draw: Callable[[Console], None], width: int) -> list[str]:
    buffer = io.StringIO()
    draw(Console(file=buffer, width=width, color_system=None))
    lines = buffer.getvalue().splitlines()
    too_wide = [line for line in lines if cell_len(line) > width]
    assert not too_wide, f"lines wider than {width} columns: {too_wide}"
    return lines


def header(lines: list[str]) -> str:
    return next(line for line in lines if line.startswith("┃ "))


def table_rows(lines: list[str]) -> list[list[str]]:
    """The table's body rows as cells (continuation lines of a wrapped note left out)."""
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in lines if line.startswith("│ ")]
    return [r for r in rows if r[0]]


# -- the layout ------------------------------------------------------------------------------------
COLUMNS = [Column("name"), Column("p", right=True, drop=1), Column("wide", drop=2), Column("note", note=True)]
REPEATED = "threshold only: fewer than 3 ok repeats on a side"


def test_empty_columns_go_and_a_repeated_long_note_is_one_footnote() -> None:
    rows = [["a", "-", "x", REPEATED], ["b", "-", "y", f"ok -> oom; {REPEATED}"], ["c", "", "z", "short"]]
    table, footnotes = FitTable(COLUMNS, rows).layout(120)
    assert [c.header for c in table.columns] == ["name", "wide", "note"]  # p: "-" or "" everywhere
    assert footnotes == [REPEATED]
    lines = rendered(lambda console: console.print(FitTable(COLUMNS, rows)), 120)
    assert [r[-1] for r in table_rows(lines)] == ["[1]", "ok -> oom [1]", "short"]
    assert lines[-1] == f"[1] {REPEATED}"


def test_narrow_widths_drop_by_rank_then_move_every_note_under_the_table() -> None:
    rows = [["alpha", "0.05", "w" * 30, "a note of some length that wraps"], ["beta", "0.5", "v", "another"]]
    fit = FitTable(COLUMNS, rows)
    assert [c.header for c in fit.layout(200)[0].columns] == ["name", "p", "wide", "note"]
    assert [c.header for c in fit.layout(70)[0].columns] == ["name", "wide", "note"]  # p (rank 1) first
    assert [c.header for c in fit.layout(45)[0].columns] == ["name", "note"]
    assert fit.layout(45)[1] == []  # the note wraps before it moves
    table, footnotes = fit.layout(12)  # even the note column does not fit: markers only
    assert footnotes == ["a note of some length that wraps", "another"]
    lines = rendered(lambda console: console.print(fit), 20)
    assert [r for r in table_rows(lines)] == [["alpha", "[1]"], ["beta", "[2]"]]


def test_notes_move_under_the_table_at_their_rank_only_when_that_is_enough() -> None:
    columns = [Column("name"), Column("wide", drop=2), Column("note", note=True, drop=1)]
    fit = FitTable(columns, [["x", "w" * 30, "a long note that is unique here"]])
    table, footnotes = fit.layout(50)  # moving the note makes it fit: the wide column stays
    assert [c.header for c in table.columns] == ["name", "wide", "note"] and footnotes == [fit.rows[0][2]]
    table, footnotes = fit.layout(40)  # moving it is not enough: the wide column goes, the note stays
    assert [c.header for c in table.columns] == ["name", "note"] and footnotes == []


def test_a_note_is_split_outside_parentheses_and_moves_whole() -> None:
    error = "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 139.8 GiB total)"
    assert note_parts(f"ok -> oom; {error}") == ["ok -> oom", error]
    skip = "tf32 is a CUDA matmul mode (Ampere or newer); it has no meaning on the CPU"
    assert footnoted([skip, REPEATED, f"x; {REPEATED}"], everything=True) == (
        ["[1]", "[2]", "[3][2]"],
        [skip, REPEATED, "x"],
    )


def test_styled_cells_keep_their_text_and_width() -> None:
    rows = [["a-very-long-scenario-name", Text("new failure", style="bold red")]]
    lines = rendered(lambda console: console.print(FitTable([Column("s"), Column("v")], rows)), 43)
    assert table_rows(lines) == [["a-very-long-scenario-name", "new failure"]]


# -- compare ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("pair", COMPARE_PAIRS, ids=lambda p: f"{p[0]}..{p[1]}")
def test_compare_fits_with_every_name_and_verdict_whole(pair: tuple[str, str], width: int) -> None:
    base, new = load_run(RESULTS / pair[0]), load_run(RESULTS / pair[1])
    result = compare(base.frame, new.frame, base.env, new.env, allow_env_mismatch=True)
    lines = rendered(lambda console: print_table(result, console), width)
    records = result.rows.to_dict("records")
    shown = [(r[0], r[1], next(c for c in r if c in set(result.rows["verdict"]))) for r in table_rows(lines)]
    assert shown == [(r["scenario"], METRIC_LABELS.get(r["metric"], r["metric"]), r["verdict"]) for r in records]
    settings = len(result.setting_differences) > 0  # compared anyway: one more footnote
    assert len(lines) <= len(records) + 12 + settings, "\n".join(lines)


def test_a_note_on_every_row_is_one_footnote_at_120_columns() -> None:
    """The fidelity sets have one repeat a side: every figure is 'threshold only'. That note took
    three lines per row (59 lines for 20 rows); now it is one footnote."""
    base, new = load_run(RESULTS / COMPARE_PAIRS[0][0]), load_run(RESULTS / COMPARE_PAIRS[0][1])
    result = compare(base.frame, new.frame, base.env, new.env)
    lines = rendered(lambda console: print_table(result, console), 120)
    assert sum("threshold only" in line for line in lines) == 1
    assert "[1] threshold only: fewer than 3 ok repeats on a side" in lines
    assert len(table_rows(lines)) == len(result.rows) == 15 and len(lines) <= 27  # 5 scenarios x 3 quantities


# -- the run summary -------------------------------------------------------------------------------
SUMMARIES = {
    **{name: lambda name=name: summarize(load_run(RESULTS / name).frame) for name in SUMMARY_SETS},
    "gpu-fixture": lambda: summarize(to_frame(gpu_rows())),
    "cpu-fixture": lambda: summarize(to_frame(cpu_rows())),
}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", list(SUMMARIES))
def test_run_summary_fits_with_every_name_and_status_whole(name: str, width: int) -> None:
    summary = SUMMARIES[name]()
    lines = rendered(lambda console: console.print(summary_table(summary, title=name)), width)
    assert [r[:2] for r in table_rows(lines)] == [[r["scenario"], r["status"]] for r in summary.to_dict("records")]
    assert header(lines).startswith("┃ scenario ") and "samples/s" in header(lines)
    assert len(lines) <= len(summary) + 12, "\n".join(lines)


def test_run_summary_keeps_the_change_vs_baseline_longest() -> None:
    summary = summarize(load_run(RESULTS / "h200-bert-large/full").frame)
    wide, narrow, narrower = (rendered(lambda c: c.print(summary_table(summary)), w) for w in (120, 80, 70))
    assert "loss" in header(wide) and header(wide).count("vs base") == 2
    assert "loss" not in header(narrow) and header(narrow).count("vs base") == 2
    assert header(narrower).split("┃")[3:6] == [" samples/s ± CV ", " vs base ", " peak MB "]
    assert "peak MB source: nvml-process" in narrower


# -- history check and show ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Four published H200 runs: the A/A pair, the full run and an older full run (tests/data)."""
    target = str(tmp_path_factory.mktemp("history") / "history.sqlite")
    history_api.import_dirs(target, [REPO / "tests/data/history/h200-full", *HISTORY_SETS])
    return target


@pytest.mark.parametrize("width", WIDTHS)
def test_history_check_fits_with_every_name_and_verdict_whole(store: str, width: int) -> None:
    result = history_api.check(store, Params())
    lines = rendered(lambda console: console.print(check_table(result)), width)
    records = result.rows.to_dict("records")
    verdicts = set(result.rows["verdict"])
    shown = [(r[0], next(c for c in r if c in verdicts)) for r in table_rows(lines)]
    assert shown == [(r["scenario"], r["verdict"]) for r in records]
    assert "verdict" in header(lines) and "GPU" not in header(lines)  # one GPU: the title names it
    # title, header, footnotes and the method (4 lines at 80 columns) around one line per row
    assert len(lines) <= len(records) + 14, "\n".join(lines)


@pytest.mark.parametrize("width", WIDTHS)
def test_history_show_fits_with_every_flag_whole(store: str, width: int) -> None:
    views = history_api.show(store, "bf16", "samples_per_s", Params())
    lines = rendered(lambda console: print_series(views, console), width)
    flags = [m.flag for view in views for m in view.marks]
    assert [next(c for c in r if c in set(flags)) for r in table_rows(lines)] == flags
    assert len(lines) <= len(flags) + 12, "\n".join(lines)
