"""The package's layering, read from its source with ast (nothing is imported): no import cycle
among bench's modules, the stages import downwards only, and the torch-free tables stay light.

Every import counts, those inside functions too: a cycle hidden in a function (as compare ->
history -> compare once was) still ties the modules together."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
# Cycles inside these packages are left to their own refactor (bench.memory's go with the model
# families); a cycle that reaches outside them fails here all the same.
CYCLES_BEING_OPENED: tuple[str, ...] = ()  # packages whose own cycles a refactor is still opening
# (importer, imported): a package on the left must not import one on the right
FORBIDDEN = [
    ("bench.compare", "bench.history"),
    ("bench.results", "bench.compare"),
    ("bench.results", "bench.history"),
    ("bench.results", "bench.report"),
    ("bench.results", "bench.cli"),
]
# torch-free tables of data and what each may import of bench
TABLES = {
    "bench.metrics": ("bench.catalogue",),  # made from the column catalogue
    "bench.catalogue": ("bench.recipe.scenario", "bench.measure.kernels"),  # the settings' names, the kernel categories
}
HEAVY = ("torch", "transformers", "pandas", "numpy", "sqlalchemy", "pynvml", "bitsandbytes")
LIGHT_MODULES = ("bench.metrics", "bench.catalogue", "bench.results.identity")  # read by the parent without a GPU


def module_name(path: Path) -> str:
    parts = list(path.relative_to(BENCH.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(BENCH.rglob("*.py"))}


def _type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def imported_names(name: str, *, top_level_only: bool = False) -> set[str]:
    """Every dotted name `name` imports (from-imports as module and module.attribute); with
    top_level_only, only those run at import time outside `if TYPE_CHECKING:` blocks."""
    path = modules()[name]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(tree):  # imports for type checkers only are no edge at run time
        for field in ("body", "orelse"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                setattr(node, field, [n for n in block if not _type_checking_block(n)])
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                stem = ".".join([*base, *([node.module] if node.module else [])])
            else:
                stem = node.module or ""
            out.add(stem)
            out.update(f"{stem}.{alias.name}" for alias in node.names)
    return out


@functools.cache
def graph() -> dict[str, frozenset[str]]:
    """Module -> the bench modules it imports."""
    known = modules()
    return {m: frozenset(n for n in imported_names(m) if n in known and n != m) for m in known}


def cycles(edges: dict[str, frozenset[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_cycle_finder_finds_a_cycle() -> None:
    edges = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset({"a"})}
    assert cycles(edges) == [["a", "b", "c"]]


def test_no_import_cycle_among_bench_modules() -> None:
    found = [c for c in cycles(graph()) if not any(all(within(m, p) for m in c) for p in CYCLES_BEING_OPENED)]
    assert found == []


@pytest.mark.parametrize(("importer", "imported"), FORBIDDEN, ids=[f"{a}-{b}" for a, b in FORBIDDEN])
def test_stages_import_downwards(importer: str, imported: str) -> None:
    offending = sorted(
        f"{m} -> {n}"
        for m, targets in graph().items()
        if within(m, importer)
        for n in targets
        if within(n, imported) and not within(n, importer)
    )
    assert offending == []


@pytest.mark.parametrize(("table", "allowed"), TABLES.items())
def test_tables_of_data_import_only_what_they_are_made_from(table: str, allowed: tuple[str, ...]) -> None:
    assert sorted(n for n in graph()[table] if not any(within(n, a) for a in allowed) and n != "bench") == []


@pytest.mark.parametrize("name", LIGHT_MODULES)
def test_light_modules_import_no_heavy_package_at_import_time(name: str) -> None:
    heavy = sorted(n for n in imported_names(name, top_level_only=True) if n.split(".")[0] in HEAVY)
    assert heavy == []
