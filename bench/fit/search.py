"""The capacity search as a pure function: given a first guess (the memory model's predicted
largest value) and a probe that says whether a value trains, find the largest value that does
within a budget of probes. Nothing here runs anything: `search` calls the probe it is given, so the
tests drive it with fake outcomes and `gpubench fit` with real short runs (session.py).

The rule, over whole numbers in [low, high], for an outcome that is monotone in the value (a value
that fits means every smaller one fits):
  1. probe the guess;
  2. while only one side is known, gallop away from it: known ok at v -> v+1, v+3, v+7, ...;
     known oom at v -> v-1, v-3, v-7, ... (an exact guess is confirmed in two probes);
  3. once bracketed (largest ok, smallest oom), bisect until they are neighbours;
  4. stop when the bracket is closed, the range's end is reached, the budget is spent, or a probe
     fails for another reason than memory (that value says nothing about fitting).
`largest_ok` is always a value a probe ran ok: the search never claims an unprobed value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

FITS, OOM = "ok", "oom"  # a probe's verdicts; any other status stops the search


@dataclass(frozen=True)
class Probed:
    value: int
    status: str  # a results status: ok, oom, or another that stops the search


@dataclass(frozen=True)
class SearchResult:
    probes: tuple[Probed, ...]
    largest_ok: int | None  # the largest value a probe ran ok (None: none did)
    smallest_oom: int | None  # the smallest value a probe ran out of memory (None: none did)
    exact: bool  # the answer is known: bracket closed, or the range's end fits, or its start does not
    stopped: str  # why the search ended, one phrase

    @property
    def probe_count(self) -> int:
        return len(self.probes)


def next_value(guess: int, low: int, high: int, ok: int | None, bad: int | None, step: int) -> tuple[int | None, int]:
    """The next value to probe and the gallop step after it; None when the answer is known."""
    if ok is not None and bad is not None:
        return (None, step) if bad - ok <= 1 else ((ok + bad) // 2, step)
    if ok is None and bad is None:
        return min(max(guess, low), high), 1
    if ok is not None:
        return (None, step) if ok >= high else (min(ok + step, high), step * 2)
    assert bad is not None
    return (None, step) if bad <= low else (max(bad - step, low), step * 2)


def search(guess: int, probe: Callable[[int], str], budget: int, low: int = 1, high: int = 65_536) -> SearchResult:
    """Find the largest value in [low, high] for which `probe` returns "ok", with at most `budget` probes."""
    if not 1 <= low <= high:
        raise ValueError(f"search range [{low}, {high}] is empty")
    if budget < 1:
        raise ValueError(f"a search needs a budget of at least one probe, not {budget}")
    ok: int | None = None
    bad: int | None = None
    step = 1
    probes: list[Probed] = []
    while True:
        value, step = next_value(guess, low, high, ok, bad, step)
        if value is None:
            return _result(probes, ok, bad, low, high, "bracket closed" if ok is not None and bad is not None else "")
        if len(probes) >= budget:
            return _result(probes, ok, bad, low, high, f"probe budget ({budget}) spent")
        status = probe(value)
        probes.append(Probed(value, status))
        if status == FITS:
            ok = value
        elif status == OOM:
            bad = value
        else:
            return _result(probes, ok, bad, low, high, f"a probe at {value} ended '{status}', not ok or oom")


def _result(probes: list[Probed], ok: int | None, bad: int | None, low: int, high: int, why: str) -> SearchResult:
    closed = ok is not None and bad is not None and bad - ok == 1
    exact = closed or ok == high or bad == low
    if not why:
        why = f"the largest value tried ({high}) fits" if ok == high else f"the smallest value ({low}) does not fit"
    return SearchResult(tuple(probes), ok, bad, exact, why)
