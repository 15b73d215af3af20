"""What a run ended with: its rows, its exit code and how it stopped (the runner's, the lanes' and
Slurm's answer alike; bench/run/required.py judges it against --require)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ExitCode


@dataclass(frozen=True)
class RunOutcome:
    rows: list[dict[str, Any]]
    exit_code: ExitCode
    interrupted: bool
    launcher_fallback: str | None = None  # the fork server gave way to spawn: why
    time_limited: bool = False  # --time-limit stopped the run before every scenario ran
    limit_reason: str = ""  # and why the next worker did not start (runner.over_limit)
    skipped_required: tuple[tuple[str, str], ...] = ()  # (scenario, why): skipped, but --require names it
    discarded: bool = False  # interrupted before its first row: what the run wrote in --out is gone
