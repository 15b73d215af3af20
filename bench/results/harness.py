"""The run's time line: how much of a command's wall time its training loops took, and where the
rest went (env.json `harness_time`, written by bench/run/session.harness_time)."""

from __future__ import annotations

from typing import Any

from .resultdir import last_harness_time, whole_run_harness_time

# env.json `harness_time` keys of the time outside the training loops, and their words, in the order
# they happen
REST = (
    ("before_rows_s", "before the first row"),
    ("rows_startup_s", "starting the rows"),
    ("rows_teardown_s", "ending them"),
    ("between_rows_s", "between rows"),
    ("after_rows_s", "after the last"),
)


# what `before_rows_s` and `rows_startup_s` were told apart into, where the command measured it
BEFORE_ROWS = (("planning_s", "planning"), ("environment_s", "the environment"), ("ceiling_s", "the matmul ceiling"))


def _inside(spent: dict[str, Any], key: str) -> str:
    """ " (planning 3.1 s, ...)" after the time before the first row, " (10.4 s of it waiting for
    the fork server)" after the rows' start; "" where the command did not tell them apart."""
    if key == "before_rows_s" and isinstance(spent.get("before_rows"), dict):
        parts = spent["before_rows"]
        said = [f"{words} {parts[k]:.1f} s" for k, words in BEFORE_ROWS if isinstance(parts.get(k), int | float)]
        return f" ({', '.join(said)})" if said else ""
    if key == "rows_startup_s" and isinstance(spent.get("rows_server_wait_s"), int | float):
        return f" ({spent['rows_server_wait_s']:.1f} s of it waiting for the fork server)"
    return ""


def time_line(env: dict[str, Any] | None) -> str | None:
    """ "time: W s, P% of it in the training loops (R rows; the rest: A s before the first row, ...)"
    for the latest command of the run in `env`, with the whole run's share after a --resume; None
    when that command trained no row."""
    spent = last_harness_time(env)
    if spent.get("training_share") is None or not spent.get("rows"):
        return None
    if all(isinstance(spent.get(key), int | float) for key, _ in REST):
        rest = ", ".join(f"{spent[key]:.1f} s {words}{_inside(spent, key)}" for key, words in REST)
    else:  # an env.json written before the rest was told apart, or a row without its timing
        rest = "start-up, imports, probes, between workers"
    line = (
        f"time: {spent['wall_s']:.0f} s, {spent['training_share']:.0%} of it in the training loops "
        f"({spent['rows']} rows; the rest: {rest})"
    )
    whole = whole_run_harness_time(env)
    if whole["commands"] > 1 and whole["training_share"] is not None:
        line += f"; the run's {whole['commands']} commands: {whole['wall_s']:.0f} s, {whole['training_share']:.0%}"
    return line
