"""Terminal tables that fit the console's width, at 80 columns as at 160.

A table is declared as columns and rows of text; it is laid out when rich renders it, at the width
it is given. Names, statuses, figures and verdicts are never cut: instead
  - a column empty (or "-") in every row is left out;
  - a note part (notes are split at "; " outside parentheses) that repeats on several rows is printed once, as a
    numbered footnote under the table, and its rows carry the marker [N];
  - while the table is too wide, the note column wraps down to NOTE_MIN columns, then the columns
    with a `drop` rank go, lowest rank first. At the note column's own rank every note becomes a
    footnote if that alone makes the table fit; otherwise only when nothing is left to drop, and
    then the dropped columns that fit come back, the last dropped first;
  - a long name (the `name` column: a scenario's) counts as NAME_MIN columns while columns drop,
    then takes the room that is left (what the notes leave, or half of it): a name wider than its
    column is folded over lines, after a '-', '_' or '.' or beside a CJK character where it can, so
    that it shows whole, read down its column, and every other cell of its row keeps its one line;
  - the columns left out for want of width are named under the table ("not shown at this width").
Every cell, the title and the lines under the table pass through bench.safetext.for_terminal: no
escape sequence or control character from a result or the history reaches the terminal.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.cells import cell_len, get_character_cell_size
from rich.console import Console, ConsoleOptions, JustifyMethod, RenderResult
from rich.table import Table
from rich.text import Text

from .safetext import for_terminal

NOTE_MIN = 24  # the note column wraps down to this width before any column is dropped
NAME_MIN = 24  # a longer name folds down to this width before any column is dropped
NAME_BREAKS = frozenset(" -_./:,;=+")  # a folded name breaks after one of these where it can
INLINE_MAX = 24  # a repeated note part longer than this becomes a footnote
EMPTY = ("", "-")
PIPE_WIDTH = 160  # the width of a table written to a pipe, a file or a CI log
NOTE_SEP = "; "


@dataclass(frozen=True)
class Column:
    header: str
    right: bool = False  # numbers are right-aligned
    drop: int = 0  # 0: always shown; else dropped when the table is too wide, rank 1 first
    note: bool = False  # the one column that wraps and whose repeated parts become footnotes
    name: bool = False  # the row's name: folded over lines, never cut, when it is wider than its room


@dataclass
class FitTable:
    """A rich renderable: a title line, the table, its footnotes and any footer lines."""

    columns: Sequence[Column]
    rows: Sequence[Sequence[str | Text]]
    title: str = ""
    footer: Sequence[str] = field(default_factory=list)  # lines under the footnotes, e.g. the method

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table, footnotes, shown = self.laid_out(options.max_width)
        if self.title:
            yield Text(for_terminal(self.title), style="table.title")
        yield table
        for number, note in enumerate(footnotes, start=1):
            yield Text(f"[{number}] {note}", style="dim")
        dropped = self.dropped(shown)
        if dropped:
            yield Text(f"not shown at this width: {', '.join(dropped)}", style="dim")
        for line in self.footer:
            yield Text(for_terminal(line), style="dim")

    def layout(self, width: int) -> tuple[Table, list[str]]:
        """The table at this width, and its footnotes in marker order."""
        table, footnotes, _shown = self.laid_out(width)
        return table, footnotes

    def laid_out(self, width: int) -> tuple[Table, list[str], list[int]]:
        """The table at this width, its footnotes in marker order, and the columns it shows."""
        cells = [[_terminal_cell(c) for c in row] for row in self.rows]
        shown = [  # a name column always: a scenario may be named "-"
            i
            for i in range(len(self.columns))
            if not cells or self.columns[i].name or not all(_blank(row[i]) for row in cells)
        ]
        note = next((i for i in shown if self.columns[i].note), None)
        name = next((i for i in shown if self.columns[i].name), None)
        texts = [row[note].plain for row in cells] if note is not None else []
        notes, footnotes = footnoted(texts, everything=False)

        def natural(i: int | None) -> int:
            if i is None:
                return 0
            values = [Text(n) for n in notes] if i == note else [row[i] for row in cells]
            return max([len(self.columns[i].header), *(v.cell_len for v in values)])

        def needed() -> int:
            least = {note: NOTE_MIN, name: NAME_MIN}
            widths = [min(natural(i), least[i]) if i in least else natural(i) for i in shown]
            return sum(widths) + 3 * len(shown) + 1  # a cell's padding and border; the last border

        dropped: list[int] = []
        for _rank, i in sorted((self.columns[i].drop, i) for i in shown if self.columns[i].drop):
            if needed() <= width:
                break
            if i != note:
                shown.remove(i)
                dropped.append(i)
                continue
            inline = notes, footnotes
            notes, footnotes = footnoted(texts, everything=True)
            if needed() > width:  # moving the notes alone is not enough: keep them, drop the next column
                notes, footnotes = inline
        if note is not None and needed() > width:
            notes, footnotes = footnoted(texts, everything=True)
            for i in reversed(dropped):  # the notes moved at last: the columns that now fit come back
                shown.append(i)
                if needed() > width:
                    shown.remove(i)
                    break
            shown.sort()
        # what the name and the notes share: the name takes what the notes leave, or half of it
        room = width - sum(natural(i) for i in shown if i not in (name, note)) - 3 * len(shown) - 1
        fold = 0 if name is None else max(2, min(natural(name), max(room - natural(note), room // 2)))
        table = Table(header_style="bold")
        for i in shown:
            column = self.columns[i]
            justify: JustifyMethod = "right" if column.right else "left"
            if i == note:
                least = max(1, min(natural(i), NOTE_MIN, room - fold))
                table.add_column(column.header, justify=justify, min_width=least)
            elif i == name:  # exactly as wide as the layout folded the names
                table.add_column(column.header, justify=justify, width=fold, overflow="fold")
            else:  # never wrapped, never cut: the layout made room
                table.add_column(column.header, justify=justify, no_wrap=True, min_width=natural(i))
        for r, row in enumerate(cells):
            table.add_row(
                *[Text(notes[r]) if i == note else folded(row[i], fold) if i == name else row[i] for i in shown]
            )
        return table, footnotes, shown

    def dropped(self, shown: Sequence[int]) -> list[str]:
        """The columns with a value in some row that the layout left out (a header that two columns
        share is named with the one before it: "loss vs base")."""
        cells = [[_terminal_cell(c) for c in row] for row in self.rows]
        headers = [c.header for c in self.columns]
        return [
            f"{headers[i - 1]} {column.header}" if i and headers.count(column.header) > 1 else column.header
            for i, column in enumerate(self.columns)
            if i not in shown and cells and not all(_blank(row[i]) for row in cells)
        ]


def folded(name: Text, width: int) -> Text:
    """The name over lines of at most `width` columns: broken after a NAME_BREAKS character or
    beside a double-width one where that leaves the line at least half full, else between any two
    characters (a double-width character is never split). Its lines joined give the name back."""
    plain = name.plain
    if cell_len(plain) <= width:
        return name
    cuts: list[int] = []
    start, used, gap = 0, 0, 0  # gap: the last place to break the current line at (0: none yet)
    for i, char in enumerate(plain):
        size = get_character_cell_size(char)
        if i > start and (plain[i - 1] in NAME_BREAKS or size > 1 or get_character_cell_size(plain[i - 1]) > 1):
            gap = i
        if used + size > width and i > start:
            cut = gap if gap > start and 2 * cell_len(plain[start:gap]) >= width else i
            cuts.append(cut)
            start, used, gap = cut, cell_len(plain[cut:i]), 0
        used += size
    return Text("\n").join(name.divide(cuts))


def footnoted(notes: Sequence[str], *, everything: bool) -> tuple[list[str], list[str]]:
    """Notes with their repeated long parts replaced by markers [N] (with `everything`, the rest of
    each note too, as one footnote), and the footnotes in marker order."""
    parts = [note_parts(note) for note in notes]
    counts = Counter(p for row in parts for p in dict.fromkeys(row))
    footnotes: list[str] = []

    def marker(text: str) -> str:
        if text not in footnotes:
            footnotes.append(text)
        return f"[{footnotes.index(text) + 1}]"

    out = []
    for row in parts:
        repeated = [p for p in row if counts[p] > 1 and len(p) > INLINE_MAX]
        inline, markers = NOTE_SEP.join(p for p in row if p not in repeated), []
        if everything and inline:
            inline, markers = "", [marker(inline)]
        markers += [marker(p) for p in repeated]
        out.append(" ".join(filter(None, [inline, "".join(markers)])))
    return out, footnotes


def note_parts(note: str) -> list[str]:
    """A note split at "; " outside parentheses (an error message's own "; " stays in its part)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(note):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth <= 0 and note.startswith(NOTE_SEP, i):
            parts.append(note[start:i])
            start = i + len(NOTE_SEP)
    parts.append(note[start:])
    return [p.strip() for p in parts if p.strip()]


def _terminal_cell(cell: str | Text) -> Text:
    """A cell as the terminal shows it: no escape sequence or control character (bench.safetext)."""
    if not isinstance(cell, Text):
        return Text(for_terminal(cell))
    shown = for_terminal(cell.plain)
    return cell if shown == cell.plain else Text(shown, style=cell.style)


def _blank(cell: Text) -> bool:
    return cell.plain.strip() in EMPTY


def stdout_console(pipe_width: int = PIPE_WIDTH) -> Console:
    """The terminal's width on a terminal (or $COLUMNS); pipe_width in a pipe or a CI log, not rich's 80."""
    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = pipe_width
    return console
