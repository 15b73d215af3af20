"""What the parent and gpubench's step hook agree on (torch-free; the parent imports it).

The parent (bench/run/command.py) starts a command with these variables set; each process of the
command that calls the hook writes `hook-rank-N.json` into GPUBENCH_HOOK_DIR: `running` with its
pid at its first step, then at its end the worker's result shape (status, reason, figures) with its
rank and the job's world size. Without GPUBENCH_HOOK_DIR the hook does nothing.
"""

from __future__ import annotations

import json
import math
import os
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..fsio import atomic_write_json

DIR_VAR = "GPUBENCH_HOOK_DIR"  # where the rank files go; its presence switches the hook on
WARMUP_VAR = "GPUBENCH_WARMUP_STEPS"  # optimizer steps before the timed window
WINDOW_VAR = "GPUBENCH_WINDOW"  # "epoch" (to the loop's end), "auto" or a number of steps
DEVICE_VAR = "GPUBENCH_DEVICE"  # "cpu" or "cuda": where the parent runs the scenario
LAUNCHED_VAR = "GPUBENCH_LAUNCHED_AT"  # the parent's time.time() at launch (startup_s)
TIMEOUT_VAR = "GPUBENCH_TIMEOUT_S"  # the scenario's timeout (collectives' own timeout)
ERROR_FILE_VAR = "TORCHELASTIC_ERROR_FILE"  # torchrun's per-rank error file (torch's record decorator's)
NESTED = (
    "a step began inside another (gpubench.step or begin() before the previous step's end()): each optimizer "
    "step is counted once, so nest no steps (with gradient accumulation: one step around the optimizer step, "
    "s.add() per micro-batch; docs/your-script.md)"
)
NEVER_CALLED = (
    "the command never called gpubench's step hook (bench.hook.step, or begin/end, once per optimizer "
    "step: docs/your-script.md)"
)


def rank_file(directory: Path, rank: int) -> Path:
    return directory / f"hook-rank-{rank}.json"


def env_rank(environ: Mapping[str, str] = os.environ) -> tuple[int, int]:
    """(rank, world size) of this process as torchrun (or any launcher setting RANK) says; (0, 1) alone."""
    try:
        return int(environ.get("RANK", "0")), int(environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 0, 1


def window_setting(text: str) -> int | str:
    """GPUBENCH_WINDOW back to the scenario's `window` value."""
    return int(text) if text.isdigit() else text


# what a script may report of itself for its row (bench.hook.settings): the results column and its type
REPORTED_SETTINGS: dict[str, type] = {
    "model": str,
    "task": str,
    "engine": str,
    "precision": str,
    "optimizer": str,
    "data": str,
    "lr_schedule": str,
    "batch_size": int,
    "grad_accum_steps": int,
    "seq_len": int,
    "seed": int,
    "learning_rate": float,
}
MAX_SETTING_CHARS = 200


def _fits(kind: type, value: Any) -> bool:
    if kind is str:
        return isinstance(value, str) and 0 < len(value) <= MAX_SETTING_CHARS
    number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    return number and (kind is float or isinstance(value, int))


SETTING_TYPES = {str: f"a non-empty string of at most {MAX_SETTING_CHARS} characters", int: "a whole number >= 0"}


def check_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """The settings a script reported, as its row holds them; ValueError naming the first bad one."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        kind = REPORTED_SETTINGS.get(key)
        if kind is None:
            raise ValueError(f"bench.hook.settings: unknown setting {key!r}; known: {', '.join(REPORTED_SETTINGS)}")
        if not _fits(kind, value):
            what = SETTING_TYPES.get(kind, "a finite number >= 0")
            raise ValueError(f"bench.hook.settings: {key} = {value!r} must be {what}")
        out[key] = float(value) if kind is float else value
    return out


def failure_text(exc: BaseException) -> str:
    """An exception as a row's reason: "ValueError: bad lr" (its first line)."""
    text = f"{type(exc).__name__}: {exc}".strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:500]


def record_failure(exc: BaseException, session: Any, environ: Mapping[str, str] = os.environ) -> None:
    """The exception that ends this process (the hook's sys.excepthook): into its rank file as an
    error (through its session once a step was seen), and into torchrun's error file when torchrun
    gave one and nothing wrote it (the record decorator writes it itself)."""
    text = failure_text(exc)
    if session is not None:
        session.fail(text)
    else:
        rank, world = env_rank(environ)
        result = {"status": "error", "reason": text, "rank": rank, "world_size": world, "pid": os.getpid()}
        atomic_write_json(rank_file(Path(environ[DIR_VAR]), rank), result)
    error_file = environ.get(ERROR_FILE_VAR)
    if error_file and not os.path.exists(error_file):
        stack = "".join(traceback.format_exception(exc))
        message = {"message": text, "extraInfo": {"py_callstack": stack, "timestamp": str(int(time.time()))}}
        with open(error_file, "w") as fh:
            json.dump({"message": message}, fh)
