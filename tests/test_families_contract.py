"""Rows carry behaviour (issue 60): a family's FLOP count, memory model, builder and Liger patch are
"module:attribute" strings on its row that resolve; nothing outside bench/families/ names a family
(a family name or model_type as a string constant); and a family with its own math is one folder
plus one line in FAMILIES, shown by registering a throwaway family from a temporary folder."""

from __future__ import annotations

import ast
import importlib.util
import textwrap
from pathlib import Path

import pytest

from bench import families
from bench.families import memory_model
from bench.families.base import Family, load
from bench.memory.prediction import MemoryModel
from bench.recipe.scenario import Scenario

BENCH = Path(__file__).resolve().parents[1] / "bench"
FAMILIES_DIR = BENCH / "families"
# (module path relative to bench/, constant): a family's name or model_type that a module outside
# bench/families/ may hold as a string constant. Empty: none may.
ALLOWED: frozenset[tuple[str, str]] = frozenset()


def family_words() -> frozenset[str]:
    return frozenset({f.name for f in families.FAMILIES} | {t for f in families.FAMILIES for t in f.model_types})


def docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants of a module, its classes and functions (prose, not code)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def family_constants(source: str, words: frozenset[str]) -> list[tuple[int, str]]:
    """(line, value) of each string constant in `source` that is one of `words`, docstrings aside."""
    tree = ast.parse(source)
    skip = docstrings(tree)
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in words
        if id(node) not in skip
    )


def test_nothing_outside_families_names_a_family() -> None:
    words = family_words()
    found = [
        f"{path.relative_to(BENCH.parent)}:{line}: {value!r}"
        for path in sorted(BENCH.rglob("*.py"))
        if not path.is_relative_to(FAMILIES_DIR)
        for line, value in family_constants(path.read_text(encoding="utf-8"), words)
        if (str(path.relative_to(BENCH)), value) not in ALLOWED
    ]
    assert found == [], "a family named outside bench/families/ (give its row a field instead): " + "; ".join(found)


def test_the_scan_sees_a_constant_and_skips_prose() -> None:
    """Not vacuous: a comparison, a dict key and a default are found; docstrings and other words are not."""
    source = textwrap.dedent(
        '''
        """The llama module docstring."""
        def f(fam, cfg=None):
            """Says bert."""
            if fam.name == "llama":
                return {"bert": 1}
            return cfg.get("model_type", "vit"), "llama-tiny"
        '''
    )
    assert family_constants(source, family_words()) == [(5, "llama"), (6, "bert"), (7, "vit")]


def unresolved(fam: Family) -> list[str]:
    """What of a family's "module:attribute" strings does not resolve to what its reader calls."""
    bad = []
    specs = {"flops": fam.flops, "builder": fam.builder, "liger_patch": fam.liger_patch}
    for field, spec in specs.items():
        if spec is None or (field == "liger_patch" and importlib.util.find_spec("liger_kernel") is None):
            continue
        try:
            found = load(spec)
        except (ImportError, AttributeError) as exc:
            bad.append(f"{fam.name}.{field} = {spec}: {exc}")
            continue
        if not callable(found):
            bad.append(f"{fam.name}.{field} = {spec}: not callable")
    if fam.memory is not None:
        try:
            model = memory_model.model_of(fam.memory)
        except (ImportError, AttributeError, TypeError) as exc:
            bad.append(f"{fam.name}.memory = {fam.memory}: {exc}")
        else:
            if not (callable(model.dims_from_config) and callable(model.predict)):
                bad.append(f"{fam.name}.memory = {fam.memory}: its functions are not callable")
    return bad


@pytest.mark.parametrize("fam", families.FAMILIES, ids=lambda f: f.name)
def test_every_family_string_resolves(fam: Family) -> None:
    """A family's FLOP count and memory model resolve (Liger's patch where liger_kernel is installed)."""
    assert unresolved(fam) == []


def test_the_families_with_their_own_math_are_found_by_the_row() -> None:
    """FLOPs and memory are chosen by the row: bert and llama name theirs, the others none."""
    own = {f.name for f in families.FAMILIES if f.flops and f.memory}
    assert own == {"bert", "llama"}
    assert all(f.activations == (f.memory is not None) for f in families.FAMILIES)


def test_a_bad_string_fails_the_contract() -> None:
    """A malformed string is refused when the row is made; one that names nothing fails the check."""
    row = {"name": "x", "model_types": ("x",), "tasks": ("causal-lm",), "default_task": "causal-lm", "description": ""}
    with pytest.raises(ValueError, match="is not 'module:attribute'"):
        Family(**row, flops="bench.families.llama.flops.flops_per_sample")
    ghost = Family(**row, flops="bench.families.llama.flops:no_such", memory="bench.families.no_such:MODEL")
    assert [m.split(":")[0] for m in unresolved(ghost)] == [
        "x.flops = bench.families.llama.flops",
        "x.memory = bench.families.no_such",
    ]
    wrong = Family(**row, memory="bench.families.llama.flops:flops_per_sample")  # a function, not a MemoryModel
    assert "not a MemoryModel" in unresolved(wrong)[0]


# A throwaway family with its own FLOP count and memory model: the folder a new family needs.
TOY_ROW = """
from bench.families.base import Family

FAMILY = Family(
    name="toyfam",
    model_types=("toyfam",),
    tasks=("causal-lm",),
    default_task="causal-lm",
    description="a throwaway family with its own math",
    flops="toyfam.model:flops_per_sample",
    memory="toyfam.model:MODEL",
    presets={"toy-tiny": {"model_type": "toyfam", "width": 8, "layers": 3}},
)
"""
TOY_MATH = """
from dataclasses import dataclass
from typing import ClassVar

from bench.memory.states import predict_states_only
from bench.memory.prediction import MemoryModel
from bench.memory.tensors import ParamTensor


@dataclass(frozen=True)
class ToyDims:
    model_type: ClassVar[str] = "toyfam"
    width: int
    layers: int


def dims_from_config(cfg, origin):
    return ToyDims(cfg["width"], cfg["layers"])


def predict(sc, d, assumed_gpus=2):
    tensors = [ParamTensor(f"layers.{n}.weight", (d.width, d.width), n) for n in range(d.layers)]
    return predict_states_only(sc, tensors, assumed_gpus=assumed_gpus)


def flops_per_sample(sc, cfg, origin, total_params):
    return 6.0 * cfg["layers"] * cfg["width"] ** 2 * sc.seq_len


MODEL = MemoryModel(dims_from_config, predict)
"""


def test_a_family_with_its_own_math_is_one_folder_and_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two files in a folder, and the registry's one line (here: what that line adds to FAMILIES and
    the maps derived from it); nothing else changes for its FLOPs and memory to be the family's own."""
    folder = tmp_path / "toyfam"
    folder.mkdir()
    (folder / "__init__.py").write_text(TOY_ROW)
    (folder / "model.py").write_text(TOY_MATH)
    assert len(list(folder.iterdir())) == 2
    monkeypatch.syspath_prepend(str(tmp_path))
    toy = importlib.import_module("toyfam").FAMILY
    # the one line: FAMILIES = (..., toyfam.FAMILY, ...), from which BY_TYPE and PRESETS are derived
    monkeypatch.setattr(families, "FAMILIES", (toy, *families.FAMILIES))
    monkeypatch.setitem(families.BY_TYPE, "toyfam", toy)
    monkeypatch.setitem(families.PRESETS, "toy-tiny", dict(toy.presets["toy-tiny"]))
    assert unresolved(toy) == []

    from bench.measure import mfu
    from bench.predict.predictions import prediction_of

    sc = Scenario(name="s", model="toy-tiny", seq_len=16, samples=64, warmup_steps=1)
    assert mfu.flops_per_sample(sc, "toy-tiny", None) == (6.0 * 3 * 64 * 16, "analytic: toyfam")
    p = prediction_of(sc, "toy-tiny")
    assert p.params == 3 * 64 and p.peak > 0
    assert isinstance(memory_model.model_of(toy.memory or ""), MemoryModel)


@pytest.mark.parametrize(("model_type", "called"), [("llama", "apply_liger_kernel_to_llama"), ("qwen2", "instance")])
def test_liger_patches_with_the_rows_function(model_type: str, called: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The llama row's Liger patch (the function its published rows ran), Liger's generic
    per-instance patch for a family whose row names none: chosen by the row, not by a name."""
    import sys
    from types import SimpleNamespace

    from bench.worker.llm import LIGER_KERNELS, apply_liger

    calls: list[tuple[str, dict]] = []
    package = SimpleNamespace(
        apply_liger_kernel_to_llama=lambda **kw: calls.append(("apply_liger_kernel_to_llama", kw)),
        _apply_liger_kernel_to_instance=lambda **kw: calls.append(("instance", kw)),
    )
    monkeypatch.setitem(sys.modules, "liger_kernel", SimpleNamespace(transformers=package))
    monkeypatch.setitem(sys.modules, "liger_kernel.transformers", package)
    model = SimpleNamespace(config=SimpleNamespace(model_type=model_type))
    apply_liger(model)
    assert calls == [(called, {**LIGER_KERNELS, "model": model})]
