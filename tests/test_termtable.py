"""Tables that fit: bench.termtable's layout, and the run summary, `compare`, `history check` and
`history show` rendered at 80 and 120 columns from published result sets. Every scenario name and
status shows whole, no line is wider than the terminal, and a note repeated on many rows is one
footnote, so the line count stays near the row count. With any scenario names (up to 200 bytes,
CJK included) at any width from 80 to 200, every status, figure and verdict stays whole on its
row's line and the names fold down their column."""

from __future__ import annotations

import dataclasses
import functools
import io
import string
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from report_fixtures import cpu_rows, gpu_rows
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from bench.compare.comparison import CompareResult, Thresholds, compare
from bench.compare.power import Plan, plan
from bench.compare.tables import compare_table, plan_table, print_table
from bench.fmt import METRIC_LABELS
from bench.history import library as history_api
from bench.history.check import CheckResult, Params
from bench.history.show import check_table, print_series
from bench.recipe.scenario import MAX_NAME_BYTES
from bench.report.table import summary_table
from bench.results import load_run, summarize, to_frame
from bench.termtable import NAME_MIN, Column, FitTable, folded, footnoted, note_parts

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results"
WIDTHS = (80, 120)
# published pairs: repeated notes (one repeat a side), long names with missing/new rows, all-status rows
COMPARE_PAIRS = [
    ("guide-table/throughput", "guide-table/throughput"),
    ("parity-capacity/bert-base-full", "rtx3080-recipe/cumulative-bert-base"),
    ("guide-table/full", "guide-table/throughput"),
    ("gate-noise/aa/a", "gate-noise/aa/b"),
]
SUMMARY_SETS = ["guide-table/full", "guide-table/faults", "guide-table/throughput"]
HISTORY_SETS = [RESULTS / "gate-noise/aa/a", RESULTS / "gate-noise/aa/b", RESULTS / "guide-table/full"]


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


def test_columns_dropped_before_the_notes_moved_come_back_when_they_fit() -> None:
    columns = [
        Column("name", name=True),
        Column("fixed"),
        Column("a", drop=2),
        Column("b", drop=3),
        Column("note", note=True, drop=1),
    ]
    fit = FitTable(columns, [["n" * 24, "f" * 20, "a" * 10, "b" * 5, "a note thirty characters long."]])
    table, footnotes = fit.layout(70)  # a, then b, went with the note inline; moved, it leaves room for b
    assert [c.header for c in table.columns] == ["name", "fixed", "b", "note"] and len(footnotes) == 1


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
    header = len(result.env_differences)  # one line each above the table (another card, another torch)
    dropped = any(line.startswith("not shown at this width:") for line in lines)  # the columns left out
    assert len(lines) <= len(records) + 12 + settings + header + dropped, "\n".join(lines)


def test_a_note_on_every_row_is_one_footnote_at_120_columns() -> None:
    """A one-repeat set against itself: every figure is 'threshold only'. That note took three lines
    per row (59 lines for 20 rows); now it is one footnote."""
    base, new = load_run(RESULTS / COMPARE_PAIRS[0][0]), load_run(RESULTS / COMPARE_PAIRS[0][1])
    result = compare(base.frame, new.frame, base.env, new.env)
    lines = rendered(lambda console: print_table(result, console), 120)
    assert sum("threshold only" in line for line in lines) == 1
    assert "[1] threshold only: fewer than 3 ok repeats on a side" in lines
    assert len(table_rows(lines)) == len(result.rows) == 27 and len(lines) <= 39  # 9 scenarios x 3 quantities


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
    summary = summarize(load_run(RESULTS / "guide-table/full").frame)
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
    assert len(lines) <= len(records) + 15, "\n".join(lines)  # and a line naming the columns left out


@pytest.mark.parametrize("width", WIDTHS)
def test_history_show_fits_with_every_flag_whole(store: str, width: int) -> None:
    views = history_api.show(store, "bf16", "samples_per_s", Params())
    lines = rendered(lambda console: print_series(views, console), width)
    flags = [m.flag for view in views for m in view.marks]
    assert [next(c for c in r if c in set(flags)) for r in table_rows(lines)] == flags
    assert len(lines) <= len(flags) + 12, "\n".join(lines)


# -- long names: they fold, nothing else gives way -------------------------------------------------
CJK = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)  # two columns each
NAME_CHARS = st.one_of(  # what a scenario name may hold: letters and digits of any script, '-', '_', '.'
    st.sampled_from(string.ascii_letters + string.digits + "-_."),
    CJK,
    st.characters(min_codepoint=0x3041, max_codepoint=0x3096),  # hiragana
    st.characters(min_codepoint=0xAC00, max_codepoint=0xD7A3),  # hangul
    st.characters(min_codepoint=0xFF10, max_codepoint=0xFF5A, categories=("Lu", "Ll", "Nd")),  # full-width
    st.characters(min_codepoint=0xC0, max_codepoint=0x24F, categories=("Lu", "Ll")),  # accented Latin
)


def _fit_bytes(name: str) -> str:
    return name.encode()[:MAX_NAME_BYTES].decode(errors="ignore")


NAMES = st.one_of(st.text(NAME_CHARS, min_size=1, max_size=12), st.text(NAME_CHARS, min_size=50, max_size=200))
NAME_LISTS = st.lists(NAMES.map(_fit_bytes), min_size=1, max_size=4)
WIDTH = st.integers(80, 200)


def shown_columns(head: list[str], columns: Sequence[Column]) -> list[int]:
    """The index in `columns` of each header shown, in order (a dropped column leaves a gap)."""
    out, i = [], 0
    for title in head:
        while columns[i].header != title:
            i += 1
        out.append(i)
        i += 1
    return out


def assert_whole(fit: FitTable, width: int, key: int) -> list[list[list[str]]]:
    """Render `fit` at `width`: no line is wider; every column but the notes is shown whose cells
    are not all blank, at least every column that is never dropped; every cell but a name or a
    note is whole on its row's first line (the one where column `key` is filled), blank below it;
    every name, read down its column, is whole. The rows, as their lines' cells."""
    lines = rendered(lambda console: console.print(fit), width)
    shown = shown_columns([c.strip() for c in header(lines).split("┃")[1:-1]], fit.columns)
    cells = [[c if isinstance(c, Text) else Text(c) for c in row] for row in fit.rows]
    kept = [i for i, c in enumerate(fit.columns) if not c.drop and not all(r[i].plain in ("", "-") for r in cells)]
    assert set(kept) <= set(shown), f"{[fit.columns[i].header for i in shown]} at {width}:\n" + "\n".join(lines)
    rows: list[list[list[str]]] = []
    for line in lines:
        if line.startswith("│ "):
            parts = [c.strip() for c in line.split("│")[1:-1]]
            if parts[shown.index(key)]:
                rows.append([])
            rows[-1].append(parts)
    assert len(rows) == len(cells), "\n".join(lines)
    for row, source in zip(rows, cells, strict=True):
        for at, i in enumerate(shown):
            column = fit.columns[i]
            if column.name:
                assert "".join(line[at] for line in row) == source[i].plain, "\n".join(lines)
            elif not column.note:
                assert [line[at] for line in row] == [source[i].plain.strip()] + [""] * (len(row) - 1), (
                    f"{column.header} at {width}:\n" + "\n".join(lines)
                )
    return rows


def renamed(frame: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """The frame with its scenarios named from `names`, in turn (first seen, first named)."""
    order = list(dict.fromkeys(frame["scenario"]))
    return frame.assign(scenario=frame["scenario"].map({s: names[k % len(names)] for k, s in enumerate(order)}))


@functools.cache
def gpu_summary() -> pd.DataFrame:
    return summarize(to_frame(gpu_rows()))


@functools.cache
def published_compare(pair: tuple[str, str]) -> CompareResult:
    base, new = load_run(RESULTS / pair[0]), load_run(RESULTS / pair[1])
    return compare(base.frame, new.frame, base.env, new.env, allow_env_mismatch=True)


@settings(max_examples=30)  # each example renders whole tables: make test's time
@given(names=NAME_LISTS, width=WIDTH)
@example(names=["-"], width=80)  # every scenario named like an empty cell: the name column stays
def test_run_summary_keeps_every_status_and_figure_whole_whatever_the_names(names: list[str], width: int) -> None:
    summary = renamed(gpu_summary(), names)
    fit = summary_table(summary)
    rows = assert_whole(fit, width, key=1)
    assert [r[0][1] for r in rows] == list(summary["status"])


@settings(max_examples=30)  # each example renders whole tables: make test's time
@given(pair=st.sampled_from(COMPARE_PAIRS), names=NAME_LISTS, width=WIDTH)
def test_compare_keeps_every_figure_and_verdict_whole_whatever_the_names(
    pair: tuple[str, str], names: list[str], width: int
) -> None:
    result = published_compare(pair)
    fit = compare_table(dataclasses.replace(result, rows=renamed(result.rows, names)))
    assert_whole(fit, width, key=[c.header for c in fit.columns].index("Verdict"))


@functools.cache
def published_plan() -> Plan:
    frames = [load_run(RESULTS / name).frame for name in ("gate-noise/aa/a", "guide-table/full")]
    return plan(frames, 2.0, Thresholds(), ["a", "full"])


@settings(max_examples=30)  # each example renders whole tables: make test's time
@given(names=NAME_LISTS, width=WIDTH)
def test_compare_detect_keeps_every_figure_whole_whatever_the_names(names: list[str], width: int) -> None:
    result = published_plan()
    fit = plan_table(dataclasses.replace(result, rows=renamed(result.rows, names)))
    assert_whole(fit, width, key=[c.header for c in fit.columns].index("Detectable now"))  # Repeats may go


@pytest.fixture(scope="module")
def judged(store: str) -> CheckResult:
    return history_api.check(store, Params())


@settings(max_examples=30)  # each example renders whole tables: make test's time
@given(names=NAME_LISTS, width=WIDTH)
def test_history_check_keeps_every_figure_and_verdict_whole_whatever_the_names(
    judged: CheckResult, names: list[str], width: int
) -> None:
    fit = check_table(dataclasses.replace(judged, rows=renamed(judged.rows, names)))
    assert_whole(fit, width, key=[c.header for c in fit.columns].index("verdict"))


PUNCTUATED = st.text(st.one_of(NAME_CHARS, st.sampled_from("/:+=()[]{}@#,;!?'\"")), min_size=1, max_size=200)


@given(names=st.lists(PUNCTUATED, min_size=1, max_size=5), width=st.integers(40, 200))
def test_a_name_folds_whole_and_the_rest_of_its_row_keeps_its_line(names: list[str], width: int) -> None:
    columns = [Column("name", name=True), Column("status"), Column("n", right=True), Column("note", note=True)]
    rows = [[n, "new failure", "-12.5%", "a note"] for n in names]
    assert_whole(FitTable(columns, rows), width, key=1)


def test_a_folded_name_breaks_after_a_separator_where_the_line_stays_half_full() -> None:
    name = "bert-large-bf16-compile-b128-gradient-checkpointing-adamw8bit"
    assert folded(Text(name), 24).plain.split("\n") == [
        "bert-large-bf16-compile-",
        "b128-gradient-",
        "checkpointing-adamw8bit",
    ]
    assert folded(Text("x" * 30 + "-y"), 24).plain.split("\n") == ["x" * 24, "x" * 6 + "-y"]  # no break: a hard fold
    assert folded(Text("名前" * 7), 5).plain.split("\n") == ["名前", "名前", "名前", "名前", "名前", "名前", "名前"]
    assert folded(Text(name), len(name)).plain == name


def test_a_long_name_leaves_the_figures_at_80_columns() -> None:
    """Issue 35, item 4: one 60-character name squeezed the status and figures out of the table."""
    summary = summarize(to_frame(gpu_rows()))
    short = header(rendered(lambda c: c.print(summary_table(summary)), 80))
    summary.loc[0, "scenario"] = "x" * 60
    lines = rendered(lambda c: c.print(summary_table(summary)), 80)
    assert short.split("┃")[2:4] == header(lines).split("┃")[2:4] == [" status  ", " samples/s ± CV "]
    first, second = [[c.strip() for c in line.split("│")[1:4]] for line in lines[3:5]]
    assert first[1:] == ["ok", "34.00 ±2.9%"] and second[1:] == ["", ""]
    assert NAME_MIN <= len(first[0]) < 60 and first[0] + second[0] == "x" * 60
