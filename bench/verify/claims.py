"""Claim files (claims/*.toml): what a document claims, as data, and the scenarios that measure it
here. The one reader and validator of the format (docs/verify.md); unknown keys are an error that
names the key and the file.

A file holds a matrix fragment ([base], [scenarios.NAME], validated as a matrix's are: bench.planner.matrix),
the scaling rule that fits it to the machine ([scale]: its `rule` in words, and on the CPU the
settings of [scale.cpu] over every scenario), and its claims ([claims.ID]): where each comes from,
the setup it was made on, the effect as a quantity with a unit, a direction and a tolerance, and the
reference and treatment scenarios (or, for an arithmetic quantity, the setup scenario) that measure it.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import BadInput, did_you_mean
from ..planner import matrix as matrix_mod
from ..recipe.scenario import Scenario
from .verdict import DIRECTIONS, Effect

# quantity -> (unit, results column it is read from; None: arithmetic on the built model, nothing trains)
QUANTITIES: dict[str, tuple[str, str | None]] = {
    "speed_ratio": ("x", "samples_per_s"),  # treatment / reference, steady-state samples/s
    "memory_ratio": ("x", "peak_mem_mb"),  # treatment / reference peak (metric = another memory column)
    "loss_ratio": ("x", "final_window_loss"),  # treatment / reference loss over the curve's last 20%
    "bytes_per_param": ("B/param", None),  # the memory model's model states / parameters
    "optimizer_memory_ratio": ("x", None),  # the memory model's optimizer states, treatment / reference
    "flops_vs_6pd": ("x", None),  # the built model's counted FLOPs per token / (6 x parameters)
}
ARITHMETIC = frozenset(q for q, (_, column) in QUANTITIES.items() if column is None)
TIMED = frozenset({"speed_ratio"})  # figures a busy host moves (memory and loss it does not)
PAIRED = frozenset({"speed_ratio", "memory_ratio", "loss_ratio", "optimizer_memory_ratio"})
TOP_KEYS = ("file", "base", "scale", "scenarios", "claims")
FILE_KEYS = ("description",)
SCALE_KEYS = ("rule", "cpu")
CLAIM_KEYS = (
    "text", "source", "setup", "quantity", "claimed", "direction", "tolerance_pct", "metric",
    "reference", "treatment", "needs_cuda", "packages", "min_gpus",
)  # fmt: skip
REQUIRED_CLAIM_KEYS = ("text", "source", "setup", "quantity", "claimed", "direction", "tolerance_pct", "reference")
SOURCE_KEYS = ("document", "section", "url")
SETUP_KEYS = ("gpu", "model", "batch", "seq", "precision", "note")
SHIPPED = ("guide", "talk", "libraries")  # --claims all: these, in this order


@dataclass(frozen=True)
class Claim:
    id: str
    file: str  # the claim file's stem (guide, talk, libraries, or the user's)
    text: str  # the claim in the document's words
    source: dict[str, str]  # document, section, url (where public)
    setup: dict[str, Any]  # what it was made on: gpu, model, batch, seq, precision
    quantity: str  # a key of QUANTITIES
    effect: Effect
    metric: str  # the results column a measured quantity is read from ("" for arithmetic)
    reference: str  # a scenario of its file (arithmetic: the setup scenario)
    treatment: str = ""
    needs_cuda: bool = False  # a CUDA-only technique: not comparable on the CPU
    packages: tuple[str, ...] = ()  # import names it needs; missing: not comparable here
    min_gpus: int = 1  # GPUs the claim was made on; fewer here: not comparable

    @property
    def unit(self) -> str:
        return QUANTITIES[self.quantity][0]

    @property
    def arithmetic(self) -> bool:
        return self.quantity in ARITHMETIC

    @property
    def timed(self) -> bool:
        return self.quantity in TIMED

    def scenario_names(self) -> tuple[str, ...]:
        return tuple(n for n in (self.reference, self.treatment) if n)


@dataclass(frozen=True)
class ClaimFile:
    path: Path
    description: str
    rule: str  # the scaling rule, in words
    cpu: dict[str, Any]  # settings over every scenario on the CPU
    settings: dict[str, Any]  # the matrix fragment: {"base": ..., "scenarios": ...}
    claims: tuple[Claim, ...]

    @property
    def stem(self) -> str:
        return self.path.stem

    def scenarios(self, on_cpu: bool) -> dict[str, Scenario]:
        """This file's scenarios, validated as a matrix's, with [scale.cpu] over each on the CPU."""
        built = matrix_mod.expand(
            self.settings, origin=str(self.path), name=self.stem, overrides=self.cpu if on_cpu else None
        )
        return {s.name: s for s in built.scenarios}


def claims_dir() -> Path:
    """The shipped claim files: bench/claims inside a wheel (setup.py maps claims/ there), else
    claims/ beside the package (a checkout)."""
    package = Path(str(resources.files("bench")))
    shipped = package / "claims"
    return shipped if shipped.is_dir() else package.parent / "claims"


def claim_paths(spec: str) -> list[Path]:
    """--claims: guide, talk, libraries, all (the three) or a path to a claim file."""
    if spec == "all":
        return [claims_dir() / f"{name}.toml" for name in SHIPPED]
    if spec in SHIPPED:
        return [claims_dir() / f"{spec}.toml"]
    path = Path(spec)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise BadInput(f"--claims {spec}: no such file")
        return [path]
    hint = did_you_mean(spec, [*SHIPPED, "all"])
    raise BadInput(f"--claims {spec!r} is not guide, talk, libraries, all or a .toml file", hint=hint)


def load_claims(spec: str, only: list[str] | None = None) -> list[ClaimFile]:
    """The claim files --claims names, with only the claims --only names (unknown ids an error)."""
    files = [read_claim_file(p) for p in claim_paths(spec)]
    ids = [c.id for f in files for c in f.claims]
    seen: set[str] = set()
    for f in files:
        for c in f.claims:
            if c.id in seen:
                raise BadInput(f"{f.path}: claim '{c.id}' is also in another claim file", hint="rename one")
            seen.add(c.id)
    if only:
        for wanted in only:
            if wanted not in seen:
                raise BadInput(f"--only: no claim '{wanted}' in --claims {spec}", hint=did_you_mean(wanted, ids))
        files = [_only(f, only) for f in files]
    return files


def _only(f: ClaimFile, only: list[str]) -> ClaimFile:
    from dataclasses import replace

    return replace(f, claims=tuple(c for c in f.claims if c.id in only))


def read_claim_file(path: Path) -> ClaimFile:
    origin = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, ValueError) as exc:
        raise BadInput(f"{origin}: not a valid TOML claim file: {exc}") from None
    except OSError as exc:
        raise BadInput(f"{origin}: cannot read: {exc.strerror}") from None
    _keys(data, TOP_KEYS, origin, "")
    meta = _table(data.get("file", {}), origin, "[file]")
    _keys(meta, FILE_KEYS, origin, "[file]")
    scale = _table(data.get("scale", {}), origin, "[scale]")
    _keys(scale, SCALE_KEYS, origin, "[scale]")
    rule = scale.get("rule", "")
    if not isinstance(rule, str):
        raise BadInput(f"{origin}: [scale]: rule = {rule!r} must be a string")
    cpu = _table(scale.get("cpu", {}), origin, "[scale.cpu]")
    settings = {"base": data.get("base", {}), "scenarios": data.get("scenarios", {})}
    claims_table = _table(data.get("claims", {}), origin, "[claims]")
    if not claims_table:
        raise BadInput(f"{origin}: no claims", hint="add at least one [claims.ID] table")
    made = ClaimFile(path, str(meta.get("description", "")), rule, dict(cpu), settings, ())
    scenario_names = set(made.scenarios(on_cpu=False)) if settings["scenarios"] else set()
    if cpu:
        made.scenarios(on_cpu=True)  # a bad [scale.cpu] setting is an error now, on any machine
    claims = tuple(_claim(cid, table, path, scenario_names) for cid, table in claims_table.items())
    return ClaimFile(path, made.description, rule, made.cpu, settings, claims)


def _claim(cid: str, value: Any, path: Path, scenarios: set[str]) -> Claim:
    origin, where = str(path), f"[claims.{cid}]"
    table = _table(value, origin, where)
    _keys(table, CLAIM_KEYS, origin, where)
    if not cid or not all(c.isalnum() or c in "-_." for c in cid):
        raise BadInput(f"{origin}: {where}: the id must be letters, digits, '-', '_' or '.'")
    for key in REQUIRED_CLAIM_KEYS:
        if key not in table:
            raise BadInput(f"{origin}: {where}: missing key '{key}'")
    source = _strings(table["source"], origin, f"{where} source", SOURCE_KEYS, required=("document", "section"))
    setup = _table(table["setup"], origin, f"{where} setup")
    _keys(setup, SETUP_KEYS, origin, f"{where} setup")
    quantity = table["quantity"]
    if quantity not in QUANTITIES:
        raise BadInput(
            f"{origin}: {where}: quantity = {quantity!r} is not one of {', '.join(QUANTITIES)}",
            hint=did_you_mean(str(quantity), list(QUANTITIES)),
        )
    claimed, tolerance = table["claimed"], table["tolerance_pct"]
    for key, number in (("claimed", claimed), ("tolerance_pct", tolerance)):
        if isinstance(number, bool) or not isinstance(number, int | float) or not math.isfinite(number) or number < 0:
            raise BadInput(f"{origin}: {where}: {key} = {number!r} must be a number, 0 or more")
    if not claimed > 0 or not tolerance < 100:
        raise BadInput(f"{origin}: {where}: claimed must be above 0 and tolerance_pct below 100")
    direction = table["direction"]
    if direction not in DIRECTIONS:
        raise BadInput(f"{origin}: {where}: direction = {direction!r} is not one of {', '.join(DIRECTIONS)}")
    column = QUANTITIES[quantity][1]
    metric = table.get("metric", column or "")
    if column is None and "metric" in table:
        raise BadInput(f"{origin}: {where}: metric is for measured quantities, not {quantity}")
    if not isinstance(metric, str):
        raise BadInput(f"{origin}: {where}: metric = {metric!r} must be a results column's name")
    if column is not None:
        from ..results.columns import NUMERIC_COLUMNS

        if metric not in NUMERIC_COLUMNS:
            raise BadInput(f"{origin}: {where}: metric = {metric!r} is not a numeric results column")
    reference, treatment = table["reference"], table.get("treatment", "")
    if quantity in PAIRED and not treatment:
        raise BadInput(f"{origin}: {where}: a {quantity} needs a treatment scenario beside its reference")
    for key, name in (("reference", reference), ("treatment", treatment)):
        if name and name not in scenarios:
            raise BadInput(
                f"{origin}: {where}: {key} = {name!r} is not a scenario of the file",
                hint=did_you_mean(str(name), sorted(scenarios)) or f"its scenarios: {', '.join(sorted(scenarios))}",
            )
    packages = table.get("packages", [])
    if not isinstance(packages, list) or not all(isinstance(p, str) and p for p in packages):
        raise BadInput(f"{origin}: {where}: packages = {packages!r} must be a list of import names")
    needs_cuda, min_gpus = table.get("needs_cuda", False), table.get("min_gpus", 1)
    if not isinstance(needs_cuda, bool):
        raise BadInput(f"{origin}: {where}: needs_cuda = {needs_cuda!r} must be true or false")
    if isinstance(min_gpus, bool) or not isinstance(min_gpus, int) or not 1 <= min_gpus <= 1024:
        raise BadInput(f"{origin}: {where}: min_gpus = {min_gpus!r} must be a whole number from 1")
    text = table["text"]
    if not isinstance(text, str) or not text.strip():
        raise BadInput(f"{origin}: {where}: text must say the claim in words")
    return Claim(
        id=cid,
        file=path.stem,
        text=text,
        source=source,
        setup=dict(setup),
        quantity=quantity,
        effect=Effect(float(claimed), direction, float(tolerance)),
        metric=metric,
        reference=reference,
        treatment=treatment,
        needs_cuda=needs_cuda,
        packages=tuple(packages),
        min_gpus=min_gpus,
    )


def _strings(value: Any, origin: str, where: str, keys: tuple[str, ...], required: tuple[str, ...]) -> dict[str, str]:
    table = _table(value, origin, where)
    _keys(table, keys, origin, where)
    for key in required:
        if not isinstance(table.get(key), str) or not table[key].strip():
            raise BadInput(f"{origin}: {where}: {key} must be a non-empty string")
    return {k: str(v) for k, v in table.items()}


def _keys(table: dict[str, Any], known: tuple[str, ...], origin: str, where: str) -> None:
    for key in table:
        if key not in known:
            at = f"{where}: " if where else ""
            raise BadInput(
                f"{origin}: {at}unknown key '{key}'", hint=did_you_mean(key, known) or f"known keys: {', '.join(known)}"
            )


def _table(value: Any, origin: str, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadInput(f"{origin}: {where} must be a table, not {type(value).__name__}")
    return value
