"""A command scenario (`run --cmd`, a matrix's `command = [...]`): the user's own training script,
run as an argument list (never a shell) with the run's timeout, process-group kill and Ctrl-C,
timed by gpubench's step hook (bench/hook/) inside it.

Each process of the command that calls the hook writes hook-rank-N.json in the scenario's work
folder (bench/hook/protocol.py); the parent reads them as a worker's result: one rank's as it is,
several ranks' combined by the built-in multi-GPU rules (bench/worker/ranks.py). GPU memory is
NVML's, sampled over the command's whole process tree (torchrun's ranks too)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

from ..fsio import read_json
from ..hook import protocol
from ..measure import hostmem
from ..measure.nvml import MemoryPeaks, Nvml, TreeSampler, open_nvml
from ..recipe.scenario import Scenario
from ..results import FINAL_STATUSES
from ..worker.ranks import combine_ranks, loss_outcome
from . import torchrun
from .childenv import visible_devices
from .proc import Interrupts, ProcResult, run_subprocess, tail

# the settings a command's row holds: those gpubench applies to it; the others (model, data, engine,
# batch, learning rate, ...) only where the script reported them through the hook (bench.hook.settings)
ROW_SETTINGS = frozenset({"description", "command", "warmup_steps", "window", "gpus", "timeout_s"})


def hook_env(sc: Scenario, workdir: Path, device: str, launched_at: float, timeout_s: float) -> dict[str, str]:
    """What the hook reads (bench/hook/protocol.py): where to write, and the scenario's window."""
    return {
        protocol.DIR_VAR: str(workdir.resolve()),
        protocol.WARMUP_VAR: str(sc.warmup_steps),
        protocol.WINDOW_VAR: str(sc.window),
        protocol.DEVICE_VAR: "cpu" if device == "cpu" else "cuda",
        protocol.LAUNCHED_VAR: repr(launched_at),
        protocol.TIMEOUT_VAR: repr(timeout_s),
    }


def launch(
    sc: Scenario,
    workdir: Path,
    log_path: Path,
    *,
    device: str,
    gpu_uuids: tuple[str, ...],
    timeout_s: float,
    base_env: dict[str, str],
    sample_memory: bool,
    interrupts: Interrupts | None,
) -> tuple[ProcResult, list[MemoryPeaks], float]:
    """Run the command; (its outcome, each GPU's NVML peaks, its launch time)."""
    for stale in workdir.glob("hook-rank-*.json"):
        stale.unlink()
    count = sc.gpus if isinstance(sc.gpus, int) else 1
    uuids = gpu_uuids[:count] if device != "cpu" else ()
    handles: list[Nvml] = [h for h in (open_nvml(u)[0] for u in uuids) if h is not None] if sample_memory else []
    sampler = TreeSampler(handles) if handles and len(handles) == len(uuids) else None
    env = dict(base_env)
    if uuids:
        first = int(device.split(":")[1])
        env["CUDA_VISIBLE_DEVICES"] = (
            uuids[0] if len(uuids) == 1 else visible_devices(list(range(first, first + len(uuids))))
        )
    launched_at = time.time()
    env.update(hook_env(sc, workdir, device, launched_at, timeout_s))
    try:
        proc = run_subprocess(
            list(sc.command),
            timeout_s=timeout_s,
            log_path=log_path,
            env=env,
            on_start=sampler.start if sampler else None,
            interrupts=interrupts,
            grace_s=10.0,
        )
    finally:
        kill_leftovers(workdir)
    return proc, (sampler.stop() if sampler else []), launched_at


def rank_results(workdir: Path) -> dict[int, dict[str, Any]]:
    """Each process's hook file, by rank (an unreadable one as an error naming it)."""
    out: dict[int, dict[str, Any]] = {}
    for path in workdir.glob("hook-rank-*.json"):
        try:
            rank = int(path.stem.rsplit("-", 1)[1])
        except ValueError:
            continue
        try:
            data = read_json(path)
            out[rank] = data if isinstance(data, dict) else {"status": "error", "reason": f"{path.name}: not an object"}
        except (ValueError, OSError) as exc:
            out[rank] = {"status": "error", "reason": f"{path.name}: unreadable ({type(exc).__name__}: {exc})"}
    return out


def kill_leftovers(workdir: Path) -> list[int]:
    """SIGKILL every process of the command that called the hook and outlived it (a launcher that
    starts ranks in sessions of their own): those whose environment names this scenario's folder."""
    mark = f"{protocol.DIR_VAR}={workdir.resolve()}".encode()
    killed = []
    for state in rank_results(workdir).values():
        pid = state.get("pid")
        if not isinstance(pid, int) or pid == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if mark in environ:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed


def _last_error(log_text: str) -> str:
    """The last exception line of the log ("ValueError: ..."), without its module path (torchrun's
    own ChildFailedError, which says only that a rank failed, passed over)."""
    lines = re.findall(r"^(?:\w+\.)*(\w*(?:Error|Exception|Interrupt|Exit): .*)$", log_text, re.M)
    lines = [line for line in lines if not line.startswith("ChildFailedError:")]
    return lines[-1].strip() if lines else ""


def _failure(log_text: str, ranks: dict[int, dict[str, Any]]) -> str:
    """What a failed command said: torchrun's root cause (the rank, its exit and its own error, from
    its error file, its hook file or the log), else the failing rank's error as the hook recorded it
    (sys.excepthook), else the log's last exception."""
    errors = {r: str(s["reason"]) for r, s in sorted(ranks.items()) if s.get("status") == "error" and s.get("reason")}
    root = torchrun.root_error(log_text)
    if root is not None:
        rank, exit_text, message = root
        message = message or errors.get(rank) or _last_error(log_text)
        return f"rank {rank} failed ({exit_text})" + (f": {message}" if message else "")
    if errors:
        rank, reason = next(iter(errors.items()))
        alone = all(int(s.get("world_size") or 1) == 1 for s in ranks.values())
        return reason if alone else f"rank {rank}: {reason}"
    return _last_error(log_text)


def outcome(
    proc: ProcResult, workdir: Path, log_path: Path, timeout_s: float, kills_before: int | None
) -> tuple[str, str, dict[str, Any]]:
    """(status, reason, figures) of a command, like a worker's: a timeout, Ctrl-C or signal as the
    runner says them; a non-zero exit or a missing hook as an error naming it; else the ranks' figures."""
    if proc.interrupted:
        return (
            "interrupted",
            "stopped by Ctrl-C (SIGINT), SIGTERM or SIGHUP; the command and its children were killed",
            {},
        )
    if proc.timed_out:
        return "timeout", f"no result within the {timeout_s:g} s timeout; the command and its children were killed", {}
    code = proc.returncode
    if code is not None and code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        kills_after = hostmem.oom_kills()
        if (
            -code == signal.SIGKILL
            and kills_before is not None
            and kills_after is not None
            and kills_after > kills_before
        ):
            return "oom", "killed by the kernel's OOM killer (host memory)", {}
        return "crashed", f"the command was killed by signal {name}", {}
    if code:
        said = _failure(tail(log_path, 20000), rank_results(workdir))
        return "error", f"the command exited with code {code}" + (f": {said}" if said else ""), {}
    return combined(rank_results(workdir), exit_code=code)


def reported_settings(given: Any) -> dict[str, Any]:
    """What rank 0's script reported through bench.hook.settings, checked again (the file is the
    script's): its learning rate is also the row's effective one."""
    if not isinstance(given, dict):
        return {}
    try:
        settings = protocol.check_settings(given)
    except ValueError:
        return {}
    if "learning_rate" in settings:
        settings["effective_learning_rate"] = settings["learning_rate"]
    return settings


def _no_result(exit_code: int | None) -> str:
    """Why a rank that started timing has no result."""
    if exit_code is None:
        return "no result (still running at the end)"
    return (
        f"no result: the process ended without writing it and the command exited with code {exit_code} "
        "(os._exit() skips the exit handlers where the hook writes it: call gpubench.close() before it)"
    )


STEPS_APART = 0.10  # ranks whose timed optimizer steps differ by more than this share of the most...
WINDOWS_APART = 0.25  # ...or whose timed windows differ by more than this share of the longest


def disagreement(figures: list[dict[str, Any]]) -> str:
    """Why the ranks' windows are not one window (each rank counted other steps or other seconds:
    a rank calling the hook more often than another, or ranks that never met); "" when they agree."""
    steps = [float(f.get("window_steps") or 0) for f in figures]
    seconds = [float(f.get("window_s") or 0) for f in figures]
    if max(steps) - min(steps) <= STEPS_APART * max(steps) and max(seconds) - min(seconds) <= WINDOWS_APART * max(
        seconds
    ):
        return ""
    each = ", ".join(f"rank {r}: {s:g} steps in {w:.3g} s" for r, (s, w) in enumerate(zip(steps, seconds, strict=True)))
    return (
        f"the ranks timed different windows ({each}; more than {STEPS_APART:.0%} apart in steps or "
        f"{WINDOWS_APART:.0%} in seconds): every rank must call the hook once per optimizer step of the same loop"
    )


def combined(ranks: dict[int, dict[str, Any]], exit_code: int | None = None) -> tuple[str, str, dict[str, Any]]:
    """The row's (status, reason, figures) from every rank's hook result; `exit_code`: the command's,
    when it ended by itself."""
    if not ranks:
        return "error", protocol.NEVER_CALLED, {}
    world = max(int(r.get("world_size") or 1) for r in ranks.values())
    missing = [r for r in range(world) if r not in ranks]
    failed = {r: s for r, s in sorted(ranks.items()) if s.get("status") not in ("ok", "diverged")}
    if missing or failed:
        parts = [f"rank {r}: {s.get('status')}: {s.get('reason') or _no_result(exit_code)}" for r, s in failed.items()]
        if missing:
            parts.append(f"rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} never called the hook")
        first = next(iter(failed.values()), {}).get("status")
        status = first if first in FINAL_STATUSES and first != "ok" else "error"
        text = "; ".join(parts)
        if len(ranks) == 1 and failed:
            text = str(next(iter(failed.values())).get("reason") or text)
        return status, text[:500], {}
    figures = [ranks[r].get("figures") or {} for r in range(world)]
    apart = disagreement(figures) if world > 1 else ""
    if apart:
        return "error", apart[:500], {}
    # several ranks: the built-in rules (a command has no engine figure of its own to combine)
    alone = {k: v for k, v in figures[0].items() if k != "host"}
    row = alone if world == 1 else combine_ranks(figures, "trainer")
    row.update(reported_settings(ranks[0].get("settings")))
    with_loss = [f for f in figures if f.get("loss_finite") is not None]
    status, reason = loss_outcome(with_loss) if with_loss else ("ok", "")
    return status, reason, row
