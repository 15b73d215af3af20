"""The results table's schema: statuses and columns, one row per scenario x repeat. A row is a dict
keyed by these columns; a key that is not one is a bug, and `check_row` says so (nothing is dropped
without a word)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..catalogue import CATALOGUE, names
from ..catalogue import NUMERIC_SETTINGS as NUMERIC_SETTINGS  # numeric settings, checked like the figures when read

STATUSES = ("ok", "skipped", "oom", "timeout", "error", "crashed", "diverged", "interrupted")
FINAL_STATUSES = ("ok", "skipped", "oom", "timeout", "error", "crashed", "diverged")
FAILED_STATUSES = ("oom", "timeout", "error", "crashed", "diverged", "interrupted")
FAILURE_SEVERITY = ("interrupted", "crashed", "timeout", "oom", "error", "diverged")  # worst first

# The column groups, in the row's order: each column's unit, meaning and rules are its row in
# bench/catalogue.py (the one place a column is declared).
ID_COLUMNS = list(names("id"))
SETTING_COLUMNS = list(names("setting"))
RAN_COLUMNS = list(names("ran"))
SPEED_COLUMNS = list(names("speed"))
PARALLEL_COLUMNS = list(names("parallel"))
MEMORY_COLUMNS = list(names("memory"))
GPU_COLUMNS = list(names("gpu"))
PROFILE_COLUMNS = list(names("profile"))
PREDICTED_COLUMNS = list(names("predicted"))
FLOP_COLUMNS = list(names("flop"))
LORA_COLUMNS = list(names("lora"))
TRAINING_COLUMNS = list(names("training"))
OTHER_COLUMNS = list(names("other"))
FIGURE_COLUMNS = [c for c in names() if c not in (*ID_COLUMNS, *SETTING_COLUMNS)]  # what a row measured or derived
COLUMNS = list(names())
NUMERIC_COLUMNS = [c.name for c in CATALOGUE if c.name in FIGURE_COLUMNS and not c.text]
NAN_WORDS = ("nan", "-nan", "na", "n/a", "null", "none", "<na>")  # numeric cells that mean missing
# Figures that may be below zero; every other numeric column is a count, a time, a size or a rate.
SIGNED_COLUMNS = tuple(c.name for c in CATALOGUE if c.signed)
NONFINITE_COLUMNS = tuple(c.name for c in CATALOGUE if c.nonfinite)  # a diverged row records the NaN or infinite loss
REQUIRED_COLUMNS = ["scenario", "repeat", "status", "samples_per_s", "peak_mem_mb"]
# The results format (docs/results-format.md): env.json `results_format`. 1: the columns of this
# module, REQUIRED_COLUMNS the least a file needs; a file of a newer format is refused by name.
RESULTS_FORMAT = 1


KNOWN_COLUMNS = frozenset(COLUMNS)


def check_row(row: Mapping[str, Any]) -> None:
    """A row may only hold known columns: a figure missing from COLUMNS would be dropped silently."""
    unknown = sorted(set(row) - KNOWN_COLUMNS)
    if unknown:
        raise ValueError(
            f"result row for {row.get('scenario')!r} has unknown column(s) {', '.join(unknown)}: "
            "add them to bench/catalogue.py"
        )
