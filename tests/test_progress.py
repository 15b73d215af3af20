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


def test_the_eta_never_reaches_past_the_time_limit() -> None:
    """recommend's H100 runs printed 'ETA 0:25:17' for a 4-minute budget (the staged search's
    candidates counted, not the budget that ends it): the ETA is capped by the deadline, and says so."""
    import time

    def eta(total: int, deadline_in: float) -> str:
        reporter = RichReporter(Console(file=io.StringIO(), force_terminal=False, width=200))
        reporter.start(total, 0, deadline=time.monotonic() + deadline_in)
        reporter.ran, reporter.done, reporter.started_at = 1, 1, time.monotonic() - 10.0  # one worker: 10 s
        return reporter.eta_text()

    capped = eta(1000, 240.0)  # 999 workers left at 10 s: 2.8 hours by the mean; the limit is sooner
    assert capped.endswith(", the time limit") and capped.startswith(("  ETA 0:03:5", "  ETA 0:04:00")), capped
    free = eta(3, 3600.0)  # 2 left at 10 s: 20 s, well inside the limit
    assert free.startswith("  ETA 0:00:2") and "time limit" not in free, free


def test_a_race_counts_its_workers_without_a_total_and_its_eta_is_the_deadline() -> None:
    """recommend's race runs until it decides or its budget ends: a total counted ahead (the stages'
    first rounds) was passed on the CPU, `[29/28]` ... `[44/28]`. With none known, a line shows only
    the count, and the ETA is the deadline's."""
    import time

    out = io.StringIO()
    reporter = RichReporter(Console(file=out, force_terminal=False, width=200))
    reporter.start(None, 0, deadline=time.monotonic() + 240.0)
    for i in range(3):
        row = {"scenario": f"c{i}", "repeat": 0, "status": "ok", "samples_per_s": 2.0}
        reporter.scenario_start(Scenario(name=row["scenario"]), 0)
        reporter.scenario_end(row)
    reporter.finish()
    lines = out.getvalue().rstrip("\n").splitlines()
    assert lines[0].startswith("  workers until the search decides, by 0:04:00 at the latest; the first waits")
    assert [line.split("]")[0] for line in lines[1:]] == ["  [1", "  [2", "  [3"], lines
    assert all(", the time limit" in line and "ETA at most 0:0" in line for line in lines[1:]), lines
