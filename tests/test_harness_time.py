"""Where a run's wall time went (bench/run/session.harness_time): only the rows this invocation ran."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.run.session import before_rows_parts, harness_time


def at(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


def test_the_share_counts_the_rows_this_run_trained_not_a_resumed_runs() -> None:
    since = 1_800_000_000.0
    rows = [
        {"started_at": at(since - 3600), "train_loop_s": 50.0, "window_s": 40.0},  # an earlier run's row
        {"started_at": at(since + 5), "train_loop_s": 30.0, "window_s": 20.0},
        {"started_at": at(since + 60), "train_loop_s": 10.0, "window_s": 8.0},
        {"started_at": at(since + 90), "status": "skipped"},  # no training loop
    ]
    spent = harness_time(rows, 50.0, since)
    assert spent["rows"] == 2 and spent["train_loop_s"] == 40.0 and spent["window_s"] == 28.0
    assert spent["training_share"] == pytest.approx(0.8)
    assert harness_time([], 0.0, since)["training_share"] is None


def _row(start: float, startup: float, train: float, tail: float) -> dict[str, object]:
    return {"started_at": at(start), "train_loop_s": train, "startup_s": startup, "overhead_s": startup + tail}


@given(
    st.lists(st.tuples(*[st.floats(0, 100, allow_nan=False)] * 3), min_size=1, max_size=8),
    st.floats(0, 50, allow_nan=False),
    st.floats(0, 50, allow_nan=False),
    st.floats(0, 50, allow_nan=False),
)
def test_the_rest_is_told_apart_and_the_parts_add_up_to_the_wall(
    rows: list[tuple[float, float, float]], before: float, after: float, gaps: float
) -> None:
    since = 1_800_000_000.0
    made = [_row(since + i, *r) for i, r in enumerate(rows)]
    wall = before + after + gaps + sum(sum(r) for r in rows)
    spent = harness_time(made, wall, since, {"before_rows_s": before, "after_rows_s": after})
    parts = ("before_rows_s", "rows_startup_s", "rows_teardown_s", "between_rows_s", "after_rows_s")
    assert spent["rows_startup_s"] == pytest.approx(sum(r[0] for r in rows))
    assert spent["rows_teardown_s"] == pytest.approx(sum(r[2] for r in rows), abs=1e-6)
    assert spent["between_rows_s"] == pytest.approx(gaps, abs=1e-6)
    assert sum(spent[k] for k in parts) + spent["train_loop_s"] == pytest.approx(wall)


def test_a_row_without_its_timing_leaves_the_rest_untold_rather_than_put_in_between() -> None:
    since = 1_800_000_000.0
    made = [_row(since, 1.0, 10.0, 0.5), {"started_at": at(since + 20), "train_loop_s": 10.0}]  # no startup_s
    spent = harness_time(made, 30.0, since, {"before_rows_s": 5.0, "after_rows_s": 1.0})
    assert spent["training_share"] == pytest.approx(20 / 30) and "between_rows_s" not in spent


def test_the_time_line_names_the_rest_where_it_was_told_apart_and_says_so_where_not() -> None:
    from bench.results.harness import time_line

    told = {"wall_s": 100.0, "train_loop_s": 90.0, "training_share": 0.9, "rows": 3}
    older = {"harness_time": told}  # an env.json from before the rest was told apart
    assert time_line(older) == (
        "time: 100 s, 90% of it in the training loops (3 rows; the rest: start-up, imports, probes, between workers)"
    )
    parts = {"before_rows_s": 4.0, "rows_startup_s": 2.0, "rows_teardown_s": 1.5, "between_rows_s": 0.5}
    line = time_line({"harness_time": told | parts | {"after_rows_s": 2.0}})
    assert line is not None and line.endswith(
        "(3 rows; the rest: 4.0 s before the first row, 2.0 s starting the rows, 1.5 s ending them,"
        " 0.5 s between rows, 2.0 s after the last)"
    )
    assert time_line({"harness_time": told | {"rows": 0}}) is None  # trained nothing: no line


@given(st.lists(st.one_of(st.none(), st.floats(0, 30, allow_nan=False), st.just("damaged")), min_size=1, max_size=6))
def test_the_rows_wait_for_their_fork_server_is_the_sum_of_their_forked_steps(forked: list[object]) -> None:
    """`rows_server_wait_s`: each row's launch-to-fork step (startup_breakdown's `forked`); a spawned
    row (no such step) or an unreadable breakdown adds nothing, and no forked row means no figure."""
    import json

    since = 1_800_000_000.0
    made = []
    for i, f in enumerate(forked):
        row = _row(since + i, 2.0, 10.0, 0.5)
        steps = {"cuda_ready": 0.3} | ({} if f is None or f == "damaged" else {"forked": f})
        row["startup_breakdown"] = "{not json" if f == "damaged" else json.dumps(steps)
        made.append(row)
    spent = harness_time(made, 100.0, since, {"before_rows_s": 1.0, "after_rows_s": 0.0})
    waits = [f for f in forked if isinstance(f, float)]
    if waits:
        assert spent["rows_server_wait_s"] == pytest.approx(sum(waits))
    else:
        assert "rows_server_wait_s" not in spent


def test_the_time_before_the_first_row_is_told_apart_from_the_marks_the_command_took() -> None:
    marks = {"planned": 13.0, "environment": 15.5, "ceiling_from": 15.6, "ceiling_to": 23.6}
    assert before_rows_parts(10.0, marks) == {
        "before_rows": {"planning_s": 3.0, "environment_s": 2.5, "ceiling_s": pytest.approx(8.0)}
    }
    assert before_rows_parts(10.0, {"planned": 11.0}) == {"before_rows": {"planning_s": 1.0}}
    assert before_rows_parts(10.0, {}) == {}  # refused before planning ended: nothing told


def test_the_time_line_tells_the_parts_before_the_rows_and_the_wait_for_the_fork_server() -> None:
    from bench.results.harness import time_line

    told = {"wall_s": 532.0, "train_loop_s": 493.7, "training_share": 0.928, "rows": 12, "after_rows_s": 0.0}
    parts = {"before_rows_s": 13.3, "rows_startup_s": 19.7, "rows_teardown_s": 4.6, "between_rows_s": 1.1}
    split = {"before_rows": {"planning_s": 3.1, "environment_s": 2.2, "ceiling_s": 8.0}, "rows_server_wait_s": 10.4}
    line = time_line({"harness_time": told | parts | split})
    assert line is not None and line.endswith(
        "(12 rows; the rest: 13.3 s before the first row (planning 3.1 s, the environment 2.2 s, the matmul"
        " ceiling 8.0 s), 19.7 s starting the rows (10.4 s of it waiting for the fork server), 4.6 s ending"
        " them, 1.1 s between rows, 0.0 s after the last)"
    )
