"""`gpubench recommend --twin DIR`: a staged answer judged against its exhaustive twin.

The twin is a finished `gpubench recommend --exhaustive` of the same search (the same settings in
env.json but --exhaustive, --record and the rounds: the same model, cap, space and objective). Its
best is its winner: every candidate measured 3 times, the finalists' loss judged. The staged winner
is then read off the twin's own probes, so the gap compares two candidates measured side by side in
one sitting, not two searches' figures taken apart: the winner's figure there over the twin's best,
the ratio of the geometric means of their probes with a 95% t interval (bench/verify/verdict.ratio,
as verify judges a claim), judged against "within TOLERANCE_PCT of the best" (`holds`, `does not
hold`, `inconclusive`). The same recipe is exactly 1. The time of each search is its `search_s`
over its sittings, so "in N GPU-minutes" is measured, not argued."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..results import read_env
from ..verify.verdict import Effect, Measurement, judge, ratio
from .answer import Answer, TwinCheck, read_answer
from .race import BUDGET_SPENT
from .resume import FLAGS, SETTINGS_KEY, earlier_rows

TOLERANCE_PCT = 5.0  # the target: the staged answer within 5% of the exhaustive best
NOT_COMPARED = ("exhaustive", "exhaustive_rounds", "record")  # what a twin differs in by design


@dataclass(frozen=True)
class Twin:
    """A finished exhaustive search, read once at plan time."""

    path: Path
    answer: Answer
    rows: Mapping[tuple[str, int], Mapping[str, Any]]
    card: str | None = None  # the GPU it was measured on (env.json gpu.name); None: the CPU


def load_twin(path: Path, settings: Mapping[str, Any]) -> Twin:
    """The twin in `path`, checked before any work: BadInput (one line) unless it is a finished
    exhaustive search of the same question."""
    env = read_env(path) or {}
    stored = (env.get("recommend") or {}).get(SETTINGS_KEY)
    answer = read_answer(path) if path.is_dir() else None
    if not isinstance(stored, dict) or answer is None:
        raise BadInput(
            f"--twin {path}: not a gpubench recommend directory (no recommend.json and settings in its env.json)",
            hint="give the --out of a finished `gpubench recommend --exhaustive`",
        )
    if not stored.get("exhaustive"):
        raise BadInput(f"--twin {path}: a staged search, not an --exhaustive one", hint="run its --exhaustive twin")
    if answer.stopped == BUDGET_SPENT:
        raise BadInput(
            f"--twin {path}: the exhaustive search is unfinished (its budget ran out)",
            hint=f"finish it with the same command and --out {path} --resume",
        )
    for key, value in settings.items():
        if key not in NOT_COMPARED and stored.get(key) != value:
            raise BadInput(
                f"--twin {path}: made with {FLAGS.get(key, key)} = {stored.get(key)!r}, not {value!r}",
                hint="the twin must search the same question: the same flags but --exhaustive",
            )
    return Twin(path, answer, earlier_rows(path), (env.get("gpu") or {}).get("name"))


def check_same_card(twin: Twin, gpu: Mapping[str, Any] | None) -> None:
    """BadInput (one line) unless the twin was measured on this model of GPU (its name), or both on the
    CPU: its best is this GPU's only where its probes came from one like it."""
    mine = (gpu or {}).get("name")
    if twin.card != mine:
        raise BadInput(
            f"--twin {twin.path}: measured on {twin.card or 'the CPU'}, and this search runs on {mine or 'the CPU'}",
            hint="the twin must come from the same model of GPU: run its --exhaustive on this one",
        )


def check_against(
    answer: Answer, twin: Twin, figure: Callable[[Mapping[str, Any]], float | str], objective: str
) -> TwinCheck:
    """`answer`'s winner judged on the twin's probes against the twin's best."""

    def values(name: str | None) -> list[float]:
        found = (figure(r) for (scenario, _), r in sorted(twin.rows.items()) if scenario == name)
        return [v for v in found if isinstance(v, float)]

    best = twin.answer.winner
    probes = sum(1 for r in twin.rows.values() if not str(r.get("scenario", "")).startswith("parity."))
    shown = {c.name: c for c in twin.answer.candidates}

    def stored(name: str | None) -> float | None:
        """The figure the twin's answer shows for `name` (its table's)."""
        c = shown.get(name or "")
        return None if c is None else c.energy_per_sample_j if objective == "energy" else c.samples_per_s

    def made(verdict: str, why: str, gap: Measurement | None = None) -> TwinCheck:
        interval = gap is not None and gap.low == gap.low  # nan: no interval (fewer than 2 probes a side)
        best_value = None if gap is None else stored(best)
        return TwinCheck(
            twin=str(twin.path), best=best, best_value=best_value,
            winner_value=None if gap is None else stored(answer.winner),
            ratio=None if gap is None else gap.value, low=gap.low if gap and interval else None,
            high=gap.high if gap and interval else None, verdict=verdict, why=why, search_s=answer.search_s,
            twin_search_s=twin.answer.search_s, twin_probes=probes, tolerance_pct=TOLERANCE_PCT,
        )  # fmt: skip

    if best is None:
        return made("not comparable here", "the twin recommends nothing")
    if answer.winner is None:
        return made("does not hold", "this search recommends nothing")
    theirs, ours = values(best), values(answer.winner)
    if not ours:
        return made("does not hold", f"{answer.winner} has no ok probe in the twin")
    if answer.winner == best:
        return made("holds", "the same recipe", Measurement.exact(1.0))
    gap = ratio(theirs, ours)  # of the geometric means of their probes, with its interval
    verdict = judge(Effect(1.0, "higher", TOLERANCE_PCT), gap)
    return made(verdict.verdict, verdict.why, gap)
