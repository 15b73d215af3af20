"""The lock a run holds on its result directory (bench/run/outdir.py takes it): `fcntl.flock` on
DIR/.gpubench.lock, without waiting. Here, where every reader of a result directory can ask it:
a directory still being written is not a finished run (history import refuses it)."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from ..errors import BadInput

LOCK_FILE = ".gpubench.lock"
WAIT_HINT = "wait for it to end, or choose another --out"


def check_unlocked(out: Path, hint: str = WAIT_HINT) -> None:
    """Refuse at once, before any work, when another gpubench process writes `out`."""
    try:
        fd = os.open(out / LOCK_FILE, os.O_RDONLY)
    except FileNotFoundError:
        return
    except OSError:
        return  # unreadable: `locked` will say what is wrong
    try:
        _lock(fd, out, hint)
    finally:
        os.close(fd)  # and with it the lock, taken only to test it


def _lock(fd: int, out: Path, hint: str = WAIT_HINT) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise BadInput(
            f"{out}: another gpubench run{_holder(fd)} is writing this result directory",
            hint=hint,
        ) from None


def _holder(fd: int) -> str:
    """' (pid 1234)' from the lock file, or ''."""
    with contextlib.suppress(OSError, ValueError):
        pid = int(os.pread(fd, 32, 0).decode().strip())
        return f" (pid {pid})"
    return ""
