"""Slurm's commands as gpubench calls them: argument lists, no shell, a timeout each. `check_tools`
finds every command a submitted job needs before anything is written or submitted."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ..errors import BadInput, GpubenchError
from .proc import run_captured

COMMAND_TIMEOUT_S = 60.0
# a job in one of these has ended (squeue's, sacct's and scontrol's words)
ENDED = frozenset(
    ("BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED")
    + ("REVOKED", "SPECIAL_EXIT", "TIMEOUT")
)


NEEDED = ("sbatch", "squeue", "scancel")  # submit the job, watch it, cancel it on Ctrl-C


class SlurmError(GpubenchError):
    """A Slurm command failed (sbatch refused the job, the controller did not answer)."""


def call(cmd: Sequence[str], timeout_s: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """`cmd` under a reaper of this process (proc.run_captured), as every child gpubench starts: a
    Slurm command left waiting (an squeue on a controller that does not answer) ends with gpubench,
    even when gpubench is SIGKILLed, and at its own timeout with everything it started."""
    if shutil.which(cmd[0]) is None:
        raise BadInput(f"{cmd[0]}: not found", hint="--launcher slurm needs Slurm's commands (sbatch, squeue) on PATH")
    try:
        return run_captured(cmd, timeout_s)
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{' '.join(cmd[:2])}: no answer within {timeout_s:g} s") from None


def check_tools() -> None:
    """BadInput naming every command of NEEDED that is not on PATH (before the plan writes anything)."""
    missing = [tool for tool in NEEDED if shutil.which(tool) is None]
    if missing:
        raise BadInput(
            f"--launcher slurm: {', '.join(missing)} not found on PATH (it needs {', '.join(NEEDED)})",
            hint="run it where Slurm's commands are (a login node), or write the job's script with --print-script",
        )


def _why(done: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in (done.stderr or done.stdout or "").splitlines() if ln.strip()]
    return lines[-1].strip() if lines else f"exit code {done.returncode}"


def submit(script: Path) -> str:
    """sbatch the script; the job id."""
    done = call(["sbatch", "--parsable", str(script)])
    job = done.stdout.strip().split(";")[0]
    if done.returncode != 0 or not job.isdigit():
        raise SlurmError(
            f"sbatch {script}: {_why(done)}",
            hint="fix the options sbatch names; --print-script writes the job's script without submitting it",
        )
    return job


def state(job: str) -> str | None:
    """The job's state (PENDING, RUNNING, COMPLETED, CANCELLED, ...): squeue while the controller
    lists it, then sacct (accounting), then scontrol (recently ended jobs); None when none knows it."""
    done = call(["squeue", "-h", "-t", "all", "-j", job, "-o", "%T"])
    if done.returncode == 0 and done.stdout.strip():
        return done.stdout.split()[0]
    if shutil.which("sacct") is not None:
        done = call(["sacct", "-n", "-X", "-P", "-j", job, "-o", "State"])
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.split()[0].rstrip("+")  # "CANCELLED by 0" -> CANCELLED
    if shutil.which("scontrol") is None:
        return None
    done = call(["scontrol", "show", "job", "-o", job])
    for word in done.stdout.split() if done.returncode == 0 else []:
        if word.startswith("JobState="):
            return word.split("=", 1)[1]
    return None


def ended(job_state: str | None) -> bool:
    return job_state is None or job_state in ENDED


def cancel(job: str) -> None:
    done = call(["scancel", job])
    if done.returncode != 0:
        raise SlurmError(f"scancel {job}: {_why(done)}")
