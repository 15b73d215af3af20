"""The package's layering, read from its source: no import cycle between modules of bench/ (imports
inside functions and under TYPE_CHECKING count: a type-only circle is still a circle), and no
import from a lower layer to a higher one. The layers are declared below as data, lowest first; a
module belongs to the layer of its longest listed prefix."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from test_architecture import cycles  # Tarjan's strongly connected components, one copy

BENCH = Path(__file__).resolve().parent.parent / "bench"

# Low to high. A module may import its own layer and the ones below it, never one above.
LAYERS: tuple[tuple[str, ...], ...] = (
    # the leaves: errors, text, numbers, files, the host, the process-tree reaper (which the worker's
    # fork server and the parent's runner both use)
    (
        "bench",  # bench/__init__.py: the version
        "bench.errors",
        "bench.stats",
        "bench.checks",
        "bench.safetext",
        "bench.fsio",
        "bench.redact",
        "bench.cpus",
        "bench.reaper",
    ),
    # what a recipe is: the scenario value and the tables it is read against (engines, precisions,
    # optimizer names, the device mesh, nodes); no registry of models
    ("bench.recipe",),
    # the results' columns: the catalogue (its settings are the scenario's), the judged metrics read
    # off it, the number formatting that labels them, and the terminal tables
    ("bench.catalogue", "bench.metrics", "bench.fmt", "bench.termtable"),
    # the memory model's family-free arithmetic
    ("bench.memory",),
    # the model families: torch-free rows, each family folder's math (which the rows name as
    # "module:function"), model names resolved, the plan-time check that a model trains as asked
    ("bench.families",),
    # planning: a matrix expanded into scenarios, the registries' rules over them, the data kinds
    ("bench.planner",),
    ("bench.measure",),
    ("bench.results",),
    ("bench.compare", "bench.predict"),
    ("bench.history",),
    ("bench.worker",),
    ("bench.hook", "bench.export"),
    ("bench.run",),
    ("bench.fit", "bench.recommend", "bench.verify"),
    ("bench.report",),
    ("bench.api",),
    ("bench.cli", "bench.__main__"),
)


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(BENCH.rglob("*.py")):
        parts = list(path.relative_to(BENCH.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """module -> the modules of bench it imports (anywhere in its source: a function's body and a
    TYPE_CHECKING block too); `from PKG import NAME` names the submodule NAME where there is one."""
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        out: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in known else source for a in node.names]
            else:
                continue
            out |= {t for t in (_resolve(x, known) for x in targets if x.split(".")[0] == "bench") if t}
        out.discard(name)
        graph[name] = out
    return graph


def layer_of(module: str) -> int:
    """The layer of the longest declared prefix of `module`; KeyError for a module no layer holds."""
    best = max(
        ((len(p), i) for i, layer in enumerate(LAYERS) for p in layer if _held(module, p)),
        default=None,
    )
    if best is None:
        raise KeyError(module)
    return best[1]


def _held(module: str, prefix: str) -> bool:
    """`module` is `prefix` or inside it; a `*` in the prefix stands for one name."""
    parts, want = module.split("."), prefix.split(".")
    return len(parts) >= len(want) and all(w in ("*", p) for w, p in zip(want, parts, strict=False))


def upward_arrows(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{a} (layer {layer_of(a)}) imports {b} (layer {layer_of(b)})"
        for a, targets in graph.items()
        for b in targets
        if layer_of(b) > layer_of(a)
    )


def test_no_import_cycle_between_modules_of_bench() -> None:
    assert cycles(import_graph()) == []


def test_every_module_has_a_layer() -> None:
    unplaced = []
    for module in import_graph():
        try:
            layer_of(module)
        except KeyError:
            unplaced.append(module)
    assert unplaced == [], "declare these in LAYERS"


def test_no_module_imports_a_higher_layer() -> None:
    assert upward_arrows(import_graph()) == []


# -- the checker itself, on small made-up graphs ---------------------------------------------------
def test_a_type_only_or_function_level_import_is_an_edge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "bench"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n")
    (package / "b.py").write_text("def f():\n    from bench import a\n")
    monkeypatch.setattr(sys.modules[__name__], "BENCH", package)
    graph = import_graph()
    assert graph["bench.a"] == {"bench.b"} and graph["bench.b"] == {"bench.a"}
    assert cycles(graph) == [["bench.a", "bench.b"]]


def test_an_arrow_to_a_higher_layer_is_named() -> None:
    graph = {"bench.run.session": {"bench.report.html"}, "bench.report.html": {"bench.results"}, "bench.results": set()}
    low, high = layer_of("bench.run.session"), layer_of("bench.report.html")
    assert upward_arrows(graph) == [f"bench.run.session (layer {low}) imports bench.report.html (layer {high})"]


def module_names(paths: list[Path]) -> dict[str, list[str]]:
    """Each module or package name of bench/ -> where it is, leaving out a family folder's own files
    (bench/families/NAME/dims.py, acts.py, ...: the same shape in every folder, by design)."""
    named: dict[str, list[str]] = {}
    for path in paths:
        rel = path.relative_to(BENCH.parent)
        if rel.parts[:2] == ("bench", "families") and len(rel.parts) == 4 and rel.name != "__init__.py":
            continue
        stem = rel.parent.name if rel.name == "__init__.py" else rel.stem
        if stem != "__main__":
            named.setdefault(stem, []).append(str(rel))
    return named


def test_no_two_modules_share_a_name() -> None:
    """A name says which module it is: `session.py` in three packages made every traceback and
    search ambiguous. A family folder's files are the exception (one shape per family)."""
    repeated = {n: where for n, where in module_names(sorted(BENCH.rglob("*.py"))).items() if len(where) > 1}
    assert repeated == {}


def test_a_repeated_name_is_found(tmp_path: Path) -> None:
    paths = [BENCH / "run" / "plan.py", BENCH / "fit" / "plan.py", BENCH / "families" / "bert" / "dims.py"]
    paths += [BENCH / "families" / "llama" / "dims.py", BENCH / "report" / "__init__.py", BENCH / "cli" / "report.py"]
    assert {n: w for n, w in module_names(paths).items() if len(w) > 1} == {
        "plan": ["bench/run/plan.py", "bench/fit/plan.py"],
        "report": ["bench/report/__init__.py", "bench/cli/report.py"],
    }
