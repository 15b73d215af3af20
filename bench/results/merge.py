"""Result directories of one matrix run in shards (hosts, lanes, Slurm steps) made one directory, so
that `compare`, `report` and `history` judge a sharded night as one run.

Shards must come from the same matrix on the same software and GPU model (`check_same_run`), so
each must have its env.json; a
scenario planned in two shards must have the same settings in both. Where two shards hold a row of
the same scenario and repeat, one is kept (`pick`): a final row beats an `interrupted` one; between
two final rows the later started one wins (a shard run again after a fix); on a tie, the shard named
later. Rows are written in the plan's order (scenario, then repeat), like a plain run's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..fsio import atomic_write_json, read_json
from .columns import FINAL_STATUSES
from .identity import gpu_model
from .resultdir import ENV_JSON, RESULTS_CSV, SCENARIOS_JSON, read_env, read_results, write_results
from .scaling import add_scaling

# what must be the same in every shard's env.json (hosts and GPUs of one model may differ)
SAME_ENV = ("gpubench", "python", "packages.torch", "packages.transformers", "packages.accelerate")


@dataclass(frozen=True)
class Shard:
    path: Path
    rows: list[dict[str, Any]]
    env: dict[str, Any] | None
    plan: dict[str, Any] | None  # scenarios.json, where the shard has one


@dataclass(frozen=True)
class Merged:
    rows: list[dict[str, Any]]
    duplicates: int  # (scenario, repeat) pairs held by more than one shard: one row kept each
    env: dict[str, Any] | None
    plan: dict[str, Any] | None


def row_dicts(frame: Any) -> list[dict[str, Any]]:
    """A results frame's rows as dicts, NaN as None (what the writer takes)."""
    return [
        {k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()} for r in frame.to_dict("records")
    ]


def read_shard(path: Path) -> Shard:
    path = Path(path)
    if not (path / RESULTS_CSV).is_file():
        raise BadInput(f"{path}: no {RESULTS_CSV}; not a gpubench result directory")
    plan = None
    if (path / SCENARIOS_JSON).is_file():
        try:
            plan = read_json(path / SCENARIOS_JSON)
        except ValueError as exc:
            raise BadInput(f"{path / SCENARIOS_JSON}: unreadable ({exc})") from None
        if not isinstance(plan, dict):
            raise BadInput(f"{path / SCENARIOS_JSON}: unreadable (expected a JSON object)")
    env = read_env(path)
    if env is None:
        raise BadInput(
            f"{path}: no {ENV_JSON}; its GPU and software cannot be checked against the other shards'",
            hint="merge result directories a run wrote whole (a run writes env.json before its first row)",
        )
    return Shard(path, row_dicts(read_results(path / RESULTS_CSV)), env, plan)


def _get(env: dict[str, Any], dotted: str) -> Any:
    value: Any = env
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _matrix(shard: Shard) -> Any:
    return (shard.plan or {}).get("matrix") or (shard.env or {}).get("matrix")


def check_same_run(shards: Sequence[Shard]) -> None:
    """BadInput naming the first shard that is not of the same matrix, software and GPU model as
    the first, or that plans a scenario with other settings."""
    first = shards[0]
    settings: dict[str, tuple[Path, dict[str, Any]]] = {}
    for shard in shards:
        if _matrix(shard) != _matrix(first):
            raise BadInput(
                f"{shard.path}: matrix {_matrix(shard)!r}, but {first.path} ran {_matrix(first)!r}",
                hint="merge the shards of one matrix run only",
            )
        if shard.env is not None and first.env is not None:
            if gpu_model(shard.env) != gpu_model(first.env):
                raise BadInput(
                    f"{shard.path}: ran on {gpu_model(shard.env)}, but {first.path} on {gpu_model(first.env)}",
                    hint="merge shards from one GPU model; compare the others with `gpubench compare`",
                )
            for key in SAME_ENV:
                if _get(shard.env, key) != _get(first.env, key):
                    raise BadInput(
                        f"{shard.path}: {key} {_get(shard.env, key)}, but {first.path} has {_get(first.env, key)}",
                        hint="merge shards run on the same software only",
                    )
        for sc in (shard.plan or {}).get("scenarios") or []:
            name = sc.get("name")
            if name in settings and settings[name][1] != sc:
                raise BadInput(
                    f"{shard.path}: scenario '{name}' has other settings than in {settings[name][0]}",
                    hint="merge the shards of one matrix run only",
                )
            settings.setdefault(name, (shard.path, sc))


def pick(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Of two rows of one scenario and repeat (b from the shard named later): a final row beats an
    interrupted one, then the later `started_at`, then b."""
    final_a, final_b = a["status"] in FINAL_STATUSES, b["status"] in FINAL_STATUSES
    if final_a != final_b:
        return a if final_a else b
    return a if str(a.get("started_at") or "") > str(b.get("started_at") or "") else b


def combine(sources: Sequence[list[dict[str, Any]]], order: Sequence[str] = ()) -> tuple[list[dict[str, Any]], int]:
    """One row per (scenario, repeat) over the sources (in order; see `pick`), sorted by `order`
    (scenarios not in it after, in the order first seen), then repeat; and the duplicates met."""
    kept: dict[tuple[str, int], dict[str, Any]] = {}
    seen: list[str] = list(order)
    duplicates = 0
    for rows in sources:
        for row in rows:
            key = (str(row["scenario"]), int(row["repeat"]))
            if key in kept:
                duplicates += 1
                kept[key] = pick(kept[key], row)
            else:
                kept[key] = row
            if key[0] not in seen:
                seen.append(key[0])
    rank = {name: i for i, name in enumerate(seen)}
    rows = sorted(kept.values(), key=lambda r: (rank[str(r["scenario"])], int(r["repeat"])))
    add_scaling(rows)  # a scaling reference may sit in another shard
    return rows, duplicates


def merged_plan(shards: Sequence[Shard]) -> dict[str, Any] | None:
    """The first shard's scenarios.json with every shard's scenarios, each once, in the order met."""
    plans = [s.plan for s in shards if s.plan is not None]
    if not plans:
        return None
    names: set[str] = set()
    scenarios = []
    for plan in plans:
        for sc in plan.get("scenarios") or []:
            if sc.get("name") not in names:
                names.add(sc.get("name"))
                scenarios.append(sc)
    return {**plans[0], "scenarios": scenarios}


def merge(shards: Sequence[Shard], order: Sequence[str] = ()) -> Merged:
    check_same_run(shards)
    plan = merged_plan(shards)
    names = [str(s.get("name")) for s in (plan or {}).get("scenarios") or []]
    rows, duplicates = combine([s.rows for s in shards], order or names)
    envs = [s for s in shards if s.env is not None]
    env = None
    if envs:
        env = dict(envs[0].env or {})
        env["merged"] = [
            {
                "dir": str(s.path),
                "host": (s.env or {}).get("host"),
                "created_at": (s.env or {}).get("created_at"),
                "gpu_uuid": _get(s.env or {}, "gpu.uuid"),
                "rows": len(s.rows),
            }
            for s in shards
        ]
    return Merged(rows, duplicates, env, plan)


def merge_dirs(out: Path, dirs: Sequence[Path]) -> Merged:
    """`gpubench merge OUT DIR...`: the shards' rows, env.json and scenarios.json written to OUT,
    which must not hold a run."""
    if len(dirs) < 2:
        raise BadInput("merge needs two result directories or more", hint="gpubench merge OUT DIR1 DIR2 ...")
    held = [n for n in (RESULTS_CSV, SCENARIOS_JSON, ENV_JSON) if (out / n).exists()]
    if held:
        raise BadInput(f"{out}: already holds {', '.join(held)}", hint="merge into a new directory")
    resolved = [Path(d).resolve() for d in dirs]
    if Path(out).resolve() in resolved or len(set(resolved)) < len(resolved):
        raise BadInput("merge: OUT and every DIR must be different directories")
    merged = merge([read_shard(d) for d in dirs])
    out.mkdir(parents=True, exist_ok=True)
    write_results(out / RESULTS_CSV, merged.rows)
    if merged.plan is not None:
        atomic_write_json(out / SCENARIOS_JSON, merged.plan)
    if merged.env is not None:
        atomic_write_json(out / ENV_JSON, merged.env)
    return merged
