"""The package's layering, read from the source (ast, nothing imported): bench/memory and the folder
of each family's own memory model (bench/families/bert/, bench/families/llama/) have no import
cycle, stay torch-free, and import nothing from the command side (bench/predict, bench/cli) nor
from the run's (bench/run, bench/worker)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bench.families import FAMILIES

REPO = Path(__file__).resolve().parents[1]
# bench/memory, and the folder of each family's memory model (its row's "module:MODEL")
MEMORY_PACKAGES = [
    REPO / "bench" / "memory",
    *sorted({REPO.joinpath(*f.memory.partition(":")[0].split(".")).parent for f in FAMILIES if f.memory}),
]
MEMORY_MUST_NOT_IMPORT = ("bench.predict", "bench.cli", "bench.run", "bench.worker")
HEAVY = ("torch", "transformers", "bitsandbytes", "pynvml", "pandas")  # `gpubench predict` needs none


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str, root: Path) -> bool:
    where = root.joinpath(*name.split("."))
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def imports(path: Path, root: Path) -> set[str]:
    """Every module `path` imports, anywhere in it (functions and TYPE_CHECKING blocks too), as
    absolute names; `from . import x` names the submodule x, not the package."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            submodules = {f"{base}.{a.name}" for a in node.names if is_module(f"{base}.{a.name}", root)}
            out |= submodules if len(submodules) == len(node.names) else {base, *submodules}
    return out


def graph(package: Path, root: Path) -> dict[str, set[str]]:
    """module -> the modules of the same package it imports."""
    modules = {module_name(p, root): p for p in sorted(package.rglob("*.py"))}
    return {m: {i for i in imports(p, root) if i in modules and i != m} for m, p in modules.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str]:
    """One import cycle as a path that ends where it starts, or [] when there is none."""
    state: dict[str, str] = {}  # "open" while on the stack, "done" after
    stack: list[str] = []

    def visit(m: str) -> list[str]:
        state[m] = "open"
        stack.append(m)
        for n in sorted(edges.get(m, ())):
            if state.get(n) == "open":
                return [*stack[stack.index(n) :], n]
            if n not in state and (found := visit(n)):
                return found
        stack.pop()
        state[m] = "done"
        return []

    for m in sorted(edges):
        if m not in state and (found := visit(m)):
            return found
    return []


@pytest.mark.parametrize("package", MEMORY_PACKAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_memory_has_no_import_cycle(package: Path) -> None:
    edges = graph(package, REPO)
    assert len(edges) >= 4 and any(edges.values())  # it read the package
    cycle = find_cycle(edges)
    assert not cycle, f"{package.relative_to(REPO)} import cycle: " + " -> ".join(cycle)


def test_memory_imports_neither_the_commands_nor_the_run_nor_torch() -> None:
    assert len(MEMORY_PACKAGES) >= 3  # bench/memory and at least two families' folders
    bad = []
    for path in sorted(p for package in MEMORY_PACKAGES for p in package.rglob("*.py")):
        for name in sorted(imports(path, REPO)):
            top = name.split(".")[0]
            if name.startswith(MEMORY_MUST_NOT_IMPORT) or top in HEAVY:
                bad.append(f"{path.relative_to(REPO)} imports {name}")
    assert not bad, "; ".join(bad)


def test_the_checks_see_cycles_and_relative_imports(tmp_path: Path) -> None:
    """Not vacuous: a circle through `from . import`, `from .x import` and a function-level import
    is found, and `from ..cli import` resolves to the package it names."""
    pkg = tmp_path / "top" / "pkg"
    pkg.mkdir(parents=True)
    (tmp_path / "top" / "__init__.py").write_text("")
    (tmp_path / "top" / "cli.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\nfrom ..cli import main\n")
    (pkg / "b.py").write_text("from .c import thing\n")
    (pkg / "c.py").write_text("def f():\n    from .a import x\n")
    (pkg / "d.py").write_text("from . import c\n")
    edges = graph(pkg, tmp_path)
    assert edges["top.pkg.a"] == {"top.pkg.b"} and edges["top.pkg.d"] == {"top.pkg.c"}
    assert imports(pkg / "a.py", tmp_path) == {"top.pkg.b", "top.cli"}
    assert find_cycle(edges) == ["top.pkg.a", "top.pkg.b", "top.pkg.c", "top.pkg.a"]
    (pkg / "c.py").write_text("")
    assert find_cycle(graph(pkg, tmp_path)) == []
