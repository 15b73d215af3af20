"""The capacity search's steps where a wrong operator would go unseen (make mutation): the gallop's
doubling, the bisection's midpoint, the clamps to the range, the budget and the reason it stopped."""

from __future__ import annotations

import pytest

from bench.fit.search import next_value, search


def test_next_value_gallops_doubling_and_bisects() -> None:
    assert next_value(10, 1, 100, None, None, 1) == (10, 1)
    assert next_value(0, 1, 100, None, None, 1) == (1, 1) and next_value(500, 1, 100, None, None, 1) == (100, 1)
    assert next_value(10, 1, 100, 10, None, 1) == (11, 2)
    assert next_value(10, 1, 100, 11, None, 2) == (13, 4)
    assert next_value(10, 1, 100, 98, None, 4) == (100, 8)
    assert next_value(10, 1, 100, 100, None, 4) == (None, 4)
    assert next_value(10, 1, 100, None, 10, 1) == (9, 2)
    assert next_value(10, 1, 100, None, 9, 2) == (7, 4)
    assert next_value(10, 1, 100, None, 3, 4) == (1, 8)
    assert next_value(10, 1, 100, None, 1, 4) == (None, 4)
    assert next_value(10, 1, 100, 10, 20, 8) == (15, 8)
    assert next_value(10, 1, 100, 10, 13, 8) == (11, 8)
    assert next_value(10, 1, 100, 10, 12, 8) == (11, 8)
    assert next_value(10, 1, 100, 10, 11, 8) == (None, 8)


def test_a_search_from_below_and_from_above() -> None:
    up = search(10, lambda v: "ok" if v <= 20 else "oom", 20, 1, 100)
    assert [p.value for p in up.probes] == [10, 11, 13, 17, 25, 21, 19, 20]
    assert (up.largest_ok, up.smallest_oom, up.exact, up.stopped) == (20, 21, True, "bracket closed")
    down = search(30, lambda v: "ok" if v <= 20 else "oom", 20, 1, 100)
    assert [p.value for p in down.probes] == [30, 29, 27, 23, 15, 19, 21, 20]
    assert (down.largest_ok, down.smallest_oom, down.exact) == (20, 21, True)


def test_the_budget_and_the_ends() -> None:
    short = search(10, lambda v: "ok" if v <= 20 else "oom", 3, 1, 100)
    assert short.probe_count == 3 and short.stopped == "probe budget (3) spent" and not short.exact
    assert (short.largest_ok, short.smallest_oom) == (13, None)
    exact = search(10, lambda v: "ok", 1, 1, 10)  # the range's end fits: known before the budget is checked
    assert exact.probe_count == 1 and exact.stopped == "the largest value tried (10) fits" and exact.exact
    top = search(10, lambda v: "ok", 5, 1, 10)
    assert top.exact and top.largest_ok == 10 and top.stopped == "the largest value tried (10) fits"
    bottom = search(3, lambda v: "oom", 5, 3, 10)
    assert bottom.exact and bottom.smallest_oom == 3 and bottom.stopped == "the smallest value (3) does not fit"
    one = search(5, lambda v: "ok", 1, 5, 5)
    assert one.exact and one.largest_ok == 5
    with pytest.raises(ValueError, match="empty"):
        search(1, lambda v: "ok", 3, 5, 4)
    with pytest.raises(ValueError, match="empty"):
        search(1, lambda v: "ok", 3, 0, 4)
    assert search(1, lambda v: "ok", 1, 1, 1).largest_ok == 1


def test_the_default_range_is_1_to_65536() -> None:
    assert [p.value for p in search(0, lambda v: "oom", 5).probes] == [1]
    assert [p.value for p in search(10**6, lambda v: "ok", 5).probes] == [65_536]
