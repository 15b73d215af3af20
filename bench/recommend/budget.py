"""Where a recommend search's --budget went, said in its answer's `budget:` notes: a race that
measured nothing (the plain recipe's checks used the budget up) and a search that ended past its
budget. The race asks before each probe, so a probe it started runs past; the finalists' loss
checks are kept out of the budget at what the leaders' probes took when each probe started, so a
leader found by the last probe, a compiled one above all (its check compiles again: the MoE's on an
H100 was still compiling 49 s in, against 32 s kept), ends past it too. Measured, not predicted: the figures
are the sitting's own clock (docs/recommend.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def nothing_raced(
    budget_s: float, reference_rows: Sequence[Mapping[str, Any]], kept: float, stages: Sequence[Any]
) -> str:
    """Why the race measured nothing, from what the checks measured, and the budget that would race:
    the plain recipe's checks, the finalists' kept, and one probe a stage at a check's time (mixtral-1b
    at --budget 3m on an H100: its three checks took 98 s, and no probe ran)."""
    walls = walls_of(reference_rows)
    checks, each = sum(walls), mean_wall(reference_rows)
    n = max(1, len(stages))
    minutes = max(1, math.ceil((checks + kept + n * each) / 60))
    return (
        f"the race measured nothing: the plain recipe's {len(walls)} loss checks took {checks:.0f} s of the "
        f"{budget_s:.0f} s budget and {kept:.0f} s was kept for the finalists' checks; about "
        f"--budget {minutes}m lets {'the stage' if n == 1 else f'each of the {n} stages'} probe once"
    )


def walls_of(rows: Sequence[Mapping[str, Any]]) -> list[float]:
    return [float(r["worker_wall_s"]) for r in rows if isinstance(r.get("worker_wall_s"), int | float)]


def mean_wall(rows: Sequence[Mapping[str, Any]]) -> float:
    walls = walls_of(rows)
    return sum(walls) / len(walls) if walls else 0.0


def overran(budget_s: float, wall_s: float, race_end_s: float, checks_s: float, compiled: bool) -> str | None:
    """The note for a search that ended past its budget (None within it): when its race ended, and
    what the finalists' checks took after it."""
    if wall_s <= budget_s:
        return None
    said = (
        f"the search took {wall_s:.0f} s against its --budget of {budget_s:.0f} s: the race ended at {race_end_s:.0f} s"
    )
    if race_end_s > budget_s:
        said += " (the plain recipe's checks, or the probe running when the budget was spent, ended past it)"
    if checks_s > 0:
        said += f", then the finalists' loss checks took {checks_s:.0f} s"
        if compiled:
            said += (
                " (a compiled finalist's check compiles again, which the race could not know before its first probe)"
            )
    return said
