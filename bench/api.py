"""The library functions behind the commands: the CLI only parses their arguments and renders."""

from __future__ import annotations

from typing import Any

from . import matrix as matrix_mod
from .planning import plan_scenarios
from .run.session import environment, run
from .run.slurm import run_slurm

__all__ = ["environment", "list_scenarios", "run", "run_slurm"]


def list_scenarios(matrix: str, overrides: dict[str, Any]) -> list[dict[str, Any]]:
    """Each scenario of a matrix with what it changes versus the baseline (or the first scenario), and
    a note where an override left it; refused as `run` refuses (bench/planning.py)."""
    m = matrix_mod.load_matrix(matrix, overrides=overrides)
    scenarios = m.scenarios
    plan_scenarios(scenarios, "cpu")  # what `run` refuses, refused here too (bench/planning.py)
    reference = next((s for s in scenarios if s.name == "baseline"), scenarios[0])
    return [
        {
            "scenario": s,
            "changes": matrix_mod.diff_from(s, reference),
            "reference": reference.name,
            "note": m.notes.get(s.name, ""),  # why a command-line setting left it (bench/matrix.py OWN_FIELDS)
        }
        for s in scenarios
    ]
