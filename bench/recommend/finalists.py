"""The finalists' training quality in `gpubench recommend`: which candidates' loss is checked, how
(the parity scenario: a learnable task, a constant learning rate, `parity_steps` steps), the plain
recipe's checks at its seeds (the band), and what the race keeps of its budget for them (the
leaders' probe time: a compiled candidate's check compiles again). The verdict itself is
bench/results/parity.py's."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from ..recipe.scenario import Scenario
from .space import PLAIN, Candidate

PARITY_PREFIX = "parity."
PARITY_SEEDS = 3

Measure = Callable[[Scenario, int], dict[str, Any]]  # runs a scenario's repeat, returns its row
Figure = Callable[[Mapping[str, Any]], float | str]  # a probe row's figure on the objective, or its status


class Steps(Protocol):  # a RecommendRequest: the loss check's length
    @property
    def warmup_steps(self) -> int: ...

    @property
    def parity_steps(self) -> int: ...


class Planned(Protocol):  # a RunPlan: the scenarios planned
    @property
    def scenarios(self) -> Sequence[Scenario]: ...


def parity_scenario(sc: Scenario, steps: Steps, cap: float | None) -> Scenario:
    """`sc` as a loss check: `parity_steps` steps after the warm-up, every step its window."""
    n = steps.warmup_steps + steps.parity_steps
    return sc.replace(
        samples=sc.batch_size * sc.grad_accum_steps * n, warmup_steps=steps.warmup_steps, window="epoch",
        profile_steps=0, memory_cap_mb=cap, learning_rate=1e-3, lr_schedule="constant",
    )  # fmt: skip


def reference_seeds(plan: Planned) -> list[Scenario]:
    """The plain recipe's parity scenario and its seed twins."""
    reference = f"{PARITY_PREFIX}{PLAIN}"
    return [s for s in plan.scenarios if s.name == reference or s.name.startswith(f"{reference}.seed")]


def reference_checks(plan: Planned, steps: Steps, one: Measure, stop: Callable[[], bool]) -> list[dict[str, Any]]:
    """The plain recipe's loss checks at its seeds (their rows). It is judged for its loss, not its
    memory: uncapped, since the finalists' savers are what fits the cap (on one H100 capped at 24 GB
    llama-1b's plain recipe ran out of memory)."""
    checked: list[dict[str, Any]] = []
    for sc in reference_seeds(plan):
        if stop():
            break
        checked.append(one(parity_scenario(sc, steps, None), 0))
    return checked


def judge_finalists(
    plan: Planned, steps: Steps, cap: float | None, finalists: list[str], one: Measure, stop: Callable[[], bool]
) -> list[dict[str, Any]]:
    """The finalists' loss checks (their rows; add_parity judges them against the reference's)."""
    wanted = {PARITY_PREFIX + n for n in finalists}
    judged: list[dict[str, Any]] = []
    for sc in plan.scenarios:
        if sc.name in wanted and not stop():
            judged.append(one(parity_scenario(sc, steps, cap), 0))
    return judged


def pick_finalists(ranked: Sequence[str], named: Mapping[str, Candidate], n: int) -> list[str]:
    """The `n` candidates whose loss is checked, from `ranked` (best first): the best of each optimizer
    first (a different optimizer changes what training does: should the leader's deviate, the best
    with another optimizer can still win), then the next best."""
    firsts: dict[str, str] = {}
    for name in ranked:
        firsts.setdefault(named[name].axes.get("optimizer", ""), name)
    chosen = [name for name in ranked if name in firsts.values()][:n]
    chosen += [name for name in ranked if name not in chosen][: max(0, n - len(chosen))]
    return sorted(chosen, key=list(ranked).index)


def leaders_walls(probe_rows: Mapping[tuple[str, int], Mapping[str, Any]], n: int, figure: Figure) -> list[float]:
    """The probe wall time of the `n` candidates now best on the objective (what their loss checks
    will roughly take: a compiled candidate compiles again); `n` zeros before any probe."""
    figures: dict[str, list[float]] = {}
    wall: dict[str, float] = {}
    for (name, _), row in probe_rows.items():
        value = figure(row)
        if isinstance(value, float):
            figures.setdefault(name, []).append(value)
            wall[name] = max(wall.get(name, 0.0), float(row.get("worker_wall_s") or 0.0))
    best = sorted(figures, key=lambda name: -sum(figures[name]) / len(figures[name]))[:n]
    return [wall[name] for name in best] + [0.0] * (n - len(best))
