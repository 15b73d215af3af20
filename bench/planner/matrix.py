"""Matrix files (scenarios/*.toml): a base plus scenarios that override it, expanded as data."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import BadInput, did_you_mean
from ..recipe.scenario import SETTING_KEYS, Scenario
from ..safetext import check_plain
from . import rules

TOP_LEVEL_KEYS = ("matrix", "model", "base", "scenarios")
# [matrix] extends = "full": that matrix's [base] and [scenarios], this file's own on top (load_matrix)
EXTENDS = "extends"
# parity_reference: the scenario whose loss the others are judged against (default "baseline");
# parity_seeds: it runs at that many seeds, for the band (docs/parity.md)
MATRIX_KEYS = ("description", EXTENDS, "parity_reference", "parity_seeds")
DEFAULT_PARITY_REFERENCE = "baseline"
MAX_PARITY_SEEDS = 10
# Command-line settings that only multi-process scenarios take (a single-GPU row stays one process).
PARALLEL_OVERRIDES = ("gpus", "nnodes", "node_rank", "rdzv_endpoint")
# Command-line settings that leave a scenario which sets the field itself: there the field is the
# point of the row (`[scenarios.accelerate] engine = "accelerate"`), so `--engine fabric` must not
# turn it into a Fabric run named and described as Accelerate. It keeps its own, with a note.
OWN_FIELDS = ("engine",)
# Accepted for readers of the guide's TrainingArguments; mapped onto `precision`.
ALIASES = ("fp16", "bf16")


@dataclass(frozen=True)
class Matrix:
    name: str
    path: Path
    description: str
    scenarios: tuple[Scenario, ...]
    parity_reference: str = DEFAULT_PARITY_REFERENCE
    parity_seeds: int = 1
    notes: dict[str, str] = field(default_factory=dict)  # scenario -> why an override left it (OWN_FIELDS)

    def names(self) -> list[str]:
        return [s.name for s in self.scenarios]


def scenario_dir() -> Path:
    """The folder of the shipped matrices: bench/scenarios inside an installed wheel (setup.py maps
    the repository's scenarios/ there), else scenarios/ beside the package (a checkout, an editable
    install)."""
    package = Path(str(resources.files("bench")))
    shipped = package / "scenarios"
    return shipped if shipped.is_dir() else package.parent / "scenarios"


def available_matrices(directory: Path | None = None) -> list[str]:
    return sorted(p.stem for p in (directory or scenario_dir()).glob("*.toml"))


def resolve_matrix_path(name_or_path: str, directory: Path | None = None) -> Path:
    """A matrix name (scenarios/NAME.toml) or a path to a TOML file."""
    directory = directory or scenario_dir()
    check_plain(name_or_path, "--matrix")  # its name is the Slurm job's, its path a scenario's origin
    if not name_or_path.strip():
        raise BadInput(
            "--matrix is empty", hint=f"give a matrix name ({', '.join(available_matrices(directory))}) or a .toml file"
        )
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" or candidate.exists():
        if not candidate.is_file():
            raise BadInput(f"matrix file {candidate} does not exist")
        return candidate
    path = directory / f"{name_or_path}.toml"
    if not path.is_file():
        names = available_matrices(directory)
        hint = did_you_mean(name_or_path, names)
        raise BadInput(
            f"unknown matrix '{name_or_path}'",
            hint=hint or f"choose one of {', '.join(names)} or give a path to a .toml file",
        )
    return path


def load_matrix(
    name_or_path: str,
    directory: Path | None = None,
    overrides: dict[str, Any] | None = None,
    only: list[str] | None = None,
) -> Matrix:
    """A matrix file's scenarios, with command-line `overrides` (model, engine, samples...) applied
    before each scenario validates itself: `--model llama-tiny` makes a LoRA row valid, and a bad
    override is blamed on the option, not on the file. `only`: build just these scenarios (an
    override is then checked on them alone)."""
    path = resolve_matrix_path(name_or_path, directory)
    data = _inherit(_read_toml(path), path, directory)
    return expand(data, origin=str(path), name=path.stem, path=path, overrides=overrides, only=only)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise BadInput(f"{path}: line {line}: not UTF-8 text", hint="save the matrix file as UTF-8") from None
    except (tomllib.TOMLDecodeError, ValueError) as exc:  # ValueError: an integer too long to read
        raise BadInput(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror}") from None
    return data


def _inherit(data: dict[str, Any], path: Path, directory: Path | None) -> dict[str, Any]:
    """A matrix whose [matrix] table says `extends = "NAME"` (a shipped matrix) or `"FILE.toml"`
    (beside this file): the other matrix's [base] with this file's [base] over it, and its
    scenarios with this file's [scenarios.NAME] over the same name (new names are added). One
    level: the other matrix may not extend a third."""
    meta = _table(data.get("matrix", {}), str(path), "[matrix]")
    if EXTENDS not in meta:
        return data
    ref = meta[EXTENDS]
    if not isinstance(ref, str) or not ref.strip():
        raise BadInput(f"{path}: [matrix]: extends = {ref!r} must be a matrix name or a .toml file")
    if ref.endswith(".toml"):
        parent_path = path.parent / ref
        if not parent_path.is_file():
            raise BadInput(f"{path}: [matrix]: extends = {ref!r}: {parent_path} does not exist")
    else:
        names = available_matrices(directory)
        if ref not in names:
            hint = did_you_mean(ref, names)
            raise BadInput(
                f"{path}: [matrix]: extends = {ref!r} is not a shipped matrix",
                hint=hint or f"name one of {', '.join(names)}, or a .toml file beside this one",
            )
        parent_path = (directory or scenario_dir()) / f"{ref}.toml"
    if parent_path.resolve() == path.resolve():
        raise BadInput(f"{path}: [matrix]: extends = {ref!r} names this file itself")
    parent = _read_toml(parent_path)
    if EXTENDS in _table(parent.get("matrix", {}), str(parent_path), "[matrix]"):
        raise BadInput(f"{path}: [matrix]: extends {parent_path}, which extends another matrix: one level only")

    own = _scenario_settings(data, path)
    inherited = _scenario_settings(parent, parent_path)
    scenarios = {name: {**table, **own.get(name, {})} for name, table in inherited.items()}
    scenarios.update({name: table for name, table in own.items() if name not in inherited})
    parent_meta = _table(parent.get("matrix", {}), str(parent_path), "[matrix]")
    own_meta = {k: v for k, v in meta.items() if k != EXTENDS}
    return {
        **data,
        "matrix": {"description": parent_meta.get("description", ""), **own_meta},
        "base": {**_base_settings(parent, parent_path), **_base_settings(data, path)},
        "scenarios": scenarios,
    }


def _base_settings(data: dict[str, Any], origin: Path) -> dict[str, Any]:
    return _settings(_table(data.get("base", {}), str(origin), "[base]"), str(origin), "[base]")


def _scenario_settings(data: dict[str, Any], origin: Path) -> dict[str, dict[str, Any]]:
    tables = _table(data.get("scenarios", {}), str(origin), "[scenarios]")
    return {
        name: _settings(_table(table, str(origin), f"[scenarios.{name}]"), str(origin), f"[scenarios.{name}]")
        for name, table in tables.items()
    }


def expand(
    data: dict[str, Any],
    *,
    origin: str,
    name: str = "",
    path: Path | None = None,
    overrides: dict[str, Any] | None = None,
    only: list[str] | None = None,
) -> Matrix:
    """Expand parsed TOML into scenarios: base settings, each scenario's own on top, then the
    command line's `overrides` (PARALLEL_OVERRIDES only on multi-process scenarios)."""
    given = _given_overrides(overrides)
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            raise BadInput(f"{origin}: unknown top-level key '{key}'", hint=_known(key, TOP_LEVEL_KEYS))
    meta = _table(data.get("matrix", {}), origin, "[matrix]")
    for key in meta:
        if key not in MATRIX_KEYS:
            raise BadInput(f"{origin}: [matrix]: unknown key '{key}'", hint=_known(key, MATRIX_KEYS))
    if EXTENDS in meta:  # load_matrix resolves it; parsed data given here must not carry it
        raise BadInput(f"{origin}: [matrix]: extends works in a matrix file (load_matrix), not in expanded data")
    description = meta.get("description", "")
    if not isinstance(description, str):
        raise BadInput(f"{origin}: [matrix]: description = {description!r} must be a string")
    check_plain(description, f"{origin}: [matrix]: description")
    check_plain(name or Path(origin).stem, "the matrix's name")
    reference, seeds = _parity(meta, origin)
    base = _settings(_table(data.get("base", {}), origin, "[base]"), origin, "[base]")
    if "model" in data:
        base = {**base, "model": _model_table(data["model"], origin)}
    scenarios_table = _table(data.get("scenarios", {}), origin, "[scenarios]")
    if not scenarios_table:
        raise BadInput(f"{origin}: no scenarios", hint="add at least one [scenarios.NAME] table")
    if "parity_reference" in meta and reference not in scenarios_table:
        hint = did_you_mean(reference, list(scenarios_table))
        raise BadInput(
            f"{origin}: [matrix]: parity_reference = {reference!r} is not one of its scenarios",
            hint=hint or f"its scenarios are {', '.join(scenarios_table)}",
        )
    if only:
        _check_only(only, list(scenarios_table), origin)
        scenarios_table = {k: v for k, v in scenarios_table.items() if k in only}
    scenarios, notes = [], {}
    for scenario_name, overrides in scenarios_table.items():
        where = f"[scenarios.{scenario_name}]"
        own = _settings(_table(overrides, origin, where), origin, where)
        merged = {**base, **own, "name": scenario_name}
        common = {k: v for k, v in given.items() if k not in PARALLEL_OVERRIDES}
        kept = {k: own[k] for k in OWN_FIELDS if k in common and k in own}
        common = {k: v for k, v in common.items() if k not in kept}
        if any(given[k] != v for k, v in kept.items()):
            notes[scenario_name] = kept_note(kept, given)
        merged.update(common)
        if merged.get("strategy", "none") != "none":
            merged.update({k: v for k, v in given.items() if k in PARALLEL_OVERRIDES})
        try:
            built = Scenario(**merged, origin=origin if not common else f"{origin} with {_options(common)}")
            scenarios.append(rules.check(built))  # the registries' rules (bench/planner/rules.py)
        except TypeError as exc:  # a value of the wrong type reached a comparison
            raise BadInput(f"{origin}: {where}: bad value: {exc}") from None
    return Matrix(
        name=name or Path(origin).stem,
        path=path or Path(origin),
        description=description,
        scenarios=tuple(scenarios),
        parity_reference=reference,
        parity_seeds=seeds,
        notes=notes,
    )


def kept_note(kept: dict[str, Any], given: dict[str, Any]) -> str:
    """Why a command-line setting left a scenario: it sets that field itself (OWN_FIELDS)."""
    fields = [k for k, v in kept.items() if given[k] != v]
    own = ", ".join(f"{k} = {kept[k]!r}" for k in fields)
    flags = ", ".join(f"--{k.replace('_', '-')} {given[k]}" for k in fields)
    return f"keeps its own {own} (what the scenario compares): {flags} applies to the scenarios that take [base]'s"


def _parity(meta: dict[str, Any], origin: str) -> tuple[str, int]:
    """[matrix] parity_reference and parity_seeds, checked."""
    reference = meta.get("parity_reference", DEFAULT_PARITY_REFERENCE)
    if not isinstance(reference, str) or not reference:
        raise BadInput(f"{origin}: [matrix]: parity_reference = {reference!r} must be a scenario's name")
    seeds = meta.get("parity_seeds", 1)
    if not isinstance(seeds, int) or isinstance(seeds, bool) or not 1 <= seeds <= MAX_PARITY_SEEDS:
        raise BadInput(
            f"{origin}: [matrix]: parity_seeds = {seeds!r} must be a whole number from 1 to {MAX_PARITY_SEEDS}"
        )
    return reference, seeds


def _given_overrides(overrides: dict[str, Any] | None) -> dict[str, Any]:
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    for key in given:
        if key not in SETTING_KEYS:
            raise BadInput(f"unknown setting '{key}'", hint=_known(key, SETTING_KEYS))
    return given


def _options(common: dict[str, Any]) -> str:
    return ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in common.items())


def apply_overrides(scenarios: tuple[Scenario, ...], overrides: dict[str, Any]) -> tuple[Scenario, ...]:
    """Command-line settings (model, samples, ...) applied on top of already-built scenarios
    (load_matrix(overrides=...) applies them before validation instead)."""
    given = _given_overrides(overrides)
    if not given:
        return scenarios
    common = {k: v for k, v in given.items() if k not in PARALLEL_OVERRIDES}
    parallel = {k: v for k, v in given.items() if k in PARALLEL_OVERRIDES}
    return rules.check_all(s.replace(**common, **(parallel if s.distributed else {})) for s in scenarios)


def select(scenarios: tuple[Scenario, ...], only: list[str] | None, origin: str) -> tuple[Scenario, ...]:
    """Keep the scenarios named in `only`, in matrix order; unknown names are an error."""
    if not only:
        return scenarios
    _check_only(only, [s.name for s in scenarios], origin)
    return tuple(s for s in scenarios if s.name in only)


def _check_only(only: list[str], names: list[str], origin: str) -> None:
    for wanted in only:
        if wanted not in names:
            hint = did_you_mean(wanted, names)
            raise BadInput(
                f"--only: no scenario '{wanted}' in {origin}",
                hint=hint or f"its scenarios are {', '.join(names)}",
            )


def diff_from(scenario: Scenario, reference: Scenario) -> dict[str, Any]:
    """The settings in which `scenario` differs from `reference` (name and description aside)."""
    ignore = {"name", "description"}
    a, b = scenario.settings(), reference.settings()
    return {k: v for k, v in a.items() if k not in ignore and b.get(k) != v}


def _model_table(value: Any, origin: str) -> str:
    """A [model] table (a model_type and its dimensions, as in a config.json): the model of every
    scenario that names none, as an inline config (random weights, nothing downloaded)."""
    table = _table(value, origin, "[model]")
    if not isinstance(table.get("model_type"), str):
        raise BadInput(f"{origin}: [model] needs a model_type", hint='e.g. model_type = "qwen2" and its dimensions')
    from ..families import for_config

    for_config(table, f"{origin}: [model]")
    return json.dumps(table, sort_keys=True, separators=(",", ":"))


def _table(value: Any, origin: str, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadInput(f"{origin}: {where} must be a table, not {type(value).__name__}")
    return value


def _settings(table: dict[str, Any], origin: str, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key in ("name", "origin") or (key not in SETTING_KEYS and key not in ALIASES):
            raise BadInput(f"{origin}: {where}: unknown key '{key}'", hint=_known(key, SETTING_KEYS))
        if key == "command" and value == []:  # an empty command would run gpubench's own model instead
            raise BadInput(
                f"{origin}: {where}: command = [] names no program",
                hint='give the program and its arguments, e.g. command = ["torchrun", "train.py"], or leave '
                "command out to train gpubench's model",
            )
        out[key] = value
    fp16, bf16 = out.pop("fp16", None), out.pop("bf16", None)
    for alias, flag in (("fp16", fp16), ("bf16", bf16)):
        if flag is not None and not isinstance(flag, bool):
            raise BadInput(f"{origin}: {where}: {alias} = {flag!r} must be true or false")
    if fp16 and bf16:
        raise BadInput(
            f"{origin}: {where}: fp16 and bf16 are both true; they contradict each other",
            hint='use precision = "fp16" or "bf16"',
        )
    alias_precision = "fp16" if fp16 else "bf16" if bf16 else None
    if alias_precision:
        if "precision" in out and out["precision"] != alias_precision:
            raise BadInput(f'{origin}: {where}: {alias_precision} = true contradicts precision = "{out["precision"]}"')
        out["precision"] = alias_precision
    return out


def _known(key: str, choices: tuple[str, ...]) -> str:
    return did_you_mean(key, choices) or f"known keys: {', '.join(choices)}"
