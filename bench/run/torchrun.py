"""A multi-process scenario's worker, started by torchrun (`python -m torch.distributed.run`): one
subprocess tree per scenario with the run's timeout, process-group kill and Ctrl-C, like any worker.

Each rank writes rank-N.json (running, then its outcome) beside result.json; local rank 0 writes
result.json once every rank succeeded. When a rank fails, the rank files say which and why; after
the job, any rank process still alive is killed by its recorded pid (torchrun starts each rank in a
session of its own, so the process-group kill alone would not reach them).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

from ..fsio import read_json
from ..scenario import Scenario
from .proc import Interrupts, ProcResult, run_subprocess


def command(sc: Scenario, spec: Path, result: Path) -> list[str]:
    """torchrun's argument list: one node (`--standalone`, a free port) or node `node_rank` of
    `nnodes`, meeting at `rdzv_endpoint` with static ranks (node 0's processes are ranks 0..gpus-1)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={sc.gpus}", "--max-restarts=0"]
    if sc.nnodes == 1:
        cmd.append("--standalone")
    else:
        host, _, port = sc.rdzv_endpoint.rpartition(":")
        cmd += [
            f"--nnodes={sc.nnodes}",
            f"--node-rank={sc.node_rank}",
            f"--master-addr={host}",
            f"--master-port={port}",
        ]
    return [*cmd, "-m", "bench.worker", str(spec), str(result)]


def launch(
    sc: Scenario,
    spec: Path,
    result: Path,
    *,
    timeout_s: float,
    log_path: Path,
    env: dict[str, str],
    on_start: Any = None,
    interrupts: Interrupts | None = None,
) -> ProcResult:
    for stale in result.parent.glob("rank-*.json"):
        stale.unlink()
    env = {**env, "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", "1")}  # torchrun's own default, said once
    try:
        return run_subprocess(
            command(sc, spec, result),
            timeout_s=timeout_s,
            log_path=log_path,
            env=env,
            on_start=on_start,
            interrupts=interrupts,
            grace_s=10.0,  # torchrun stops its ranks on SIGTERM
            die_with_parent=True,  # a SIGKILLed gpubench takes torchrun, and so its ranks, with it
        )
    finally:
        kill_leftovers(result.parent)


def rank_states(workdir: Path) -> dict[int, dict[str, Any]]:
    """Each rank's last word (rank-N.json), by rank."""
    states: dict[int, dict[str, Any]] = {}
    for path in workdir.glob("rank-*.json"):
        with contextlib.suppress(ValueError, OSError):
            states[int(path.stem.split("-", 1)[1])] = read_json(path)
    return states


def _alive_worker(pid: int) -> bool:
    """Is `pid` still one of our workers (not a reused pid)?"""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"bench.worker" in cmdline


def kill_leftovers(workdir: Path) -> list[int]:
    """SIGKILL every rank process of this scenario that outlived torchrun; the pids killed."""
    killed = []
    for state in rank_states(workdir).values():
        pid = state.get("pid")
        if isinstance(pid, int) and pid != os.getpid() and _alive_worker(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed


WAIT_WORDS = ("timed out", "timeout", "watchdog", "connection closed", "connection reset", "broken pipe")


def _waiting(state: dict[str, Any]) -> bool:
    """A rank that failed in a collective because another rank stopped answering."""
    return any(w in str(state.get("reason", "")).lower() for w in WAIT_WORDS)


def root_cause(log_text: str) -> tuple[int, str] | None:
    """torchrun's "Root Cause (first observed failure)": (rank, "exit code -9 (SIGKILL)")."""
    match = re.search(
        r"Root Cause.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)[^\n]*?(\(SIG\w+\))?\s*$", log_text, re.S | re.M
    )
    if not match:
        return None
    signal_name = f" {match.group(3)}" if match.group(3) else ""
    return int(match.group(1)), f"exit code {match.group(2)}{signal_name}"


def failure(workdir: Path, world_size: int, timed_out: bool, log_text: str = "") -> tuple[str, str] | None:
    """(status, reason) naming the rank that failed first and why, then the others, from the rank
    files and torchrun's root cause; None if nothing names a rank."""
    states = rank_states(workdir)
    failed = {
        r: s for r, s in sorted(states.items()) if s.get("status") not in ("running", "ok", "diverged", "skipped")
    }
    causes = {r: s for r, s in failed.items() if not _waiting(s)}
    waiting = [r for r, s in failed.items() if _waiting(s)]
    silent = [r for r in range(world_size) if states.get(r, {}).get("status", "running") == "running"]
    root = root_cause(log_text)
    parts = [f"rank {r}: {s.get('status')}: {s.get('reason', '')}".strip() for r, s in causes.items()]
    if root is not None and root[0] in silent:
        parts.insert(0, f"rank {root[0]} died ({root[1]}) before writing a result")
        silent.remove(root[0])
    if silent:
        verb = "never finished (hung)" if timed_out or waiting else "gave no result (stopped by torchrun)"
        parts.append(f"rank{'s' if len(silent) > 1 else ''} {', '.join(map(str, silent))} {verb}")
    if waiting:
        who = f"rank{'s' if len(waiting) > 1 else ''} {', '.join(map(str, waiting))}"
        parts.append(f"{who} failed waiting for it in a collective")
    if not parts:
        return None
    if causes:
        first = next(iter(causes.values()))
        status = "oom" if first.get("status") == "oom" else str(first.get("status", "error"))
    else:
        status = "timeout" if (timed_out or (waiting and silent)) else "crashed"
    return status, "; ".join(parts)[:500]
