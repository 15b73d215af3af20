"""Many ranks' figures as one row (pure arithmetic, no torch).

Every rank opens and closes its timed window at the same step behind a barrier (with window =
"auto", at the step rank 0 decided: bench/worker/dist.py), so the window is one span of wall time:
the job's samples/s is all ranks' window samples over the longest window (on a device mesh, one
rank per data-parallel replica: its cp and tp ranks train the same samples); window_steps,
window_ci_pct and window_stop are rank 0's (each rank's window_steps is in rank_figures).
Step times come from the slowest rank (a step ends for everyone when its slowest rank is done);
memory is given as the largest rank (what must fit on one GPU) and as the sum over ranks. A
non-finite loss on any rank makes the row diverged (`loss_outcome`), whatever rank 0's loss was.

Which rule a column follows is its `ranks=` in bench/catalogue.py; this module applies the rules.
The job's own arithmetic (the catalogue's JOB_RULES: the replicas' samples and rates, the
engine's figure, world size, the slowest rank, rank_figures) is `_job`'s. A column without a rule
is rank 0's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..catalogue import CATALOGUE
from ..recipe.engine_registry import ENGINES

RANK_ONLY = ("host", "counts_samples")  # what a rank reports for rank_figures and the replicas alone
PER_RANK_KEYS = (*(c.name for c in CATALOGUE if c.per_rank), *RANK_ONLY)  # each rank's, in rank_figures
COMBINE: dict[str, Callable[[list[float]], float]] = {
    "sum": sum,
    "min": min,
    "max": max,
    "mean": lambda v: sum(v) / len(v),
}
RULED = tuple((c.name, c.ranks, c.of or c.name) for c in CATALOGUE if c.ranks in COMBINE)  # (column, rule, read)
SLOWEST = tuple(c.name for c in CATALOGUE if c.ranks == "slowest")


def _numbers(ranks: list[dict[str, Any]], key: str) -> list[float]:
    return [float(r[key]) for r in ranks if isinstance(r.get(key), int | float)]


def combine_ranks(ranks: list[dict[str, Any]], engine: str) -> dict[str, Any]:
    """One row's figures from every rank's (rank order; rank 0 first)."""
    out = dict(ranks[0])
    for key in RANK_ONLY:  # kept per rank, in rank_figures
        out.pop(key, None)
    for name, rule, read in RULED:  # None where no rank measured it
        values = _numbers(ranks, read)
        out[name] = COMBINE[rule](values) if values else None
    medians = [(r.get("step_time_median_ms") or 0.0, i) for i, r in enumerate(ranks)]
    slowest = max(medians)[1]
    for name in SLOWEST:
        out[name] = ranks[slowest].get(name)
    for c in CATALOGUE:
        if c.ranks == "all":
            out[c.name] = all(bool(r.get(c.name)) for r in ranks)
        elif c.ranks == "count":
            out[c.name] = int(sum(_numbers(ranks, c.name)))
        elif c.ranks == "union":
            out[c.name] = _union(ranks, c.name)
    out.update(_job(ranks, engine, out, slowest))
    return out


def _union(ranks: list[dict[str, Any]], key: str) -> str | None:
    """Every ";"-joined event any rank saw, sorted; "none" where ranks looked and saw none."""
    events = {e for r in ranks for e in str(r.get(key) or "").split(";") if e and e != "none"}
    seen = [r.get(key) for r in ranks if r.get(key) is not None]
    return (";".join(sorted(events)) or "none") if seen else None


def _job(ranks: list[dict[str, Any]], engine: str, out: dict[str, Any], slowest: int) -> dict[str, Any]:
    """The columns of JOB_RULES (bench/catalogue.py): the job's samples and rates from its
    data-parallel replicas over the one window (after `out`'s window_s is the longest), its size,
    its slowest rank, each rank's figures."""
    job: dict[str, Any] = {}
    world = len(ranks)
    window_s = out.get("window_s")
    counting = [r for r in ranks if r.get("counts_samples", True)]  # one per data-parallel replica
    samples = sum(_numbers(counting, "window_samples"))
    if window_s:
        job["window_samples"] = int(samples)
        job["samples_per_s"] = samples / window_s
        tokens = sum(float(r["tokens_per_s"]) * float(r["window_s"]) for r in counting if r.get("tokens_per_s"))
        # no rank counted tokens (a CNN, a command that gave none): no token figure, never 0
        job["tokens_per_s"] = tokens / window_s if any(r.get("tokens_per_s") for r in counting) else None
        job["samples_per_s_per_gpu"] = job["samples_per_s"] / world
    job["slowest_rank"] = slowest
    if ENGINES[engine].rank_rule == "sum" and out.get("trainer_samples_per_s") is not None:
        # the engine's own epoch figure is per rank (the Trainer's is already global: bench/recipe/engine_registry.py)
        job["trainer_samples_per_s"] = sum(_numbers(counting, "trainer_samples_per_s"))
    job["world_size"] = world
    job["rank_figures"] = json.dumps([{k: r.get(k) for k in PER_RANK_KEYS} | {"rank": i} for i, r in enumerate(ranks)])
    return job


def loss_outcome(ranks: list[dict[str, Any]]) -> tuple[str, str]:
    """(status, reason) from every rank's loss figures (rank order; one entry without ranks):
    "diverged" when any rank saw a non-finite loss, or none, with the reason naming each such rank,
    the one with the most first (where ranks share gradients, the NaN spreads from it to the others)."""
    bad = [(i, r) for i, r in enumerate(ranks) if not r.get("loss_finite") or r.get("nonfinite_losses")]
    bad.sort(key=lambda item: -int(item[1].get("nonfinite_losses") or 0))
    if not bad:
        return "ok", ""

    def what(r: dict[str, Any]) -> str:
        return f"{int(r.get('nonfinite_losses') or 0)} non-finite losses; final loss {r.get('final_loss')}"

    if len(ranks) == 1:
        return "diverged", what(ranks[0])
    return "diverged", "; ".join(f"rank {i}: {what(r)}" for i, r in bad)
