"""Where a command's document goes: stdout, or the file of `-o/--output` (written atomically, with
one line on stderr). Notes and warnings always go to stderr."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import typer
from rich.console import Console

from ..fsio import atomic_write_text
from ..safetext import for_terminal
from ..termtable import PIPE_WIDTH


def emit(text: str, output: Path | None, what: str = "") -> None:
    """The document on stdout, or in `output`; `what` is added to the "wrote" line."""
    if output is None:
        typer.echo(text, nl=False)
        return
    atomic_write_text(output, text)
    say(f"wrote {output}" + (f": {what}" if what else ""))


def say(line: str) -> None:
    """One line on stderr, as every command writes them: `gpubench: wrote ...`, `gpubench: note: ...`."""
    Console(stderr=True).print(f"gpubench: {for_terminal(line)}", highlight=False, markup=False, soft_wrap=True)


def plain(draw: Callable[[Console], None], width: int = PIPE_WIDTH) -> str:
    """What `draw` prints on a console, as plain text (no colour) at `width` columns: a table for a file."""
    buffer = io.StringIO()
    draw(Console(file=buffer, width=width, color_system=None))
    return buffer.getvalue()
