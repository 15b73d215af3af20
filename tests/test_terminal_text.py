"""Terminal output strips control sequences from every text gpubench did not write (docs/running.md,
"What gpubench guarantees"): history notes through `history show` and `accept`, a worker's error
through run's progress line, an error's text, a table's cells; the files keep the text as given."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

from harness import error_lines, gpubench_in_process
from history_support import nights
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from bench.history import library
from bench.run.progress import RichReporter
from bench.safetext import CONTROL, for_terminal
from bench.termtable import Column, FitTable

ATTACKS = [
    "\x1b[2J\x1b[H",  # erase the screen, cursor home
    "\x1b]0;owned\x07",  # set the window title
    "\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\",  # a hyperlink
    "\x1bP+q544e\x1b\\",  # a device control string
    "\x9b31m",  # an 8-bit CSI
    "\r\x08\x7f\x00\x85",  # carriage return, backspace, DEL, NUL, NEL
    "\u202eevil\u202c",  # right-to-left override
]
hostile = st.lists(st.one_of(st.sampled_from(ATTACKS), st.text(max_size=8)), max_size=6).map("".join)


@given(hostile)
def test_for_terminal_leaves_no_control_character_and_keeps_plain_text(text: str) -> None:
    shown = for_terminal(text)
    assert CONTROL.search(shown) is None and "\u202e" not in shown
    assert "\n" not in shown and CONTROL.search(for_terminal(text, newlines=True).replace("\n", "")) is None
    assert for_terminal("plain text, é and あ") == "plain text, é and あ"


@given(hostile)
def test_a_table_cell_or_title_reaches_the_terminal_without_escapes(text: str) -> None:
    buffer = io.StringIO()
    table = FitTable([Column("scenario", name=True), Column("note", note=True)], [["a", text]], title=text)
    Console(file=buffer, width=120, color_system=None).print(table)
    assert CONTROL.search(buffer.getvalue().replace("\n", "")) is None


def test_a_workers_error_reaches_the_progress_line_without_escapes() -> None:
    buffer = io.StringIO()
    reporter = RichReporter(Console(file=buffer, width=200, color_system=None))
    reporter.start(total=1, done=0)
    reporter.scenario_end({"scenario": "baseline", "repeat": 0, "status": "error", "error": "boom\x1b[2J\x1b]0;x\x07!"})
    reporter.finish()
    assert "boom!" in buffer.getvalue() and "\x1b" not in buffer.getvalue() and "\x07" not in buffer.getvalue()


def test_an_error_line_shows_no_escape_from_the_value_it_names(tmp_path: Path) -> None:
    done = gpubench_in_process("history", "list", "--db", tmp_path / "x\x1b[2J\x1b]0;owned\x07y.sqlite")
    assert done.code == 2 and len(error_lines(done.err)) == 1
    assert "\x1b" not in done.err and "\x07" not in done.err and "/xy.sqlite: no history database" in done.err


def test_a_history_note_is_shown_stripped_and_stored_as_given(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COLUMNS", "200")
    db = str(tmp_path / "history.sqlite")
    library.import_dirs(db, nights(tmp_path / "nights", [{"bf16": [100.0, 100.5, 99.5]}] * 3))
    note = "faster\x1b[2J\x1b]0;owned\x07 kernel"
    accepted = gpubench_in_process("history", "accept", "--db", db, "-s", "bf16", "--run", "2", "--note", note)
    assert accepted.code == 0, accepted.err
    assert "\x1b" not in accepted.out and "faster kernel" in accepted.out.replace("owned", "")
    shown = gpubench_in_process("history", "show", "--db", db, "-s", "bf16")
    assert shown.code == 0, shown.err
    assert "\x1b" not in shown.out and "\x07" not in shown.out and "faster" in shown.out
    as_json = gpubench_in_process("history", "show", "--db", db, "-s", "bf16", "--format", "json")
    assert f"accepted: {note}" in [p["note"] for p in json.loads(as_json.out)]  # JSON escapes it, and keeps it
    with sqlite3.connect(db) as conn:
        assert [row[0] for row in conn.execute("select note from accepts")] == [note]
