"""How the runner starts a worker: `spawn` (a fresh `python -m bench.worker` per scenario) or
`fork` (the default on Linux: a fork server, started once per run, imports torch and transformers
and forks each worker; a worker is still its own process, in its own process group, with its own
log, timeout and CUDA context). If the fork server cannot serve, the run goes on with `spawn`.
A run with scenarios that import peft, torchao or bitsandbytes (scenario.CUDA_AT_IMPORT) starts one
more fork server for each set of them its scenarios import (`--with`), which preloads those of the
packages that import without a CUDA context; a scenario that needs one its server could not preload
is spawned afresh. One server a set: a package that leaves a context behind (torchao asks triton
for the device on import) costs its own scenarios the fork, not every other set's."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from .. import reaper
from ..recipe.engine_registry import ENGINES
from .proc import Interrupts, ProcResult, run_subprocess, start_server, stop_tree

LAUNCHERS = ("fork", "spawn")
DEFAULT_LAUNCHER = "fork" if hasattr(os, "fork") and sys.platform.startswith("linux") else "spawn"
WORKER = [sys.executable, "-m", "bench.worker"]
SERVER = [*WORKER, "--serve"]


@dataclass(frozen=True)
class WorkerJob:
    """One worker to start: its spec and result files, log, timeout, and who to tell its pid."""

    spec: Path
    result: Path
    timeout_s: float
    log_path: Path
    on_start: Callable[[int], None] | None = None
    interrupts: Interrupts | None = None
    # the packages of scenario.CUDA_AT_IMPORT the scenario imports: the fork server keeps them out
    # of its imports, so the worker is forked by the server `--with` them, or started afresh
    imports: tuple[str, ...] = ()


class Launcher(Protocol):
    name: str
    fallback_reason: str | None  # why a fork server gave way to spawn, if it did

    def prestart(self) -> None: ...

    def run(self, job: WorkerJob) -> ProcResult: ...

    def close(self, kill: bool = False) -> None: ...


class SpawnLauncher:
    name = "spawn"
    fallback_reason: str | None = None

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def prestart(self) -> None:
        """Nothing to start ahead: each worker is a fresh interpreter."""

    def run(self, job: WorkerJob) -> ProcResult:
        return run_subprocess(
            [*WORKER, str(job.spec), str(job.result)],
            timeout_s=job.timeout_s,
            log_path=job.log_path,
            env=self.env,
            on_start=job.on_start,
            interrupts=job.interrupts,
        )

    def close(self, kill: bool = False) -> None:
        pass


class ServerGone(Exception):
    """The fork server ended or stopped answering."""


class ForkLauncher:
    """Workers forked by one long-lived `python -m bench.worker --serve` (see worker/forkserver.py)."""

    name = "fork"

    def __init__(
        self,
        env: dict[str, str],
        log_path: Path,
        warn: Callable[[str], None] = lambda _m: None,
        server_cmd: list[str] | None = None,
        imports: Sequence[Sequence[str]] = (),
        role: str = "the fork server",
    ) -> None:
        self.env, self.log_path, self.warn = env, log_path, warn
        self.server_cmd = server_cmd or SERVER
        self.fallback_reason: str | None = None
        self.server: subprocess.Popen[bytes] | None = None
        self.fallback: SpawnLauncher | None = None
        self._buffer = b""
        self.said: set[str] = set()  # a `--with` server: the packages it did not preload, said
        self.preloaded: list[str] | None = None  # the `--with` packages the server imported (its ready line)
        self.unready: str | None = None  # why the server said it cannot serve, in that line
        self.role = role  # in warnings
        # one more server for each set of CUDA_AT_IMPORT packages the scenarios import (`imports`)
        self.extras: dict[tuple[str, ...], ForkLauncher] = {}
        for packages in imports:
            self._extra(tuple(packages))

    def _extra(self, packages: tuple[str, ...]) -> ForkLauncher:
        """The server `--with` these packages (made, not started, at the first ask)."""
        if packages not in self.extras:
            named = ",".join(packages)
            self.extras[packages] = ForkLauncher(
                self.env,
                self.log_path.with_name(f"{self.log_path.stem}-with-{'-'.join(packages)}.log"),
                self.warn,
                [*self.server_cmd, "--with", named],
                role=f"the fork server of the scenarios that import {named}",
            )
        return self.extras[packages]

    def prestart(self) -> None:
        """Start the server now, so that its imports (torch, transformers: 10-15 s on a GPU host)
        overlap what the parent does before the first worker (the matmul ceiling). A server that
        cannot start is left to the first `run`, which falls back to spawn as before."""
        with contextlib.suppress(OSError, ValueError):
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._start()
        for extra in self.extras.values():
            extra.prestart()

    def _start(self) -> subprocess.Popen[bytes]:
        if self.server is None or self.server.poll() is not None:
            self._buffer, self.preloaded = b"", None
            self.server = start_server(self.server_cmd, log_path=self.log_path, env=self.env)
        return self.server

    def say_missing(self, imports: Sequence[str]) -> None:
        """Warn, once a package, that this `--with` server did not preload one of `imports`."""
        missing = sorted(set(imports) - set(self.preloaded or ()) - self.said)
        if self.preloaded is not None and missing:
            self.said.update(missing)
            why = self.unready or f"it creates a CUDA context on import, or fails: logs/{self.log_path.name} says which"
            self.warn(f"{self.role} did not preload {', '.join(missing)} ({why}): their scenarios start afresh")

    def serves(self, imports: Sequence[str], deadline: float) -> bool:
        """Whether this server preloaded every package of `imports` (waiting for its ready line
        until `deadline`); False if it cannot tell."""
        if self.fallback is not None:
            return False
        try:
            self._start()
            while self.preloaded is None:
                if self._message(deadline) is None:
                    return False
        except (ServerGone, OSError, ValueError):
            return False
        return set(imports) <= set(self.preloaded)

    def _message(self, deadline: float) -> dict[str, Any] | None:
        """The server's next message; None at the deadline; ServerGone if it ended."""
        assert self.server is not None and self.server.stdout is not None
        fd = self.server.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise ServerGone("the fork server ended")
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        if "ready" in message:
            self.preloaded = list(message.get("preloaded") or []) if message["ready"] else []
            self.unready = None if message["ready"] else str(message.get("error"))
        return message

    def _expect(self, key: str, deadline: float) -> dict[str, Any] | None:
        """The next message holding `key` or an error (the server's `ready` line is passed over)."""
        while True:
            message = self._message(deadline)
            if message is None or key in message or message.get("error"):
                return message

    def run(self, job: WorkerJob) -> ProcResult:
        if self.fallback is not None:
            return self.fallback.run(job)
        job.log_path.parent.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        deadline = start + job.timeout_s
        if job.imports:  # the server `--with` them, where it preloaded them; else a fresh interpreter
            extra = self._extra(tuple(job.imports))
            if extra.serves(job.imports, deadline):
                done = extra.run(replace(job, imports=(), timeout_s=max(1.0, deadline - time.monotonic())))
            else:
                extra.say_missing(job.imports)
                done = SpawnLauncher(self.env).run(replace(job, timeout_s=max(1.0, deadline - time.monotonic())))
            # from this launch, as startup_s counts: the first such row waits for its server's imports
            # (on an H100 its wall time left out 14 s that its startup_s held)
            return replace(done, wall_s=time.monotonic() - start)
        pid: int | None = None
        try:
            with job.interrupts.armed_while() if job.interrupts else contextlib.nullcontext():
                server = self._start()
                assert server.stdin is not None
                request = {"spec": str(job.spec), "result": str(job.result), "log": str(job.log_path)}
                server.stdin.write((json.dumps(request) + "\n").encode())
                server.stdin.flush()
                forked = self._expect("pid", deadline)
                if forked is None:  # the server's imports outlasted the scenario's timeout
                    self.close(kill=True)
                    return ProcResult(None, time.monotonic() - start, timed_out=True)
                if forked.get("error"):
                    return self._fall_back(str(forked["error"]), job, deadline)
                pid = int(forked["pid"])
                if job.on_start is not None:
                    job.on_start(pid)
                ended = self._expect("returncode", deadline)
                if ended is not None:
                    return ProcResult(int(ended["returncode"]), time.monotonic() - start)
            code = self._kill(pid, grace_s=5.0)
            return ProcResult(code, time.monotonic() - start, timed_out=True)
        except KeyboardInterrupt:
            if pid is None:  # a worker may be forked already: it dies with the server
                self.close(kill=True)
                return ProcResult(None, time.monotonic() - start, interrupted=True)
            try:
                code = self._kill(pid, grace_s=2.0)
            except KeyboardInterrupt:  # a second Ctrl-C: no more grace
                self._killpg(pid, reaper.KILL_NOW)
                self.close(kill=True)
                raise
            return ProcResult(code, time.monotonic() - start, interrupted=True)
        except (ServerGone, OSError, ValueError) as exc:
            if pid is not None:
                self._killpg(pid, reaper.KILL_NOW)
            self.close(kill=True)
            if pid is None:
                return self._fall_back(f"{exc}", job, deadline)
            lost = f"the fork server was lost while the worker ran ({type(exc).__name__}: {exc})"
            return ProcResult(None, time.monotonic() - start, note=lost)

    def _fall_back(self, why: str, job: WorkerJob, deadline: float) -> ProcResult:
        self.fallback_reason = why
        self.warn(f"{self.role} cannot start workers ({why}); each worker starts afresh (--launcher spawn)")
        self.close(kill=True)
        self.fallback = SpawnLauncher(self.env)
        return self.fallback.run(replace(job, timeout_s=max(1.0, deadline - time.monotonic())))

    @staticmethod
    def _killpg(pid: int, sig: int) -> bool:
        """`sig` to the worker's process group (KILL_NOW: to its reaper alone)."""
        try:
            if sig == reaper.KILL_NOW:
                os.kill(pid, sig)
            else:
                os.killpg(pid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def _kill(self, pid: int, grace_s: float) -> int | None:
        """Stop the worker's tree (proc.stop_tree: SIGTERM, then its reaper SIGKILLs it all after
        `grace_s`); the worker's exit code."""
        code: int | None = None

        def ended(wait_s: float) -> bool:
            nonlocal code
            try:
                message = self._expect("returncode", time.monotonic() + wait_s)
            except ServerGone:
                return True
            if message is not None and "returncode" in message:
                code = int(message["returncode"])
            return message is not None

        stop_tree(pid, grace_s, ended)
        return code

    def close(self, kill: bool = False) -> None:
        """End the server: closing its stdin ends it; `kill` ends it (and any worker of it) at once."""
        for extra in self.extras.values():
            extra.close(kill)
        server, self.server = self.server, None
        if server is None:
            return
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)  # its workers die with it (PR_SET_PDEATHSIG)
        with contextlib.suppress(OSError):
            if server.stdin is not None:
                server.stdin.close()  # end of requests: the server exits
        try:
            server.wait(timeout=2)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
        if server.stdout is not None:
            server.stdout.close()


def open_launcher(
    name: str,
    env: dict[str, str],
    log_path: Path,
    warn: Callable[[str], None],
    engines: Sequence[str] = tuple(ENGINES),
    imports: Sequence[Sequence[str]] = (),
) -> Launcher:
    """`engines`: those the run's scenarios use; the fork server imports only these (the Trainer's
    imports cost about 4 s of CPU that an Accelerate-only run does not need). `imports`: the sets of
    CUDA_AT_IMPORT packages they import, for each of which one more server is started."""
    if name == "fork":
        sets = sorted({tuple(s) for s in imports if s})
        return ForkLauncher(env, log_path, warn, [*SERVER, ",".join(sorted(engines))], sets)
    return SpawnLauncher(env)
