"""The library functions behind the commands: the CLI only parses their arguments and renders."""

from __future__ import annotations

from typing import Any

from . import matrix as matrix_mod
from .models import resolve_model
from .run.session import environment, run
from .run.slurm import run_slurm

__all__ = ["environment", "list_scenarios", "run", "run_slurm"]


def list_scenarios(matrix: str, overrides: dict[str, Any]) -> list[dict[str, Any]]:
    """Each scenario of a matrix with what it changes versus the baseline (or the first scenario)."""
    m = matrix_mod.load_matrix(matrix, overrides=overrides)
    scenarios = m.scenarios
    for model in {s.model for s in scenarios}:
        resolve_model(model, "cpu")  # an unknown model name is an error here too
    reference = next((s for s in scenarios if s.name == "baseline"), scenarios[0])
    return [
        {"scenario": s, "changes": matrix_mod.diff_from(s, reference), "reference": reference.name} for s in scenarios
    ]
