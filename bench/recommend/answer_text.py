"""The answer as a terminal table's rows, markdown, or JSON: one Answer, rendered at the edge."""

from __future__ import annotations

import json

from .answer import Answer, CandidateResult, TwinCheck

HEADER = ("candidate", "outcome", "samples/s", "peak MB", "pred MB", "J/sample", "bound", "parity", "why")
ORDER = {"winner": 0, "runner-up": 1, "raced": 2, "eliminated": 3, "failed": 4, "pruned": 5, "skipped": 6}


def outcome(answer: Answer, r: CandidateResult) -> str:
    if r.name == answer.winner:
        return "winner"
    if r.name == answer.runner_up:
        return "runner-up"
    return r.outcome


def ordered(answer: Answer) -> list[CandidateResult]:
    return sorted(answer.candidates, key=lambda r: (ORDER.get(outcome(answer, r), 9), -(r.objective or 0)))


def _fig(value: float | None, digits: int = 1) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def _seconds(answer: Answer) -> str:
    """This sitting's wall time, and the whole search's over its sittings when it was resumed."""
    if not answer.earlier_sittings_s:
        return f"{answer.wall_s:.0f} s"
    n = len(answer.earlier_sittings_s) + 1
    return f"{answer.wall_s:.0f} s this sitting, {answer.search_s:.0f} s over the search's {n} sittings"


def predicted(r: CandidateResult) -> str:
    """The memory model's peak, or ">=" its lower bound where it predicts no activations."""
    if r.pred_peak_allocated_mb is None and r.pred_peak_min_mb is not None:
        return f">={_fig(r.pred_peak_min_mb, 0)}"
    return _fig(r.pred_peak_allocated_mb, 0)


def row_cells(answer: Answer, r: CandidateResult) -> list[str]:
    return [
        r.name, outcome(answer, r), _fig(r.samples_per_s, 2), _fig(r.peak_mem_mb, 0),
        predicted(r), _fig(r.energy_per_sample_j, 3), r.bound or "", r.parity, r.why,
    ]  # fmt: skip


def table_rows(answer: Answer, limit: int | None = 20) -> tuple[list[list[str]], int]:
    """The rows to print, best first, and how many were left out (all of them are in --format json)."""
    rows = [row_cells(answer, r) for r in ordered(answer)]
    if limit is None or len(rows) <= limit:
        return rows, 0
    return rows[:limit], len(rows) - limit


def summary_lines(answer: Answer) -> list[str]:
    counts: dict[str, int] = {}
    for r in answer.candidates:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1
    said = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    lines = [
        f"recommended ({answer.objective}): {answer.winner or 'none'}"
        + (f"; runner-up: {answer.runner_up}" if answer.runner_up else ""),
        f"candidates: {len(answer.candidates)} ({said}); race: {answer.stopped}; {_seconds(answer)}",
    ]
    for i, s in enumerate(answer.stages, start=1):
        lines.append(
            f"stage {i} ({' x '.join(s.axes)}): {s.candidates} candidates, {s.measured} measured in "
            f"{s.probes} probe{'' if s.probes == 1 else 's'}; leader {s.leader or 'none'} ({s.stopped})"
        )
    if answer.pareto:
        judged = {r.name: r.parity for r in answer.candidates}
        front = [n if judged.get(n) else f"{n} (loss not judged)" for n in answer.pareto]
        lines.append("Pareto front (samples/s, peak memory, J/sample; no deviating row): " + ", ".join(front))
    if answer.twin is not None:
        lines.append(twin_line(answer.twin, answer.objective))
    lines += [f"lost: {line}" for line in answer.lost]
    lines += [f"note: {line}" for line in answer.notes]
    return lines


def twin_line(check: TwinCheck, objective: str) -> str:
    """--twin's line: the gap to the exhaustive best, its verdict, and the two searches' times."""
    times = (
        f"this search {check.search_s:.0f} s ({check.search_s / 60:.1f} GPU-minutes) against the twin's "
        f"{check.twin_search_s:.0f} s ({check.twin_probes} probes)"
    )
    if check.ratio is None or check.best_value is None or check.winner_value is None:
        return f"exhaustive twin {check.twin}: {check.verdict} ({check.why}); {times}"
    interval = "" if check.low is None or check.high is None else f" ({check.low:.3f}-{check.high:.3f})"
    why = f" ({check.why})" if check.why else ""
    unit = "J/sample" if objective == "energy" else "samples/s"
    return (
        f"exhaustive twin {check.twin}: its best {check.best} at {check.best_value:.4g} {unit}; this winner "
        f"there {check.winner_value:.4g} {unit}, {check.ratio:.3f}x on {objective}{interval}; within "
        f"{check.tolerance_pct:g}% of the best: {check.verdict}{why}; {times}"
    )


def markdown(answer: Answer) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(cell(c) for c in row_cells(answer, r)) + " |" for r in ordered(answer)]
    return "\n".join(["## gpubench recommend", "", *(f"- {cell(s)}" for s in summary_lines(answer)), "", *lines]) + "\n"


def as_json(answer: Answer) -> str:
    return json.dumps(answer.to_json(), indent=2, allow_nan=False, default=str) + "\n"
