"""Replay the staged search on an exhaustive twin's own measurements (tests only).

A published `--exhaustive` set holds every candidate's probes; replaying the staged rule on them
(a candidate's round r reads the twin's probe r mod its probes, the clock moves by each probe's
worker_wall_s) shows which recipe the rule reaches and what it spends, without a GPU. It is not a
measurement: the staged search's own probes differ by the noise, and its first worker's start is
not the twin's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from bench.families import family_of
from bench.recipe.scenario import Scenario
from bench.recommend.finalists import pick_finalists
from bench.recommend.prune import MEMORY_MARGIN, predicted_peaks, prune_by_memory
from bench.recommend.space import build_space, valid_candidates
from bench.recommend.stages import staged_race

GAP_S = 0.15  # the parent between two workers (results/recommend/NOTES.md: under 0.1 s, at most 0.9 s)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def load(twin: Path) -> tuple[dict[str, Any], dict[str, list[tuple[float | str, float]]]]:
    """The twin's settings, and name -> [(figure or status, worker_wall_s)] in repeat order."""
    env = json.loads((twin / "env.json").read_text())
    rows = pd.read_csv(twin / "results.csv")
    rows = rows[~rows["scenario"].str.startswith("parity.")].sort_values(["scenario", "repeat"])
    probes: dict[str, list[tuple[float | str, float]]] = {}
    for row in rows.to_dict("records"):
        got = float(row["samples_per_s"]) if row["status"] == "ok" else str(row["status"])
        probes.setdefault(row["scenario"], []).append((got, float(row["worker_wall_s"])))
    return env["recommend"], probes


INSTALLED = frozenset({"bitsandbytes", "liger_kernel", "torchao"})  # on the device that measured the twins


def replay(twin: Path, budget_s: float, reserve_s: float) -> tuple[Any, Any, dict[str, Any]]:
    """(standing, stage reports, what it spent: probes, race_s, pruned, unmeasured): the staged search
    over the twin's question (its settings in env.json), on the twin's probes."""
    recommend, probes = load(twin)
    settings = recommend["settings"]
    model = settings["model"]
    every = _space(settings).candidates()
    base = {"seq_len": settings["seq_len"]}
    kept, invalid = valid_candidates(every, model, base)
    peaks = predicted_peaks({c.name: Scenario(name=c.name, model=model, **base, **c.fields) for c in kept}, model)
    cap = recommend["memory_cap_mb"]
    pruned = {**invalid, **prune_by_memory(peaks, cap)}
    lean = {n: mb for n, (mb, act) in peaks.items() if act}
    sure = {n for n, mb in lean.items() if mb * (1 + MEMORY_MARGIN) <= cap}
    clock = Clock()
    spent: dict[str, Any] = {"probes": 0, "unmeasured": [], "pruned": set(pruned)}

    def measure(name: str, rnd: int) -> float | str:
        if name not in probes:  # the twin pruned or never measured it: say so, it is a defect of the replay
            spent["unmeasured"].append(name)
            return "error"
        got, wall = probes[name][rnd % len(probes[name])]
        clock.now += wall + GAP_S
        spent["probes"] += 1
        return got

    standing, stages = staged_race(
        kept, pruned, measure, budget_s=budget_s, clock=clock, lean=lean, sure=sure,
        reserve=lambda: reserve_s, floor=0.01,
    )  # fmt: skip
    spent["race_s"] = clock.now
    return standing, stages, spent


def replayed_answer(twin: Path, standing: Any, finalists: int = 2) -> tuple[str | None, list[str]]:
    """(the answer's winner, its finalists) after the race `standing`, as searching.py picks them: the
    candidates left in the race ranked by their mean, `finalists` of them (the best of each optimizer
    first), and the best whose loss is `equivalent`, read from the twin's own loss checks. A finalist
    the twin did not judge stops the replay (ValueError): its verdict would be made up."""
    answer = json.loads((twin / "recommend.json").read_text())
    verdicts = {c["name"]: c.get("parity") for c in answer["candidates"] if c.get("parity")}
    left = sorted((e for e in standing.entries.values() if e.values and not e.out), key=lambda e: -e.mean_log)
    recommend, _ = load(twin)
    named = {c.name: c for c in _space(recommend["settings"]).candidates()}
    chosen = pick_finalists([e.name for e in left], named, finalists)
    unjudged = [n for n in chosen if n not in verdicts]
    if unjudged:
        raise ValueError(f"the twin did not judge the loss of {', '.join(unjudged)}")
    return next((n for n in chosen if verdicts[n] == "equivalent"), None), chosen


def _space(settings: dict[str, Any]) -> Any:
    return build_space(
        family_of(settings["model"]), cuda=True, global_batch=settings["global_batch"], installed=INSTALLED,
        axes=settings.get("axes"),
    )  # fmt: skip


def best(twin: Path) -> tuple[str, float]:
    """The twin's winner and its mean figure over its probes."""
    answer = json.loads((twin / "recommend.json").read_text())
    _, probes = load(twin)
    values = [v for v, _ in probes[answer["winner"]] if isinstance(v, float)]
    return answer["winner"], sum(values) / len(values)


def twin_pruned(twin: Path) -> set[str]:
    answer = json.loads((twin / "recommend.json").read_text())
    return {c["name"] for c in answer["candidates"] if c["outcome"] == "pruned"}


def mean_of(twin: Path, name: str) -> float | None:
    _, probes = load(twin)
    values = [v for v, _ in probes.get(name, []) if isinstance(v, float)]
    return sum(values) / len(values) if values else None
