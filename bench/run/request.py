"""What the user asked `gpubench run` for, and the checks that need no file and no child process.

Bad input is caught before any work (exit 2), so no GPU time is spent on a run that cannot be right."""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import cpus
from ..checks import MAX_REPEATS, MAX_SECONDS, ascii_digits, bounded
from ..errors import BadInput
from ..planner.matrix import MAX_PARITY_SEEDS
from ..safetext import check_plain
from .launcher import DEFAULT_LAUNCHER, LAUNCHERS

DEFAULT_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class RunRequest:
    matrix: str | None = None
    model: str | None = None
    device: str = "auto"
    only: list[str] | None = None
    repeats: int = 1
    out: Path | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    overrides: dict[str, Any] = field(default_factory=dict)  # samples, seq_len, warmup_steps, engine
    exclusive: bool = False
    sample_memory: bool = True  # the NVML sampler thread in this process
    resume: Path | None = None
    retry_failed: bool = False  # with resume: failed rows are run again
    command: list[str] = field(default_factory=list)
    launcher: str = DEFAULT_LAUNCHER  # fork: one fork server per run; spawn: a fresh interpreter each
    time_limit_s: float | None = None  # start no worker that would end after this many seconds
    cpu_affinity: str | None = None  # "2-5": the CPUs the workers may use (Linux)
    report: bool = True  # write DIR/report.html at the end (`gpubench report DIR` writes it later)
    ceiling: bool = True  # measure the matmul ceiling on a GPU before the first worker (env.json)
    preflight: bool = True  # time the collectives once per world size before multi-process scenarios (env.json)
    require: tuple[str, ...] = ()  # scenario globs whose skipped row fails the run (exit 5)
    cmd: str | None = None  # `--cmd "torchrun ... train.py"`: the user's script as the one scenario
    cmd_name: str = "cmd"  # that scenario's name
    parity_seeds: int | None = None  # the loss reference's seeds (docs/parity.md); None: the matrix's
    lanes: str | None = None  # --lanes N|all: single-GPU scenarios at once, one per GPU


def check_request(request: RunRequest) -> tuple[int, ...] | None:
    """The flags that need no file or child: bad values are BadInput before anything starts.
    Returns the CPUs of --cpu-affinity, checked against this machine."""
    bounded(request.repeats, f"--repeats {request.repeats}", 1, MAX_REPEATS, whole=True)
    for flag, path in (("--out", request.out), ("--resume", request.resume)):
        if path is not None:  # a newline there would be a new line of a Slurm job's script
            check_plain(str(path), flag)
    bounded(request.timeout_s, f"--timeout {request.timeout_s}", 0, MAX_SECONDS, above=True, unit="seconds")
    if request.time_limit_s is not None:
        limit = request.time_limit_s
        bounded(limit, f"--time-limit {limit}", 0, MAX_SECONDS, above=True, unit="seconds")
    if request.parity_seeds is not None:
        bounded(request.parity_seeds, f"--parity-seeds {request.parity_seeds}", 1, MAX_PARITY_SEEDS, whole=True)
        if request.resume is not None:
            raise BadInput("--parity-seeds plans new scenarios: give it to a new run, not with --resume")
    if request.retry_failed and request.resume is None:
        raise BadInput("--retry-failed needs --resume DIR", hint="it runs again the failed rows of an earlier run")
    if request.launcher not in LAUNCHERS:
        raise BadInput(f"--launcher {request.launcher!r} is not one of {', '.join(LAUNCHERS)}")
    if request.launcher == "fork" and DEFAULT_LAUNCHER != "fork":
        raise BadInput("--launcher fork needs Linux (os.fork)", hint="use --launcher spawn")
    return cpus.check(request.cpu_affinity) if request.cpu_affinity is not None else None


def check_device_name(requested: str) -> None:
    if requested not in ("auto", "cpu", "cuda") and not (requested.startswith("cuda:") and ascii_digits(requested[5:])):
        raise BadInput(f"--device {requested!r} is not one of auto, cpu, cuda, cuda:N")


def check_writable(out: Path, resume: bool = False) -> None:
    """--out can be created and written (or the folder of --resume written); a refused one leaves
    none of the folders it made. The message names the option the folder came from."""
    missing = [p for p in (out, *out.parents) if not p.exists()]  # deepest first
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write-test-"):
            pass
    except OSError as exc:
        for made in missing:
            with contextlib.suppress(OSError):
                made.rmdir()  # only the empty folders this call made
        if resume:
            hint = "the run is finished in its own folder: make it writable, then resume again"
            raise BadInput(f"--resume {out}: cannot write there: {exc.strerror or exc}", hint=hint) from None
        raise BadInput(
            f"--out {out}: cannot write there: {exc.strerror or exc}", hint="choose another directory with --out"
        ) from None
