"""Text from users and from children, made safe where it goes.

- `check_plain(value, what)`: a value read from the command line or a matrix that gpubench writes
  into a generated script or a file name (a path, a scenario's name or description, a Slurm
  partition or account, the matrix file's name) holds no control character; else BadInput, exit 2,
  before any work. A newline there would otherwise start a new line of the sbatch script.
- `for_terminal(text)`: what a terminal is shown of a text gpubench did not write (a scenario's
  name or description, a history note, an error, a script's output line): escape sequences (CSI,
  OSC, DCS, ...) removed, tabs and line breaks a space, every other control character removed, and
  the bidirectional overrides that reorder what is shown removed. Files keep the text as given.
"""

from __future__ import annotations

import re

from .errors import BadInput

# C0 controls (newline, carriage return, NUL, escape, ...), DEL, C1 controls, and Unicode's line and
# paragraph separators
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
ESCAPE_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, erase
    r"|\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC: window title, hyperlinks, clipboard (to BEL or ST)
    r"|\x1b[PX^_][^\x1b\x9c]*(?:\x1b\\|\x9c)?"  # DCS, SOS, PM, APC (to ST)
    r"|\x1b[ -/]*[0-~]"  # the other ESC sequences (charset, keypad, reset)
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
    r"|[\x90\x98\x9d-\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # 8-bit DCS, SOS, OSC, PM, APC
)
SPACES = re.compile("[\t\n\v\f\r\x85\u2028\u2029]")
BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")  # embeddings, overrides, isolates


def control_char(value: str) -> str | None:
    """The first control character in `value`, as U+XXXX, or None."""
    found = CONTROL.search(value)
    return None if found is None else f"U+{ord(found.group()):04X}"


def check_plain(value: str, what: str) -> str:
    """`value` when it holds no control character; else BadInput naming `what` and the character."""
    char = control_char(value)
    if char is not None:
        raise BadInput(
            f"{what} {value!r} holds a control character ({char})",
            hint="newlines, tabs, escapes and other control characters are refused in names, paths and Slurm options",
        )
    return value


def for_terminal(text: object, *, newlines: bool = False) -> str:
    """`text` as a terminal may show it: no escape sequence, no control character (tabs and line
    breaks become spaces; with `newlines`, a newline stays), no bidirectional override."""
    plain = ESCAPE_SEQUENCE.sub("", str(text))
    if newlines:
        plain = plain.replace("\r\n", "\n")
        lines = [SPACES.sub(" ", line) for line in plain.split("\n")]
        return "\n".join(BIDI.sub("", CONTROL.sub("", line)) for line in lines)
    return BIDI.sub("", CONTROL.sub("", SPACES.sub(" ", plain)))
