"""What `gpubench verify` runs: the scenarios its claims need, one matrix, deduplicated across
claims and files, and the claims known beforehand to be not comparable here (a CUDA-only technique
on the CPU, a package not installed, more GPUs than the machine has)."""

from __future__ import annotations

import importlib.util
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..recipe.scenario import Scenario
from .claims import Claim, ClaimFile

# settings that are not written into the generated matrix: the scenario's name, and the defaults
SKIP_KEYS = ("name", "origin")


@dataclass(frozen=True)
class VerifyPlan:
    on_cpu: bool
    scenarios: tuple[Scenario, ...]  # to run, each once (renamed where two files share a name)
    run_name: dict[tuple[str, str], str]  # (file stem, its scenario name) -> the name in the run
    own: dict[str, dict[str, Scenario]]  # file stem -> its scenarios at the setup's scale (arithmetic)
    not_comparable: dict[str, str] = field(default_factory=dict)  # claim id -> why, known before running
    rules: dict[str, str] = field(default_factory=dict)  # file stem -> its scaling rule


def missing_packages(claim: Claim) -> list[str]:
    return [p for p in claim.packages if importlib.util.find_spec(p) is None]


def before_running(claim: Claim, on_cpu: bool, gpus: int | None) -> str:
    """Why the claim is not comparable here, known before running ("" when it may be).
    gpus: the GPUs the machine has (None: not known before the run)."""
    if claim.min_gpus > 1 and on_cpu:
        return f"made on {claim.min_gpus}+ GPUs; this run is on the CPU"
    if gpus is not None and claim.min_gpus > gpus:
        return f"made on {claim.min_gpus}+ GPUs; this machine has {gpus}"
    if claim.needs_cuda and on_cpu:
        return "a CUDA-only technique: it does not run on the CPU"
    missing = missing_packages(claim)
    if missing:
        return f"needs {', '.join(missing)}, not installed here"
    return ""


def build(files: list[ClaimFile], on_cpu: bool, gpus: int | None = None) -> VerifyPlan:
    """The run's scenarios: those of each claim that may be comparable here and is measured
    (arithmetic claims train nothing), each distinct setting once."""
    by_settings: dict[str, Scenario] = {}
    run_name: dict[tuple[str, str], str] = {}
    taken: set[str] = set()
    own: dict[str, dict[str, Scenario]] = {}
    not_comparable: dict[str, str] = {}
    for f in files:
        has_scenarios = bool(f.settings.get("scenarios"))
        own[f.stem] = f.scenarios(on_cpu=False) if has_scenarios else {}
        scaled = f.scenarios(on_cpu=on_cpu) if has_scenarios else {}
        for claim in f.claims:
            why = before_running(claim, on_cpu, gpus)
            if why:
                not_comparable[claim.id] = why
                continue
            if claim.arithmetic:
                continue
            for name in claim.scenario_names():
                if (f.stem, name) in run_name:
                    continue
                sc = scaled[name]
                key = json.dumps(_settings(sc), sort_keys=True, default=str)
                if key not in by_settings:
                    unique = name if name not in taken else f"{f.stem}.{name}"
                    taken.add(unique)
                    by_settings[key] = sc.replace(name=unique)
                run_name[(f.stem, name)] = by_settings[key].name
    return VerifyPlan(
        on_cpu=on_cpu,
        scenarios=tuple(by_settings.values()),
        run_name=run_name,
        own=own,
        not_comparable=not_comparable,
        rules={f.stem: f.rule for f in files},
    )


def _settings(sc: Scenario) -> dict[str, object]:
    return {k: v for k, v in sc.settings().items() if k not in ("name", "description")}


def matrix_text(plan: VerifyPlan, description: str) -> str:
    """The generated matrix file (TOML): every scenario fully written out, nothing inherited."""
    lines = ["# written by gpubench verify: the scenarios its claims need", "", "[matrix]"]
    lines.append(f"description = {_toml(description)}")
    defaults = Scenario(name="defaults").settings()
    for sc in plan.scenarios:
        lines += ["", f'[scenarios."{sc.name}"]']
        for key, value in sc.settings().items():
            if key in SKIP_KEYS or value is None or (key != "description" and defaults.get(key) == value):
                continue
            lines.append(f"{key} = {_toml(value)}")
    return "\n".join(lines) + "\n"


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} has no TOML form here")
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(str(value))  # a JSON string is a TOML basic string


def write_matrix(plan: VerifyPlan, path: Path, description: str) -> Path:
    path.write_text(matrix_text(plan, description), encoding="utf-8")
    return path
