"""The folder a run writes: a new run never writes into one that holds another run, finished or
not, and a run holds a lock on its folder for as long as it writes there.

The lock is `fcntl.flock` on DIR/.gpubench.lock, taken without waiting: a second `gpubench run
--out DIR` or `--resume DIR` is refused at once. The kernel drops the lock when the process ends,
however it ends, so a killed run leaves no stale lock; the file stays (deleting it would let two
runs lock two different files of the same name), except where a run interrupted before its first
row takes away what it wrote (`discard_unmeasured`, under the lock, the lock file last): that run
measured nothing, and its folder is left as it was before it, or gone if the run made it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from ..errors import BadInput
from ..results import ENV_JSON, RESULTS_CSV, SCENARIOS_JSON
from ..results.dirlock import LOCK_FILE, _lock, check_unlocked
from ..results.losscurve import LOSSES_DIR

__all__ = [
    "LOCK_FILE",
    "RUN_ENTRIES",
    "check_unlocked",
    "check_unused",
    "discard_unmeasured",
    "entries",
    "locked",
    "missing_folders",
    "remove_folders",
    "remove_stale_temps",
]
# What a run writes first (scenarios.json, env.json) and as it goes (results.csv, logs/, work/, losses/).
RUN_ENTRIES = (RESULTS_CSV, SCENARIOS_JSON, ENV_JSON, "logs", "work", LOSSES_DIR)


def check_unused(out: Path) -> None:
    """A new run's folder must not hold another run, finished or not."""
    found = [name for name in RUN_ENTRIES if (out / name).exists()]
    if not found:
        return
    if (out / SCENARIOS_JSON).is_file():
        hint = f"use --resume {out} to finish it, or choose another --out"
    else:
        hint = "choose another --out"
    what = "a results.csv" if RESULTS_CSV in found else f"another run's files ({', '.join(found)})"
    raise BadInput(f"--out {out} already holds {what}", hint=hint)


@contextlib.contextmanager
def locked(out: Path) -> Iterator[None]:
    """Hold the lock on `out` (created if need be) while the body runs."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd = os.open(out / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        raise BadInput(f"{out}: cannot lock the result directory: {exc.strerror or exc}") from None
    try:
        _lock(fd, out)
        with contextlib.suppress(OSError):  # the pid is for the message of a run refused here
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)


def remove_stale_temps(out: Path) -> None:
    """A resumed run's folder, locked: the temporary files of an atomic write cut short by a SIGKILL go."""
    for stale in out.glob(".*.tmp"):
        stale.unlink(missing_ok=True)


def missing_folders(out: Path) -> tuple[Path, ...]:
    """`out` and each of its parents that does not exist yet, deepest first: what creating it makes."""
    return tuple(p for p in (out, *out.parents) if not p.exists())


def remove_folders(made: tuple[Path, ...]) -> None:
    """The folders a run made for its --out (deepest first), each only while it is empty."""
    for folder in made:
        with contextlib.suppress(OSError):
            folder.rmdir()


def entries(out: Path) -> frozenset[str]:
    """The names in `out` now (none when it does not exist)."""
    try:
        return frozenset(os.listdir(out))
    except OSError:
        return frozenset()


def discard_unmeasured(out: Path, before: frozenset[str], made: tuple[Path, ...]) -> bool:
    """A new run interrupted before its first row, holding the lock on `out`: take away what it
    wrote there (RUN_ENTRIES, the temporary files of its atomic writes, its lock file last) unless
    it was there `before`, then the folders it made for `out`, where empty: anything else in them
    stays. Never where results.csv exists (False): a saved row is never lost."""
    if (out / RESULTS_CSV).exists():
        return False
    ours = [n for n in (*RUN_ENTRIES, *(p.name for p in out.glob(".*.tmp"))) if n not in before]
    for name in [*ours, *([LOCK_FILE] if LOCK_FILE not in before else [])]:
        path = out / name
        with contextlib.suppress(OSError):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
    remove_folders(made)
    return True
