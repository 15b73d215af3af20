"""The answer of `gpubench recommend` as data (recommend.json), and its certificate: a matrix of
the winner and the plain recipe that `gpubench run --matrix` reruns as is.

A candidate's speed, energy and MFU are the geometric means of its ok probes (the race's rounds),
the statistic the race ranks by, so the table, the winner and the --twin line show one figure (the
table showed medians while the race ranked geometric means, 88.19 against 88.33 on the Liger twin);
its peak memory and predictions are medians. Its parity verdict comes from the finalists' loss check
(bench/results/parity.py) and is empty for a candidate not judged. A candidate judged `deviates` or
`diverged` cannot win. The Pareto front (samples/s up, peak memory down, J/sample down where
measured) is over the measured candidates not judged to deviate."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..fmt import toml_value
from ..fsio import atomic_write_json
from .race import MIN_ROUNDS, Entry
from .space import PLAIN, AxisNote, Candidate
from .stages import FRONTIER, StageReport

ANSWER_JSON = "recommend.json"
BAD_VERDICTS = ("deviates", "diverged")
SLOWER = "slower (interval separated)"  # the gist of race.eliminate's "slower than B by X% (interval ...)"
UNPROBED = "not measured: off the staged search's path, or the budget was spent (docs/recommend.md)"
BELOW = "not measured: the same recipe ran at a larger micro-batch"  # the stages race the largest that fits


@dataclass(frozen=True)
class CandidateResult:
    name: str
    axes: Mapping[str, str]
    fields: Mapping[str, Any]
    outcome: str  # raced, eliminated, pruned, failed, skipped (then winner/runner-up set by build_answer)
    why: str
    probes: int
    objective: float | None  # the race's figure on the objective: the geometric mean (higher is better)
    samples_per_s: float | None
    peak_mem_mb: float | None
    pred_peak_allocated_mb: float | None
    energy_per_sample_j: float | None
    bound: str | None
    mfu_ceiling: float | None
    parity: str  # equivalent, deviates, diverged, or "" (not judged)
    parity_delta: float | None
    # where the memory model predicts no activations (generic decoders, the MoE): a lower bound only,
    # and pred_peak_allocated_mb is empty (absent from a recommend.json written before 2026-12-07)
    pred_peak_min_mb: float | None = None

    @classmethod
    def of(
        cls,
        c: Candidate,
        entry: Entry | None,
        pruned: str | None,
        probe_rows: Mapping[tuple[str, int], Mapping[str, Any]],
        parity_rows: Sequence[Mapping[str, Any]],
    ) -> CandidateResult:
        """The candidate's figures; `entry.values` are already on the objective."""
        rows = [r for (name, _), r in sorted(probe_rows.items()) if name == c.name]
        ok = [r for r in rows if r.get("status") == "ok"]
        judged = next((r for r in parity_rows if r.get("scenario") == f"parity.{c.name}"), None)
        if pruned:
            outcome, why = "pruned", pruned
        elif entry is None or not (entry.values or entry.out):
            outcome, why = "skipped", UNPROBED
        elif not entry.values:
            outcome, why = "failed", entry.out
        elif entry.out:
            outcome, why = "eliminated", entry.out
        else:
            outcome, why = "raced", ""
        return cls(
            name=c.name, axes=dict(c.axes), fields=dict(c.fields), outcome=outcome, why=why, probes=len(rows),
            objective=math.exp(entry.mean_log) if entry and entry.values else None,
            samples_per_s=_geomean(ok, "samples_per_s"), peak_mem_mb=_median(ok, "peak_mem_mb"),
            pred_peak_allocated_mb=_median(rows, "pred_peak_allocated_mb"),
            energy_per_sample_j=_geomean(ok, "energy_per_sample_j"),
            bound=_label(ok), mfu_ceiling=_geomean(ok, "mfu_ceiling"),
            parity=str(judged.get("parity") or "") if judged else "",
            parity_delta=_number(judged.get("parity_delta")) if judged else None,
            pred_peak_min_mb=_median(rows, "pred_peak_min_mb"),
        )  # fmt: skip


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value == value else None


def _geomean(rows: Sequence[Mapping[str, Any]], column: str) -> float | None:
    """The geometric mean of the column's positive figures (the race's statistic: race.Entry.mean_log)."""
    values = [v for v in (_number(r.get(column)) for r in rows) if v is not None and v > 0]
    return math.exp(statistics.fmean(map(math.log, values))) if values else None


def _median(rows: Sequence[Mapping[str, Any]], column: str) -> float | None:
    values = [v for v in (_number(r.get(column)) for r in rows) if v is not None]
    return float(statistics.median(values)) if values else None


def _label(rows: Sequence[Mapping[str, Any]]) -> str | None:
    labels = [str(r["bound"]) for r in rows if isinstance(r.get("bound"), str) and r.get("bound")]
    return max(set(labels), key=labels.count) if labels else None


@dataclass(frozen=True)
class TwinCheck:
    twin: str  # the twin's directory
    best: str | None  # the twin's winner
    # the figures the twin's answer shows (its table's: samples/s or J a sample)
    best_value: float | None
    winner_value: float | None  # this answer's winner's there
    ratio: float | None  # this winner's figure on the objective over the best's: geometric means of their probes
    low: float | None  # the ratio's 95% interval
    high: float | None
    verdict: str  # holds, does not hold, inconclusive, or "not comparable here"
    why: str
    search_s: float  # this search, over its sittings
    twin_search_s: float
    twin_probes: int
    tolerance_pct: float  # "within this much of the best"


@dataclass(frozen=True)
class Answer:
    objective: str
    winner: str | None
    runner_up: str | None
    candidates: tuple[CandidateResult, ...]
    pareto: tuple[str, ...]
    lost: tuple[str, ...]  # why each eliminated family of candidates lost
    notes: tuple[str, ...]  # what the space left out, and what the figures rest on
    stopped: str
    judged_on: str
    device: str
    memory_cap_mb: float | None
    wall_s: float
    stages: tuple[StageReport, ...] = ()  # the staged search's stages (none for --exhaustive)
    # a --resume'd search: the wall seconds of each earlier sitting (wall_s is this sitting's)
    earlier_sittings_s: tuple[float, ...] = ()
    twin: TwinCheck | None = None  # --twin: this answer judged against its exhaustive twin

    @property
    def search_s(self) -> float:
        """The whole search's wall time, over its sittings."""
        return self.wall_s + sum(self.earlier_sittings_s)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "search_s": self.search_s}  # search_s: derived, for the JSON's readers


def build_answer(
    objective: str,
    results: Sequence[CandidateResult],
    space_notes: Sequence[AxisNote],
    stopped: str,
    proxy: str,
    task: str,
    device: str,
    cap: float | None,
    margin: float,
    wall_s: float,
    stages: Sequence[StageReport] = (),
    earlier_sittings_s: Sequence[float] = (),
) -> Answer:
    results = passed_over(results)
    measured = [r for r in results if r.objective is not None and r.outcome in ("raced", "eliminated")]
    eligible = sorted(
        (r for r in measured if r.outcome == "raced" and r.parity == "equivalent"), key=lambda r: -(r.objective or 0)
    )
    winner = eligible[0].name if eligible else None
    runner = eligible[1].name if len(eligible) > 1 else None
    notes = [f"{n.axis}: {n.why}" for n in space_notes]
    notes.append(
        f"training quality judged on a learnable proxy task ({proxy}, {task}) with random weights: "
        "not the user's own fine-tune"
        if proxy.split(":")[0] in ("lm-synthetic", "cls-synthetic", "vision-synthetic")
        else f"training quality judged on the user's data ({proxy})"
    )
    if device == "cpu":
        notes.append(
            "CPU: a smoke test of the harness; out of memory is the memory model's predicted peak above the cap "
            "(the stand-in fit uses), and the speeds say nothing of a GPU"
        )
    if cap is not None:
        notes.append(
            f"memory cap {cap:,.0f} MB; pruned only beyond the memory model's {margin:.0%} margin; the plain "
            "recipe's loss check ran without the cap (judged for its loss, not its memory)"
        )
    if objective == "cost":
        notes.append("cost on one GPU at an hourly price ranks as speed does (cost per sample = price / samples/s)")
    if winner is None:
        notes.append("no candidate both measured and judged equivalent to the plain recipe: no recommendation")
    else:
        notes.extend(_how_sure(eligible[0], measured, stopped))
    return Answer(
        objective=objective, winner=winner, runner_up=runner, candidates=tuple(results), pareto=pareto(measured),
        lost=tuple(why_lost(results)), notes=tuple(notes), stopped=stopped,
        judged_on=proxy, device=device, memory_cap_mb=cap, wall_s=wall_s, stages=tuple(stages),
        earlier_sittings_s=tuple(earlier_sittings_s),
    )  # fmt: skip


def _how_sure(won: CandidateResult, measured: Sequence[CandidateResult], stopped: str) -> list[str]:
    """What the winner's lead rests on, when the race could not prove it: too few probes for an
    interval, or candidates still racing (not separated from it) when the race stopped."""
    rivals = sorted(
        (r for r in measured if r.outcome == "raced" and r.name != won.name and r.parity not in BAD_VERDICTS),
        key=lambda r: -(r.objective or 0),
    )
    if won.probes >= MIN_ROUNDS and not rivals:
        return []
    said = f"the winner rests on {won.probes} probe{'s' if won.probes != 1 else ''}"
    if won.probes < MIN_ROUNDS:
        said += " (no interval)"
    if rivals:
        nxt = rivals[0]
        said += (
            f"; {len(rivals)} other candidate{'s' if len(rivals) != 1 else ''} still racing when {stopped}, not "
            f"separated from it by an interval (the next: {nxt.name}, {nxt.samples_per_s or 0:.1f} samples/s)"
        )
    return [said + ": a larger --budget races more rounds"]


def pareto(results: Sequence[CandidateResult]) -> tuple[str, ...]:
    """The measured candidates no other beats on every axis (faster, smaller, less energy), leaving
    out those judged to deviate or diverge."""
    pool = [r for r in results if r.parity not in BAD_VERDICTS and r.samples_per_s is not None]

    def key(r: CandidateResult) -> tuple[float, float, float]:
        return (-(r.samples_per_s or 0), r.peak_mem_mb or math.inf, r.energy_per_sample_j or math.inf)

    def dominates(a: CandidateResult, b: CandidateResult) -> bool:
        ka, kb = key(a), key(b)
        return all(x <= y for x, y in zip(ka, kb, strict=True)) and ka != kb

    return tuple(r.name for r in sorted(pool, key=key) if not any(dominates(o, r) for o in pool))


def why_lost(results: Sequence[CandidateResult]) -> list[str]:
    """For each axis choice whose every candidate is out (pruned, failed, eliminated, deviates): why.
    A choice none of whose candidates was measured or refused (the race's budget ended first) did not
    lose: the summary's count of skipped candidates says so, not a line here for each choice."""
    lines = []
    choices = sorted({(axis, label) for r in results for axis, label in r.axes.items() if label})
    for axis, label in choices:
        group = [r for r in results if r.axes.get(axis) == label]
        if any(r.outcome == "raced" and r.parity not in BAD_VERDICTS for r in group):
            continue
        reasons = [w for r in group if (w := r.why or r.parity) and w != UNPROBED]  # why, where it was found
        if not reasons:
            continue
        common = max(set(_gist(w) for w in reasons), key=[_gist(w) for w in reasons].count)
        slower = [r for r in group if r.outcome == "eliminated" and _gist(r.why) == SLOWER and r.objective]
        if common == SLOWER and slower:  # by how much: the family's closest, with the race's interval
            closest = max(slower, key=lambda r: r.objective or 0.0)
            common = f"{SLOWER}; the closest, {closest.name}, {closest.why}"
        lines.append(f"{label} ({axis}): {len(group)} candidates out; most often: {common}")
    return lines


def passed_over(results: Sequence[CandidateResult]) -> list[CandidateResult]:
    """The results, a skipped one whose recipe (every axis but the micro-batch) was measured at a
    larger micro-batch saying so (BELOW, naming it): each stage races a combination at the largest
    micro-batch that fits (stages.frontier), not the smaller ones."""
    by_recipe: dict[tuple[tuple[str, str], ...], list[CandidateResult]] = {}
    for r in results:
        if r.objective is not None:
            by_recipe.setdefault(_recipe(r), []).append(r)
    out = []
    for r in results:
        micro = r.fields.get("batch_size") or 0
        larger = [o for o in by_recipe.get(_recipe(r), []) if (o.fields.get("batch_size") or 0) > micro]
        if r.outcome == "skipped" and larger:
            r = replace(r, why=f"{BELOW} ({min(larger, key=lambda o: o.fields.get('batch_size') or 0).name})")
        out.append(r)
    return out


def _recipe(r: CandidateResult) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((axis, label) for axis, label in r.axes.items() if axis != FRONTIER))


def _gist(why: str) -> str:
    if why.startswith(BELOW):
        return BELOW.removeprefix("not measured: ")
    if why.startswith("out of memory, predicted"):
        return "out of memory (predicted)"
    if why.startswith("slower than"):
        return SLOWER
    return why.split(":")[0][:60]


def write_answer(out: Path, answer: Answer) -> None:
    atomic_write_json(out / ANSWER_JSON, answer.to_json())


def toml_table(values: Mapping[str, Any]) -> list[str]:
    return [f"{k} = {toml_value(v)}" for k, v in values.items() if v is not None]


def certificate_toml(answer: Answer, base: Mapping[str, Any], plain: Candidate) -> str:
    """The winner and the plain recipe as a matrix: `gpubench run --matrix DIR/recommended.toml`."""
    lines = [
        "# gpubench recommend's answer: rerun with `gpubench run --matrix THIS_FILE` (add --record to gate it nightly)",
        "[matrix]",
        "description = " + toml_value(f"recommended for {answer.objective}: {answer.winner or 'none'}"),
        f"parity_reference = {toml_value(PLAIN)}",
        "",
        "[base]",
        *toml_table(dict(base)),
        "",
        f"[scenarios.{PLAIN}]",
        *toml_table(dict(plain.fields)),
    ]
    chosen = next((r for r in answer.candidates if r.name == answer.winner), None)
    if chosen is not None:
        lines += ["", f'[scenarios."{chosen.name}"]', *toml_table(dict(chosen.fields))]
    return "\n".join(lines) + "\n"


def read_answer(result_dir: Path) -> Answer | None:
    """DIR/recommend.json as an Answer (None when the directory holds none: not a recommend run);
    BadInput when the file is not one gpubench wrote."""
    path = result_dir / ANSWER_JSON
    if not path.is_file():
        return None
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        data["candidates"] = tuple(CandidateResult(**c) for c in data["candidates"])
        data["stages"] = tuple(StageReport(**{**s, "axes": tuple(s["axes"])}) for s in data.get("stages", ()))
        data["earlier_sittings_s"] = tuple(data.get("earlier_sittings_s", ()))
        data.pop("search_s", None)  # derived from the two above
        data["twin"] = TwinCheck(**data["twin"]) if data.get("twin") else None
        for key in ("pareto", "lost", "notes"):
            data[key] = tuple(data[key])
        return Answer(**data)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadInput(f"{path}: not a recommend.json gpubench wrote: {exc}") from None
