"""What the parent and gpubench's step hook agree on (torch-free; the parent imports it).

The parent (bench/run/command.py) starts a command with these variables set; each process of the
command that calls the hook writes `hook-rank-N.json` into GPUBENCH_HOOK_DIR: `running` with its
pid at its first step, then at its end the worker's result shape (status, reason, figures) with its
rank and the job's world size. Without GPUBENCH_HOOK_DIR the hook does nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

DIR_VAR = "GPUBENCH_HOOK_DIR"  # where the rank files go; its presence switches the hook on
WARMUP_VAR = "GPUBENCH_WARMUP_STEPS"  # optimizer steps before the timed window
WINDOW_VAR = "GPUBENCH_WINDOW"  # "epoch" (to the loop's end), "auto" or a number of steps
DEVICE_VAR = "GPUBENCH_DEVICE"  # "cpu" or "cuda": where the parent runs the scenario
LAUNCHED_VAR = "GPUBENCH_LAUNCHED_AT"  # the parent's time.time() at launch (startup_s)
TIMEOUT_VAR = "GPUBENCH_TIMEOUT_S"  # the scenario's timeout (collectives' own timeout)
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
