"""The one helper that starts child processes: an argument list (never a shell), a timeout, and
the whole process tree ended on timeout or interrupt (dataloader and compile workers too), when
the child ends, and when this process dies: every child runs under a reaper (reaper.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from .. import reaper


@dataclass(frozen=True)
class ProcResult:
    returncode: int | None  # negative: killed by that signal
    wall_s: float
    timed_out: bool = False
    interrupted: bool = False
    note: str = ""  # why no exit code is known, where the launcher knows


class Interrupts:
    """The parent's Ctrl-C policy while it runs scenarios (SIGINT, and SIGTERM like it).

    A first Ctrl-C while a worker runs stops that worker at once (KeyboardInterrupt in the wait);
    one that arrives anywhere else (between scenarios, while a row is being saved) is held, so the
    row being saved is never lost, and the run stops before the next scenario. A second Ctrl-C
    raises KeyboardInterrupt wherever it lands: exit at once (writes are atomic, so the results
    file stays valid)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # SIGHUP: a closed terminal, a dropped ssh

    def __init__(self) -> None:
        self.presses = 0
        self.armed = False
        self._previous: dict[int, object] = {}

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        self.presses += 1
        if self.armed or self.presses > 1:
            raise KeyboardInterrupt

    @property
    def requested(self) -> bool:
        return self.presses > 0

    def __enter__(self) -> Interrupts:
        try:
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handler)
        except ValueError:  # not the main thread: leave signals alone
            pass
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)  # type: ignore[arg-type]
        self._previous.clear()

    @contextlib.contextmanager
    def armed_while(self) -> Iterator[None]:
        """Within this block a Ctrl-C (even one held from before) raises KeyboardInterrupt."""
        self.armed = True
        try:
            if self.presses:
                raise KeyboardInterrupt
            yield
        finally:
            self.armed = False


def stop_tree(pid: int, grace_s: float, wait: Callable[[float], bool]) -> None:
    """Stop the tree of the reaper `pid`: SIGTERM its process group (the program has `grace_s` to
    stop); then the reaper SIGKILLs its whole tree (KILL_NOW), sessions of their own included;
    SIGKILL the group if the reaper does not end either. `wait(s)`: whether the reaper ended within s."""
    steps: tuple[tuple[Callable[[], None], float], ...] = (
        (lambda: os.killpg(pid, signal.SIGTERM), grace_s),
        (lambda: os.kill(pid, reaper.KILL_NOW), 10.0),
    )
    for send, wait_s in steps:
        try:
            send()
        except ProcessLookupError:
            return
        if wait(wait_s):
            return
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the last resort
        os.killpg(pid, signal.SIGKILL)


def kill_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """stop_tree for a child of this process."""

    def ended(wait_s: float) -> bool:
        try:
            proc.wait(timeout=wait_s)
            return True
        except subprocess.TimeoutExpired:
            return False

    stop_tree(proc.pid, grace_s, ended)


def run_subprocess(
    cmd: Sequence[str],
    *,
    timeout_s: float,
    log_path: Path,
    env: dict[str, str] | None = None,
    on_start: Callable[[int], None] | None = None,
    grace_s: float = 5.0,
    interrupts: Interrupts | None = None,
) -> ProcResult:
    """Run `cmd` with stdout+stderr to `log_path`; wait at most `timeout_s` seconds.

    Ctrl-C (KeyboardInterrupt) while waiting kills the child's group and returns interrupted=True;
    a second one during that kill is re-raised. With `interrupts`, a held Ctrl-C also counts.
    The child runs under a reaper (reaper.py): whatever it started is ended when it ends, and the
    whole tree when this process dies, even by SIGKILL; the exit code is the child's own."""
    start = time.monotonic()
    proc = start_child(reaped(cmd), log_path=log_path, env=env, die_with_parent=False, append=False)
    try:
        if on_start is not None:
            on_start(proc.pid)
        with interrupts.armed_while() if interrupts else contextlib.nullcontext():
            returncode = proc.wait(timeout=timeout_s)
        return ProcResult(returncode, time.monotonic() - start)
    except subprocess.TimeoutExpired:
        kill_group(proc, grace_s)
        return ProcResult(proc.returncode, time.monotonic() - start, timed_out=True)
    except KeyboardInterrupt:
        try:
            kill_group(proc, grace_s=2.0)
        except KeyboardInterrupt:  # a second Ctrl-C: no more grace
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, reaper.KILL_NOW)
            raise
        return ProcResult(proc.returncode, time.monotonic() - start, interrupted=True)
    finally:
        if proc.returncode is None:  # any other way out: leave nothing running
            with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
                os.kill(proc.pid, reaper.KILL_NOW)
                proc.wait(timeout=10)


REAPER = Path(reaper.__file__).resolve()


def run_captured(cmd: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """A short command's output (a Slurm command's), under a reaper like every child: it ends with
    this process, even a SIGKILLed one, and at its timeout with all it started (TimeoutExpired)."""
    proc = subprocess.Popen(
        reaped(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc, grace_s=2.0)
        proc.communicate(timeout=10)
        raise
    return subprocess.CompletedProcess(
        list(cmd), proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
    )


def reaped(cmd: Sequence[str]) -> list[str]:
    """`cmd` run under a reaper of this process (reaper.py) on Linux; as it is elsewhere."""
    if not sys.platform.startswith("linux"):
        return list(cmd)
    return [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), "--", *cmd]


def _kill_me_with_parent(parent: int) -> Callable[[], None] | None:
    """A preexec_fn (run in the child between fork and exec) asking the kernel for SIGKILL when the
    parent dies (PR_SET_PDEATHSIG survives exec), then checking the parent did not die already."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def ask() -> None:
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the call
            os._exit(1)

    return ask


def start_server(cmd: Sequence[str], *, log_path: Path, env: dict[str, str] | None) -> subprocess.Popen[bytes]:
    """A long-lived helper child (the fork server) talking JSON lines over stdin/stdout, stderr to
    `log_path`, in its own session (a terminal's Ctrl-C reaches the parent alone); the caller
    bounds every wait on it."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            list(cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env, start_new_session=True
        )


def start_child(
    cmd: Sequence[str],
    *,
    log_path: Path,
    env: dict[str, str] | None = None,
    die_with_parent: bool = True,
    append: bool = True,
) -> subprocess.Popen[bytes]:
    """A child the caller polls and bounds itself (a lane's `gpubench run`; run_subprocess's):
    stdout and stderr to `log_path` (appended, or written afresh), its own session (the caller
    passes Ctrl-C on as SIGTERM), SIGKILLed by the kernel if this process dies (Linux)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab" if append else "wb") as log:
        return subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=_kill_me_with_parent(os.getpid()) if die_with_parent else None,
        )


def tail(path: Path, limit: int = 2000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
