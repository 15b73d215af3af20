"""`make mutation`: would the tests notice a wrong figure? A small AST mutation tester.

Each mutant changes one operator, comparison, constant, boolean, `min`/`max` or returned value of a
module that computes judged figures (MODULES), and the module's own fast unit tests run against it
(one process at a time, no subprocess end-to-end tests). A mutant is killed when a test fails, errors
or times out; it survives when every test passes. The score of a module is killed / (mutants run -
equivalent ones); EQUIVALENT names the mutants no test can kill, with why (docs/validation.md).

How it runs: this process imports pytest and the heavy libraries once, then forks one child per
mutant; the child serves the mutated source for the module (an import hook, nothing is written to
disk) and runs pytest on the module's tests with -x. A first child runs the unmutated module with a
line tracer: mutants on lines no test executes are counted as survivors without running.

Not mutated: docstrings and other strings (except those compared against, e.g. `status == "ok"`),
f-strings, annotations, `raise` statements (error messages), and the literal tables a module
defines at its top level (datasheet peaks, column lists: data, not computation).

    python tools/mutate.py                          # every module, sampled (--sample per module)
    python tools/mutate.py bench/results/parity.py --sample 0 --survivors   # all of one module's
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import importlib.abc
import importlib.util
import json
import os
import random
import signal
import sys
import tempfile
import time
import types
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

# module (a file, or a package: each of its files) -> its fast unit tests (no subprocess runs)
MODULES: dict[str, tuple[str, ...]] = {
    "bench/measure/mfu.py": ("tests/test_flops.py", "tests/test_mutation_flops.py"),
    "bench/results/parity.py": ("tests/test_parity.py", "tests/test_mutation_parity.py"),
    "bench/results/summary.py": (
        "tests/test_results.py::test_summarize_medians_ok_repeats_and_reports_the_worst_status",
        "tests/test_results.py::test_summarize_says_what_each_change_vs_the_baseline_is_worth",
        "tests/test_mutation_summary.py",
    ),
    "bench/results/bound.py": ("tests/test_gpuwatch.py", "tests/test_mutation_summary.py"),
    "bench/compare/gate.py": ("tests/test_compare_gate.py", "tests/test_mutation_gate.py"),
    "bench/stats.py": ("tests/test_stats.py", "tests/test_mutation_stats.py"),
    "bench/history/check.py": ("tests/test_history_judge.py", "tests/test_mutation_judge.py"),
    "bench/memory": (
        "tests/test_memory_model.py",
        "tests/test_memory_decoder.py",
        "tests/test_memory_generic.py",
        "tests/test_memory_architecture.py",
        "tests/test_mutation_memory.py",
    ),
    # a family's own math (its memory model and FLOP count): bench/families/bert/, bench/families/llama/
    **{
        folder: (
            "tests/test_memory_model.py",
            "tests/test_memory_decoder.py",
            "tests/test_memory_generic.py",
            "tests/test_mutation_memory.py",
            "tests/test_flops.py",
            "tests/test_mutation_flops.py",
        )
        for folder in ("bench/families/bert", "bench/families/llama")
    },
    "bench/fit/search.py": (
        "tests/test_fit.py::test_the_search_finds_exactly_the_largest_fitting_value_or_says_it_did_not",
        "tests/test_fit.py::test_an_exact_guess_is_confirmed_in_two_probes",
        "tests/test_fit.py::test_a_probe_that_fails_otherwise_stops_the_search_and_claims_nothing_past_it",
        "tests/test_fit.py::test_the_ends_of_the_range",
        "tests/test_mutation_search.py",
    ),
}

# (file, mutant id) -> why no test can tell it from the original (see Mutant.ident)
EQUIVALENT: dict[tuple[str, str], str] = {
    ("bench/results/summary.py", "summarize: m not in row -> (m in row)"): "every judged metric (samples/s, "
    "peak memory, energy) is already in the row as the same median: recomputing it changes nothing",
    ("bench/results/summary.py", "summarize: True -> (False)"): "zip(strict=False) over two columns of one "
    "frame: their lengths are always equal",
    ("bench/results/bound.py", "label: \"none\" -> ('XXnoneXX')"): "the events are read only for the "
    "throttle reasons: a 'none' event left in is no throttle either",
    (
        "bench/stats.py",
        "_exact_tail: ways[1:, rank:] += ways[:-1, : total + 1 - rank].copy() -> "
        "ways[1:, rank:] -= ways[:-1, :total + 1 - rank].copy()",
    ): "subtracting makes every count of subsets "
    "of size k (-1)^k times itself: the tail and the total of size n change sign together, their ratio not",
    ("bench/stats.py", "_betainc: abs(c * d - 1.0) < 1e-15 -> (abs(c * d - 1.0) <= 1e-15)"): "the fraction "
    "stops one step later only when the step's change is exactly 1e-15: the result moves by under 1 ulp",
    ("bench/compare/gate.py", "_prepare: shift * toward -> (shift / toward)"): "toward is +1 or -1: "
    "multiplying by it and dividing by it are the same",
    ("bench/compare/gate.py", "_verdict: change * rule.direction > 0 -> (change * rule.direction >= 0)"): "reached "
    "only when |change| > the floor >= 0, so the product is never 0",
    ("bench/compare/gate.py", "noise_limit_pct: rule.direction > 0 -> (rule.direction >= 0)"): "a rule's "
    "direction is +1 or -1, never 0",
    ("bench/history/check.py", "_metric_mark: change > 0 -> (change >= 0)"): "reached only when |change| > "
    "the threshold >= 0, so the change is never 0",
    ("bench/families/llama/dims.py", "module_name: 2 -> (3)"): "rsplit with at most 2 or 3 splits leaves the "
    "same last two pieces: [-2] is the module's name either way",
    ("bench/families/llama/weights.py", "decoder_states: 0 -> (1)"): "DecoderStates.quantized is read nowhere "
    "(only `weights` counts the quantized base)",
    ("bench/fit/search.py", "search: 1 -> (2) #4"): "the first step is overwritten before it is read: "
    "next_value returns step 1 while neither side is known",
}

SAMPLE = 50  # mutants per module by default: about a minute or two each on one core
PRELOAD = ("numpy", "pandas", "hypothesis", "pytest", "typer", "rich", "sqlalchemy", "torch", "transformers")
PYTEST_ARGS = ("-x", "-q", "-p", "no:cacheprovider", "-m", "not gpu and not heavy and not slow")
# tests of a module's test file that build models or start processes (tens of seconds): left out
DESELECT = ("tests/test_parity.py::test_both_engines_build_the_schedule_transformers_names",)


_SWAP_BIN = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.Mult,
    ast.Pow: ast.Mult,
}
_SWAP_CMP = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_SWAP_NAME = {"min": "max", "max": "min", "any": "all", "all": "any"}


@dataclass(frozen=True)
class Mutant:
    path: str  # relative to ROOT
    line: int
    end_line: int
    col: int
    end_col: int
    original: str  # the source text replaced
    replacement: str
    where: str  # the enclosing function (qualified) or <module>
    nth: int  # 1 for the first mutant of this where, original and replacement; 2 for the second...
    body: bool  # inside a function's body: run by swapping that function's code, no re-import

    @property
    def ident(self) -> str:
        """Stable across edits elsewhere in the file: where, what and into what (and which of the same)."""
        return f"{self.where}: {self.original} -> {self.replacement}" + (f" #{self.nth}" if self.nth > 1 else "")


class _Finder(ast.NodeVisitor):
    def __init__(self, path: str, source: str) -> None:
        self.path, self.source = path, source
        self.scope: list[str] = []
        self.body = 0  # how deep in function bodies
        self.found: list[Mutant] = []

    # -- what is skipped ----------------------------------------------------------------------
    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        return

    def visit_Raise(self, node: ast.Raise) -> None:
        return

    def visit_Assert(self, node: ast.Assert) -> None:
        return

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None and not (not self.scope and _is_table(node.value)):
            self.visit(node.value)

    def visit_Assign(self, node: ast.Assign) -> None:
        if not self.scope and _is_table(node.value):
            return
        self.visit(node.value)

    def visit_arguments(self, node: ast.arguments) -> None:
        for default in [*node.defaults, *(d for d in node.kw_defaults if d is not None)]:
            self.visit(default)

    def _def(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        function = not isinstance(node, ast.ClassDef)
        if function:
            self.visit(node.args)
        self.body += function
        for stmt in body:
            self.visit(stmt)
        self.body -= function
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _def

    # -- what is mutated ----------------------------------------------------------------------
    def visit_BinOp(self, node: ast.BinOp) -> None:
        swap = _SWAP_BIN.get(type(node.op))
        if swap is not None:
            self._add(node, ast.BinOp(node.left, swap(), node.right))
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        swap = _SWAP_BIN.get(type(node.op))
        if swap is not None:
            self._add(node, ast.AugAssign(node.target, swap(), node.value), statement=True)
        self.visit(node.value)

    def visit_Compare(self, node: ast.Compare) -> None:
        for i, op in enumerate(node.ops):
            swap = _SWAP_CMP.get(type(op))
            if swap is not None:
                ops = [*node.ops[:i], swap(), *node.ops[i + 1 :]]
                self._add(node, ast.Compare(node.left, ops, node.comparators))
        for operand in [node.left, *node.comparators]:
            if isinstance(operand, ast.Constant) and isinstance(operand.value, str):
                self._add(operand, ast.Constant("XX" + operand.value + "XX"))
            else:
                self.visit(operand)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        self._add(node, ast.BoolOp(other, node.values))
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, ast.Not | ast.USub):
            self._add(node, node.operand)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, bool):
            self._add(node, ast.Constant(not value))
        elif isinstance(value, int):
            self._add(node, ast.Constant(value + 1))
        elif isinstance(value, float):
            self._add(node, ast.Constant(value * 2 if value else 1.0))

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in _SWAP_NAME and isinstance(node.ctx, ast.Load):
            self._add(node, ast.Name(_SWAP_NAME[node.id], ast.Load()))

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is not None and not (isinstance(node.value, ast.Constant) and node.value.value is None):
            self._add(node.value, ast.Constant(None))
        self.generic_visit(node)

    def _add(self, node: ast.AST, new: ast.AST, statement: bool = False) -> None:
        original = ast.get_source_segment(self.source, node)
        if original is None:
            return
        text = ast.unparse(new)
        self.found.append(
            Mutant(
                self.path,
                node.lineno,  # type: ignore[attr-defined]
                node.end_lineno,  # type: ignore[attr-defined]
                node.col_offset,  # type: ignore[attr-defined]
                node.end_col_offset,  # type: ignore[attr-defined]
                " ".join(original.split()),
                text if statement else f"({text})",
                ".".join(self.scope) or "<module>",
                0,
                self.body > 0,
            )
        )


def _is_table(value: ast.AST) -> bool:
    return isinstance(value, ast.List | ast.Tuple | ast.Dict | ast.Set)


def mutants_of(path: str) -> list[Mutant]:
    source = (ROOT / path).read_text()
    finder = _Finder(path, source)
    finder.visit(ast.parse(source))
    seen: Counter[tuple[str, str, str]] = Counter()
    out = []
    for m in finder.found:
        seen[m.where, m.original, m.replacement] += 1
        out.append(dataclasses.replace(m, nth=seen[m.where, m.original, m.replacement]))
    return out


def mutated_source(m: Mutant) -> str:
    lines = (ROOT / m.path).read_text().splitlines(keepends=True)
    head = "".join(lines[: m.line - 1]) + lines[m.line - 1].encode()[: m.col].decode()
    tail = lines[m.end_line - 1].encode()[m.end_col :].decode() + "".join(lines[m.end_line :])
    return head + m.replacement + tail


def module_name(path: str) -> str:
    parts = list(Path(path).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# -- running ---------------------------------------------------------------------------------------
# One child per module runs pytest once: it collects the tests, runs them unmutated under a line
# tracer (which tests run which lines), then forks a grandchild per mutant of a function's body, which
# swaps that function's code for the mutant's and runs the tests that run its lines, stopping at the
# first failure. A mutant at module or class level (a constant, a default) needs the module imported
# anew: the parent runs it in a fresh child whose import hook serves the mutated source.
IMPORT = "<import>"  # lines run while the tests were collected (module level), under no test


class _Serve(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves `source` as the module at `path` (the mutant), compiled under the file's own name."""

    def __init__(self, path: str, source: str) -> None:
        self.name, self.file, self.source = module_name(path), str(ROOT / path), source

    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname != self.name:
            return None
        package = [str(Path(self.file).parent)] if self.file.endswith("__init__.py") else None
        return importlib.util.spec_from_file_location(
            fullname, self.file, loader=self, submodule_search_locations=package
        )

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        return None

    def exec_module(self, module) -> None:  # type: ignore[no-untyped-def]
        exec(compile(self.source, self.file, "exec"), module.__dict__)


def _steady() -> None:
    """Hypothesis draws the same examples in every run (the baseline's coverage holds for the
    mutants) and keeps no database of failing ones between them."""
    from hypothesis import settings

    settings.register_profile("mutation", deadline=None, derandomize=True, database=None)
    settings.load_profile("mutation")


def _functions(module: types.ModuleType) -> Iterator[Any]:
    """The module's own functions and methods (properties' too), as the objects that hold their code."""
    for value in list(vars(module).values()):
        if getattr(value, "__module__", None) != module.__name__:
            continue
        if isinstance(value, type):
            for attr in vars(value).values():
                if isinstance(attr, staticmethod | classmethod):
                    attr = attr.__func__
                if isinstance(attr, property):
                    yield from (f for f in (attr.fget, attr.fset, attr.fdel) if f is not None)
                elif isinstance(attr, types.FunctionType):
                    yield attr
        elif callable(value):
            yield value


def _swap_code(m: Mutant) -> None:
    """Give the live functions of m's module the code compiled from the mutated source."""
    module = sys.modules[module_name(m.path)]
    codes: dict[str, types.CodeType] = {}

    def walk(code: types.CodeType) -> None:
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                codes[const.co_qualname] = const
                walk(const)

    walk(compile(mutated_source(m), str(ROOT / m.path), "exec"))
    for fn in _functions(module):
        if hasattr(fn, "cache_clear"):
            fn.cache_clear()
        fn = getattr(fn, "__wrapped__", fn)
        new = codes.get(getattr(fn, "__qualname__", ""))
        if isinstance(fn, types.FunctionType) and new is not None and new.co_freevars == fn.__code__.co_freevars:
            fn.__code__ = new


class _Session:
    """A pytest plugin that takes over the test loop: the baseline, then the in-process mutants."""

    def __init__(self, files: list[str], mutants: list[Mutant], out: Path) -> None:
        self.targets = {str(ROOT / f): f for f in files}
        self.mutants, self.out = mutants, out
        self.current = IMPORT
        self.lines: dict[tuple[str, int], set[str]] = {}
        self.seconds: dict[str, float] = {}
        self.failed: list[str] = []

    def _tracer(self, frame, event, arg):  # type: ignore[no-untyped-def]
        name = self.targets.get(frame.f_code.co_filename)
        if name is None:
            return None

        def local(frame, event, arg):  # type: ignore[no-untyped-def]
            if event == "line":
                self.lines.setdefault((name, frame.f_lineno), set()).add(self.current)
            return local

        self.lines.setdefault((name, frame.f_lineno), set()).add(self.current)
        return local

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config):  # type: ignore[no-untyped-def]
        _steady()
        sys.settrace(self._tracer)  # from collection on: module-level lines count under IMPORT

    def pytest_runtest_logreport(self, report):  # type: ignore[no-untyped-def]
        if report.failed:
            self.failed.append(report.nodeid)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):  # type: ignore[no-untyped-def]
        items = {item.nodeid: item for item in session.items}
        for nodeid, item in items.items():
            self.current, started = nodeid, time.monotonic()
            item.ihook.pytest_runtest_protocol(item=item, nextitem=None)
            self.seconds[nodeid] = time.monotonic() - started
        sys.settrace(None)
        base = Baseline(self.lines, self.seconds)
        outcomes: dict[str, str] = {}
        if self.failed:
            outcomes["<baseline>"] = "failed: " + ", ".join(self.failed[:3])
        else:
            for m in self.mutants:
                if m.body and (m.path, m.ident) not in EQUIVALENT:
                    tests = base.tests_for(m)
                    outcomes[m.ident + "@" + m.path] = self._run(m, [items[t] for t in tests]) if tests else "unrun"
        lines = {f"{f}:{n}": sorted(ids) for (f, n), ids in self.lines.items()}
        self.out.write_text(json.dumps({"lines": lines, "seconds": self.seconds, "outcomes": outcomes}))
        return True

    def _run(self, m: Mutant, items: list[Any]) -> str:
        limit = 10.0 + 5 * sum(self.seconds.get(i.nodeid, 1.0) for i in items)
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                self.failed = []
                _swap_code(m)
                for item in items:
                    item.ihook.pytest_runtest_protocol(item=item, nextitem=None)
                    if self.failed:
                        break
                code = 1 if self.failed else 0
            finally:
                os._exit(code)
        return _wait(pid, limit)


def _wait(pid: int, timeout_s: float) -> str:
    """killed (a test failed or errored), survived (all passed), timeout (killed too)."""
    deadline = time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return "survived" if os.waitstatus_to_exitcode(status) == 0 else "killed"
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout"
        time.sleep(0.01)


def _fork(run: Callable[[], int], timeout_s: float) -> str:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            code = run()
        finally:
            os._exit(code)
    return _wait(pid, timeout_s)


def _args(tests: Sequence[str]) -> list[str]:
    return [*PYTEST_ARGS, *(a for t in DESELECT for a in ("--deselect", t)), *tests]


@dataclass(frozen=True)
class Baseline:
    """What the unmutated module's tests ran: per (file, line), the test ids (IMPORT: at collection)."""

    lines: dict[tuple[str, int], set[str]]
    seconds: dict[str, float]

    def tests_for(self, m: Mutant) -> list[str]:
        """The tests that run the mutant's lines, fastest first; every test that runs its file when a
        line ran at import (a module-level constant reaches every function)."""
        ids: set[str] = set().union(*(self.lines.get((m.path, n), set()) for n in range(m.line, m.end_line + 1)))
        if IMPORT in ids:
            ids = set().union(*(v for (f, _), v in self.lines.items() if f == m.path)) - {IMPORT}
        return sorted(ids, key=lambda t: (self.seconds.get(t, 0.0), t))


@dataclass
class Score:
    module: str
    total: int = 0
    run: int = 0
    killed: int = 0
    equivalent: int = 0
    not_executed: int = 0
    seconds: float = 0.0
    survivors: list[Mutant] = field(default_factory=list)

    @property
    def judged(self) -> int:
        return self.run - self.equivalent

    @property
    def percent(self) -> float:
        return 100.0 * self.killed / self.judged if self.judged else 100.0


def files_of(module: str) -> list[str]:
    p = ROOT / module
    return sorted(str(f.relative_to(ROOT)) for f in p.glob("*.py")) if p.is_dir() else [module]


def mutate_module(module: str, sample: int, seed: int, show: bool) -> Score:
    """Run the module's sampled mutants (all of them with sample 0), each against the tests that run it."""
    missing = [t for t in MODULES[module] if not (ROOT / t.split("::")[0]).exists()]
    if missing:
        raise SystemExit(f"{module}: no test file {', '.join(missing)} (tools/mutate.py MODULES)")
    score = Score(module)
    every = [m for path in files_of(module) for m in mutants_of(path)]
    score.total = len(every)
    chosen = every if not sample or sample >= len(every) else random.Random(f"{seed}:{module}").sample(every, sample)
    chosen.sort(key=lambda m: (m.path, m.line, m.col))
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "session.json"
        session = _Session(files_of(module), chosen, out)
        _fork(lambda: int(pytest.main(_args(MODULES[module]), plugins=[session])), 3600)
        data = json.loads(out.read_text()) if out.exists() else {"outcomes": {"<baseline>": "no result"}}
    if "<baseline>" in data["outcomes"]:
        raise SystemExit(f"{module}: its tests fail on the unmutated code ({data['outcomes']['<baseline>']})")
    lines = {(k.rsplit(":", 1)[0], int(k.rsplit(":", 1)[1])): set(v) for k, v in data["lines"].items()}
    base = Baseline(lines, data["seconds"])
    for m in chosen:
        score.run += 1
        if (m.path, m.ident) in EQUIVALENT:
            score.equivalent += 1
            continue
        outcome = data["outcomes"].get(m.ident + "@" + m.path)
        if outcome is None:  # module or class level: a fresh import of the mutated source
            tests = base.tests_for(m)
            outcome = _fresh(m, tests, 20.0 + 5 * sum(base.seconds.get(t, 1.0) for t in tests)) if tests else "unrun"
        if outcome == "unrun":
            score.not_executed += 1
        if outcome in ("killed", "timeout"):
            score.killed += 1
        else:
            score.survivors.append(m)
            if show:
                print(f"  survived ({outcome}) {m.path}:{m.line}  {m.ident}", flush=True)
    score.seconds = time.monotonic() - started
    return score


def _fresh(m: Mutant, tests: list[str], timeout_s: float) -> str:
    def run() -> int:
        sys.meta_path.insert(0, _Serve(m.path, mutated_source(m)))

        class Steady:
            @pytest.hookimpl(trylast=True)
            def pytest_configure(self, config):  # type: ignore[no-untyped-def]
                _steady()

        return int(pytest.main(_args(tests), plugins=[Steady()]))

    return _fork(run, timeout_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", default=list(MODULES), help="keys of MODULES (default: all)")
    parser.add_argument("--sample", type=int, default=SAMPLE, help="mutants per module, at random (0: all)")
    parser.add_argument("--seed", type=int, default=58)
    parser.add_argument("--survivors", action="store_true", help="list each surviving mutant")
    parser.add_argument("--list", action="store_true", help="only list the mutants, run nothing")
    parser.add_argument("--min-score", type=float, default=90.0, help="exit 1 below this overall %%")
    args = parser.parse_args(argv)
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        parser.error(f"not a mutated module: {', '.join(unknown)} (one of {', '.join(MODULES)})")
    if args.list:
        for module in args.modules:
            for path in files_of(module):
                for m in mutants_of(path):
                    print(f"{m.path}:{m.line}  {m.ident}")
        return 0
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            __import__(name)
    scores: list[Score] = []
    started = time.monotonic()
    print(f"{'module':26} {'mutants':>7} {'run':>5} {'equiv':>5} {'killed':>6} {'unexec':>6} {'score':>7} {'time':>6}")
    for module in args.modules:
        s = mutate_module(module, args.sample, args.seed, args.survivors)
        scores.append(s)
        row = f"{s.module:26} {s.total:7d} {s.run:5d} {s.equivalent:5d} {s.killed:6d} {s.not_executed:6d}"
        print(f"{row} {s.percent:6.1f}% {s.seconds:5.0f}s", flush=True)
    judged, killed = sum(s.judged for s in scores), sum(s.killed for s in scores)
    overall = 100.0 * killed / judged if judged else 100.0
    minutes = (time.monotonic() - started) / 60
    print(f"overall: {killed} of {judged} non-equivalent mutants killed ({overall:.1f}%) in {minutes:.1f} min")
    return 0 if overall >= args.min_score else 1


if __name__ == "__main__":
    sys.exit(main())
