"""A multi-process scenario's worker, started by torchrun (`python -m torch.distributed.run`): one
subprocess tree per scenario with the run's timeout, process-group kill and Ctrl-C, like any worker.

Each rank writes rank-N.json (running, then its outcome) beside result.json as it starts; local
rank 0 writes result.json once every rank succeeded. When a rank fails, the rank files say which and
why; when no rank file was written, no rank started, and torchrun's own exit and log say why (the
rendezvous: a port taken, a host that does not resolve, another node that never came). After the
job, any rank process still alive is killed by its recorded pid (torchrun starts each rank in a
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
from ..recipe.nodes import NODES_DIFFER
from ..recipe.scenario import Scenario
from .proc import Interrupts, ProcResult, run_subprocess


def rendezvous_timeout_s(timeout_s: float) -> int:
    """How long torchrun's rendezvous waits for the other nodes: a quarter of the scenario's timeout
    (at least 5 s). A node that connects to node 0 tries twice, so torchrun gives up, and says why,
    before the scenario's timeout kills it."""
    return max(5, int(timeout_s // 4))


def command(sc: Scenario, spec: Path, result: Path, timeout_s: float) -> list[str]:
    """torchrun's argument list: one node (`--standalone`, a free port) or node `node_rank` of
    `nnodes`, meeting at `rdzv_endpoint` with static ranks (node 0's processes are ranks 0..gpus-1)
    within rendezvous_timeout_s(timeout_s)."""
    cmd = _torchrun(int(sc.gpus))
    if sc.nnodes == 1:
        cmd.append("--standalone")
    else:
        host, _, port = sc.rdzv_endpoint.rpartition(":")
        cmd += [
            f"--nnodes={sc.nnodes}",
            f"--node-rank={sc.node_rank}",
            f"--master-addr={host}",
            f"--master-port={port}",
            f"--rdzv-conf=timeout={rendezvous_timeout_s(timeout_s)}",
        ]
    return [*cmd, "-m", "bench.worker", str(spec), str(result)]


def _torchrun(processes: int) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={processes}", "--max-restarts=0"]


def interconnect_command(processes: int, device_type: str, out: Path) -> list[str]:
    """The interconnect check on one node (bench/worker/collectives.py): rank 0 writes `out`."""
    return [*_torchrun(processes), "--standalone", "-m", "bench.worker", "--interconnect", device_type, str(out)]


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
            command(sc, spec, result, timeout_s),
            timeout_s=timeout_s,
            log_path=log_path,
            env=env,
            on_start=on_start,
            interrupts=interrupts,
            grace_s=10.0,  # torchrun stops its ranks on SIGTERM
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
    """A rank that failed in a collective because another rank stopped answering (not one that
    found the nodes' settings differ, whatever words the settings hold)."""
    reason = str(state.get("reason", ""))
    return NODES_DIFFER not in reason and any(w in reason.lower() for w in WAIT_WORDS)


def root_cause(log_text: str) -> tuple[int, str] | None:
    """torchrun's "Root Cause (first observed failure)": (rank, "exit code -9 (SIGKILL)")."""
    match = re.search(
        r"Root Cause.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)[^\n]*?(\(SIG\w+\))?\s*$", log_text, re.S | re.M
    )
    if not match:
        return None
    signal_name = f" {match.group(3)}" if match.group(3) else ""
    return int(match.group(1)), f"exit code {match.group(2)}{signal_name}"


def root_error(log_text: str) -> tuple[int, str, str] | None:
    """torchrun's root cause with the rank's own error: (rank, "exit code 1", "ValueError: ...")
    where its error file (TORCHELASTIC_ERROR_FILE: torch's record decorator, or gpubench's hook,
    writes it) is named and readable; else an empty error."""
    root = root_cause(log_text)
    if root is None:
        return None
    block = log_text[log_text.rfind("Root Cause") :]
    found = re.search(r"error_file\s*:\s*(\S+)", block)
    message: Any = ""
    if found and found.group(1) != "<N/A>":
        with contextlib.suppress(OSError, ValueError, AttributeError):
            message = read_json(Path(found.group(1))).get("message", "")
            message = message.get("message", "") if isinstance(message, dict) else message
    return root[0], root[1], str(message or "").strip().splitlines()[0][:300] if message else ""


# torchrun's own words at a rendezvous that failed -> (status, what happened); the first match wins
# (a host that does not resolve also ends in a connection timeout)
RENDEZVOUS_FAILURES = (
    (r"EADDRINUSE|address already in use", "crashed", "port {port} is taken on this node (address already in use)"),
    (
        r"gai error|Name or service not known|Temporary failure in name resolution|nodename nor servname",
        "crashed",
        "could not resolve host {host!r}",
    ),
    (
        r"waiting for clients\. (?P<joined>\d+)/(?P<nodes>\d+) clients joined",
        "timeout",
        "the rendezvous timed out waiting for the other node(s): {joined} of {nodes} nodes joined at {endpoint}",
    ),
    (
        r"failed to connect|client socket has timed out|Connection refused",
        "timeout",
        "the rendezvous timed out: node 0 never answered at {endpoint} (is gpubench running there, with the "
        "same --rdzv-endpoint?)",
    ),
)


def _last_error(log_text: str) -> str:
    """The last exception line of a log ("DistNetworkError: ..."), without its module path; else
    the last error or warning of c10d's own log ("[E1202 14:38:05.5 socket.cpp:1028] [c10d] ...")."""
    lines = re.findall(r"^(?:\w+\.)*(\w*(?:Error|Exception): .*)$", log_text, re.M)
    lines = lines or re.findall(r"^\[[EW]\d[^\]]*\] (.*)$", log_text, re.M)
    return lines[-1].strip() if lines else ""


def _signal_name(code: int) -> str:
    return signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)


def no_rank_started(sc: Scenario, proc: ProcResult, log_text: str) -> tuple[str, str]:
    """(status, reason) for a job in which no rank started: torchrun's own exit and, from its log,
    what happened at the rendezvous."""
    code = proc.returncode
    if proc.timed_out:
        what = f"torchrun started no rank in {proc.wall_s:.0f} s, when the scenario's timeout killed it"
        status = "timeout"
    elif code is not None and code < 0:
        status, what = "crashed", f"torchrun was killed by signal {_signal_name(code)} before starting any rank"
    else:
        status, what = "crashed", f"torchrun exited with code {code} before starting any rank"
    host, _, port = sc.rdzv_endpoint.rpartition(":")
    for pattern, verdict, words in RENDEZVOUS_FAILURES if sc.nnodes > 1 else ():
        found = re.search(pattern, log_text)
        if found:
            what += ": " + words.format(host=host, port=port, endpoint=sc.rdzv_endpoint, **found.groupdict())
            status = "timeout" if proc.timed_out else verdict
            break
    said = _last_error(log_text)
    return status, (f"{what}; torchrun said: {said}" if said else what)[:500]


def _ranks(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


def failure(workdir: Path, sc: Scenario, proc: ProcResult, log_text: str = "") -> tuple[str, str] | None:
    """(status, reason) naming this node's rank that failed first and why, then the others, from the
    rank files and torchrun's root cause; torchrun's own failure when no rank started; None if
    nothing names a rank. Ranks on other nodes are seen only through the ranks here that waited for
    them (each node's own row says what its ranks did)."""
    states = rank_states(workdir)
    root = root_cause(log_text)
    if not states and root is None:
        return no_rank_started(sc, proc, log_text)
    per_node = sc.world_size // sc.nnodes
    here = range(sc.node_rank * per_node, (sc.node_rank + 1) * per_node)
    failed = {
        r: s for r, s in sorted(states.items()) if s.get("status") not in ("running", "ok", "diverged", "skipped")
    }
    causes: dict[tuple[str, str], list[int]] = {}  # ranks that failed alike, as one part
    for r, s in failed.items():
        if not _waiting(s):
            causes.setdefault((str(s.get("status")), str(s.get("reason", ""))), []).append(r)
    waiting = [r for r, s in failed.items() if _waiting(s)]
    silent = [r for r in here if states.get(r, {}).get("status", "running") == "running"]
    parts = [f"{_ranks(ranks)}: {status}: {reason}".strip() for (status, reason), ranks in causes.items()]
    if root is not None and root[0] in silent:
        parts.insert(0, f"rank {root[0]} died ({root[1]}) before writing a result")
        silent.remove(root[0])
    code = proc.returncode
    started = [r for r in silent if r in states]  # "hung" only of a rank that started
    if started:
        if proc.timed_out or waiting:
            verb = "never finished (hung)"
        elif code is not None and code < 0:
            verb = f"gave no result (torchrun was killed by signal {_signal_name(code)})"
        else:
            verb = "gave no result (stopped by torchrun)"
        parts.append(f"{_ranks(started)} {verb}")
    if len(started) < len(silent):
        parts.append(f"{_ranks([r for r in silent if r not in states])} did not start (no rank file)")
    if waiting:
        whom = " for it" if parts else " for a rank on another node (that node's row says why)" if sc.nnodes > 1 else ""
        parts.append(f"{_ranks(waiting)} failed waiting{whom} in a collective")
    if not parts:
        return None
    if causes:
        first = next(iter(causes))[0]
        status = "oom" if first == "oom" else first or "error"
    else:
        status = "timeout" if (proc.timed_out or (waiting and silent)) else "crashed"
    return status, "; ".join(parts)[:500]
