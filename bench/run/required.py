"""`gpubench run --require PATTERN`: the scenarios that must run, not be skipped.

A row is `skipped` when its scenario cannot run on this machine (a missing optional package, a GPU
too old, a CUDA-only technique on the CPU): exit 0, by design, for a user trying a matrix. A gate
that expects a row to run says so with --require; a required row that is skipped then makes the run
exit 5 (ExitCode.SKIPPED_REQUIRED), its row still written. Patterns are shell-style globs over
scenario names (fnmatch: `*`, `?`, `[...]`), case-sensitive; `--require '*'` requires every row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from fnmatch import fnmatchcase
from typing import Any

from ..errors import BadInput, ExitCode
from .outcome import RunOutcome


def matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatchcase(name, p) for p in patterns)


def check_patterns(patterns: Sequence[str], names: Sequence[str], origin: str) -> None:
    """Every pattern matches a scenario of the run; one that matches none is bad input (a typo
    would otherwise require nothing, and the gate would pass)."""
    for pattern in patterns:
        if not any(fnmatchcase(name, pattern) for name in names):
            shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
            raise BadInput(
                f"--require {pattern!r} matches no scenario of {origin} ({shown})",
                hint="a pattern is a scenario name or a glob such as 'combo-*'; '*' requires every scenario",
            )


def skipped_required(rows: Iterable[Mapping[str, Any]], patterns: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """(scenario, why) for each required scenario with a skipped row, once each, in row order."""
    found: dict[str, str] = {}
    for row in rows:
        name = str(row["scenario"])
        if row.get("status") == "skipped" and name not in found and matches(name, patterns):
            found[name] = str(row.get("error") or "no reason given")
    return tuple(found.items())


def judge_required(outcome: RunOutcome, patterns: Sequence[str]) -> RunOutcome:
    """A skipped row of a required scenario makes a finished run exit 5, over exit 1 (the failed
    rows are still rows, judged where rows are judged: the summary, compare, history). 4 and 130
    stand, since the run is not done: its skipped rows are final and count again on --resume."""
    skipped = skipped_required(outcome.rows, patterns)
    if not skipped:
        return outcome
    finished = outcome.exit_code in (ExitCode.OK, ExitCode.FAILED)
    code = ExitCode.SKIPPED_REQUIRED if finished else outcome.exit_code
    return replace(outcome, exit_code=code, skipped_required=skipped)


def message(skipped: Sequence[tuple[str, str]]) -> str:
    """One line: the skipped scenarios, those that share a reason together, and why."""
    by_reason: dict[str, list[str]] = {}
    for name, why in skipped:
        by_reason.setdefault(why, []).append(name)
    parts = [f"{', '.join(names)} ({why})" for why, names in by_reason.items()]
    return f"required by --require but skipped: {'; '.join(parts)}"
