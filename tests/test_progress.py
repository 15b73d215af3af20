"""The run's progress lines on stderr, as a CI log (no terminal) shows them."""

from __future__ import annotations

import io

from rich.console import Console

from bench.recipe.scenario import Scenario
from bench.run.progress import RichReporter


def lines_of(rows: list[dict], total: int, done: int = 0) -> list[str]:
    out = io.StringIO()
    reporter = RichReporter(Console(file=out, force_terminal=False, width=200))
    reporter.start(total, done)
    for row in rows:
        reporter.scenario_start(Scenario(name=str(row["scenario"])), row["repeat"])
        reporter.scenario_end(row)
    reporter.finish()
    return out.getvalue().rstrip("\n").splitlines()


def test_a_log_gets_i_of_n_status_figure_and_eta() -> None:
    rows = [
        {"scenario": "baseline", "repeat": 0, "status": "ok", "samples_per_s": 12.5},
        {"scenario": "fp16", "repeat": 0, "status": "oom", "error": "CUDA out of memory"},
    ]
    lines = lines_of(rows, total=3)
    assert lines[0] == "  3 worker(s) to run; the first waits while torch and transformers load"
    assert lines[1].startswith("  [1/3] ok          baseline r0     12.50 samples/s  ETA 0:00:")
    assert lines[2].startswith("  [2/3] oom         fp16 r0  CUDA out of memory  ETA 0:00:")
    assert len(lines) == 3


def test_a_resumed_run_counts_from_its_finished_rows_and_the_last_line_has_no_eta() -> None:
    lines = lines_of([{"scenario": "b", "repeat": 1, "status": "ok", "samples_per_s": 1.0}], total=4, done=3)
    assert lines == [
        "  1 worker(s) to run; the first waits while torch and transformers load",
        "  [4/4] ok          b r1      1.00 samples/s",
    ]


def test_an_error_is_not_markup() -> None:
    row = {"scenario": "x", "repeat": 0, "status": "error", "error": "bad [red]thing[/red]"}
    assert lines_of([row], total=1)[1] == "  [1/1] error       x r0  bad [red]thing[/red]"
