"""Atomic file writes: a crash or a kill never leaves half a file behind."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path
from typing import Any

from .errors import CannotWrite


def atomic_write_text(path: Path, text: str) -> None:
    """Write to a temporary file beside `path`, then rename it over `path`. The temporary name is
    chosen before the file exists, so an exception anywhere (a second Ctrl-C included, even one
    that lands while the file is being created) removes it: no `.tmp` is ever left behind. A write
    that fails (a full disk, a read-only folder) is a CannotWrite naming `path`; the old file stays."""
    path = Path(path)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies: readable by all
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise CannotWrite(f"cannot write {path}: {exc.strerror or exc}") from exc
        raise


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)
