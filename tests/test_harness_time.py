"""Where a run's wall time went (bench/run/session.harness_time): only the rows this invocation ran."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bench.run.session import harness_time


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
