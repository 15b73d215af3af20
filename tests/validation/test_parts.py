"""`validation/parts.py`: every child of the validation scripts runs under a timeout, and one that
outlives it is stopped with one line saying so. Fast: part of the default suite."""

from __future__ import annotations

import sys
import time

import pytest

from validation import parts


def test_a_child_that_outlives_its_timeout_is_stopped_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    start = time.monotonic()
    code = parts.run_child("sleeper", [sys.executable, "-c", "import time; time.sleep(600)"], timeout_s=0.5)
    assert code == parts.TIMED_OUT
    assert time.monotonic() - start < 120  # SIGTERM ended it; no wait for the sleep (a hang guard, far above)
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == "sleeper: still running after its 0.5 s timeout; stopped"


def test_a_child_that_ends_gives_its_exit_code() -> None:
    assert parts.run_child("ok", [sys.executable, "-c", "raise SystemExit(3)"], timeout_s=600) == 3


def test_a_childs_timeout_is_the_time_left_and_a_margin_or_a_large_guard_without_a_deadline() -> None:
    assert parts.child_timeout_s(None) == parts.NO_DEADLINE_TIMEOUT_S >= 12 * 3600
    left = parts.child_timeout_s(time.monotonic() + 100) - parts.PAST_DEADLINE_S
    assert 90 < left <= 100
    assert parts.child_timeout_s(time.monotonic() - 5) == parts.PAST_DEADLINE_S  # spent: the margin alone
