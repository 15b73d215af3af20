"""The reaper: the process every child of a run is started under, so that nothing a run starts
outlives its row or gpubench (docs/running.md, "What gpubench guarantees").

    python -I -S bench/reaper.py PARENT_PID -- PROGRAM ARG...

run_subprocess (proc.py) starts every worker, torchrun job, probe and user's command this way, in a
session of its own; the fork server (bench/worker/forkserver.py) makes each forked worker's first
process one with `supervise`. The reaper:

- is a child subreaper (PR_SET_CHILD_SUBREAPER): a descendant whose parent ends (a daemon, a rank
  torchrun started in a session of its own, a dataloader worker of a killed worker) is re-parented
  to it, not to init, so the reaper always sees the whole tree below it;
- asks the kernel for SIGTERM when its parent dies (PR_SET_PDEATHSIG, even when the parent is
  SIGKILLed) and then SIGKILLs the whole tree at once;
- when its program ends, for whatever reason, ends what the program left behind (SIGTERM, then
  SIGKILL after LEFTOVER_GRACE_S), then exits as its program did (the same code, or killed by the
  same signal), so the parent sees the program's own exit;
- on SIGTERM/SIGINT/SIGHUP sent to its process group by the parent (the program got it too) waits for
  the program, which has its grace; on KILL_NOW (SIGUSR1) from the parent SIGKILLs the tree at once.

Standard library only and no package imports, so it starts in milliseconds as a script (-I -S).
Linux only (prctl, /proc); elsewhere proc.py starts the program directly.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
KILL_NOW = signal.SIGUSR1  # from the parent: SIGKILL the whole tree now (its grace is spent)
STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
LEFTOVER_GRACE_S = 2.0  # what a program left running gets between SIGTERM and SIGKILL
KILL_TRIES_S = 10.0  # how long to keep killing a tree that forks while it is killed


class _End(Exception):
    """The parent died, or asked for the tree to be killed now."""


def _prctl(option: int, value: int) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def descendants(root: int) -> list[int]:
    """Every live (not zombie) process below `root`, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in (b"Z", b"X"):
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for kid in children.get(todo.pop(), ()):
            found.append(kid)
            todo.append(kid)
    return found


def _reap() -> list[tuple[int, int]]:
    """Collect every child of this process that has ended: (pid, wait status)."""
    ended: list[tuple[int, int]] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        ended.append((pid, status))


def end_tree(grace_s: float, on_reaped: Callable[[int, int], None] = lambda _p, _s: None) -> None:
    """End every process below this one: SIGTERM, then after `grace_s` SIGKILL (at once if 0),
    again until none is left (a process may fork while it is killed); reap them all."""
    me = os.getpid()
    sig: int = signal.SIGTERM if grace_s > 0 else signal.SIGKILL
    start = time.monotonic()
    sent_kill = sig == signal.SIGKILL
    while True:
        left = descendants(me)
        for pid, status in _reap():
            on_reaped(pid, status)
        if not left:
            return
        elapsed = time.monotonic() - start
        if not sent_kill and elapsed >= grace_s:
            sig, sent_kill = signal.SIGKILL, True
        if elapsed > grace_s + KILL_TRIES_S:
            return  # an unkillable process (D state): nothing more to do here
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        if sig == signal.SIGTERM:
            sig = 0  # sent once; probe until the grace is spent
        time.sleep(0.02)


def become_reaper(parent: int) -> bool:
    """Make this process a subreaper that hears of its parent's death; False if the parent is gone."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
    return os.getppid() == parent


def supervise(child: int, parent: int) -> int:
    """Wait for `child` (this process's child, started after become_reaper), then end what it left
    behind; the child's wait status. The parent's death or KILL_NOW SIGKILLs the tree at once."""

    def on_signal(signum: int, frame: object) -> None:
        if signum == KILL_NOW or os.getppid() != parent:
            raise _End
        # else a stop sent to the whole group: the child has it too, and its grace

    for sig in (*STOPS, KILL_NOW):
        signal.signal(sig, on_signal)
    status: int | None = None

    def note(pid: int, wait_status: int) -> None:
        nonlocal status
        if pid == child and status is None:
            status = wait_status

    try:
        while status is None:
            try:
                pid, wait_status = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            note(pid, wait_status)
        end_tree(LEFTOVER_GRACE_S, note)
    except _End:
        for sig in (*STOPS, KILL_NOW):
            signal.signal(sig, signal.SIG_IGN)
        end_tree(0.0, note)
    return status if status is not None else signal.SIGKILL  # a status as waitpid gives: killed by SIGKILL


def exit_as(status: int) -> None:
    """End this process as the wait `status` says its child ended: the same code, or the same signal."""
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        os._exit(code)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the child dumped its core already, if any
    with contextlib.suppress(ValueError, OSError):  # SIGKILL and SIGSTOP have no handler to reset
        signal.signal(-code, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [-code])
    os.kill(os.getpid(), -code)
    os._exit(128 - code)  # a signal that does not end a process (SIGCHLD...): exit with its number


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: reaper.py PARENT_PID -- PROGRAM ARG...", file=sys.stderr)
        os._exit(2)
    parent = int(argv[0])
    if not become_reaper(parent):
        os._exit(1)  # the parent died before this process could hear of it: start nothing
    try:  # the program: stdio, environment and process group are the reaper's
        program = subprocess.Popen(argv[2:], preexec_fn=lambda: _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL)))
    except OSError as exc:
        print(f"gpubench: cannot start {argv[2]!r}: {exc}", file=sys.stderr, flush=True)
        os._exit(127)
    exit_as(supervise(program.pid, parent))


if __name__ == "__main__":
    main(sys.argv[1:])
