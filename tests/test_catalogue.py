"""bench/catalogue.py, the one place a results column is declared: every column once, in order;
the rank rules bench/worker/ranks.py applies, the metrics, the probes' columns and docs/columns.md's
tables are read off it, and no judged figure or rank rule is declared anywhere else."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import catalogue, metrics
from bench.catalogue import CATALOGUE, GROUPS, JOB_RULES, RANK_RULES, Column, Judged
from bench.measure.probes import PROBES
from bench.results import columns
from bench.worker import ranks

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
NAMES = {c.name for c in CATALOGUE}


def test_every_results_column_is_one_row_in_the_rows_order() -> None:
    assert len(NAMES) == len(CATALOGUE)
    assert [c.name for c in CATALOGUE] == columns.COLUMNS
    order = [GROUPS.index(c.group) for c in CATALOGUE]
    assert order == sorted(order)  # each group one run of rows, in GROUPS order


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"group": "speedy"}, "group 'speedy'"),
        ({"ranks": "median"}, "ranks 'median'"),
        ({"ranks": None}, "a judged figure says how its ranks combine"),
        ({"ranks": "union"}, "a judged figure says how its ranks combine"),
        ({"ranks": "slowest", "of": "window_s"}, "of= goes with"),
    ],
)
def test_a_bad_row_is_refused_naming_the_column_and_the_field(change: dict[str, Any], problem: str) -> None:
    fields = {**catalogue.BY_NAME["samples_per_s"].__dict__, **change}
    with pytest.raises(ValueError, match="column 'samples_per_s': .*" + problem):
        Column(**fields)


# -- a judged figure and a rank rule are declared in the catalogue only ------------------------
HOMES = {"Metric": ("bench/metrics.py", "metrics"), "Judged": ("bench/catalogue.py", "catalogue")}


def calls(path: Path, name: str) -> list[int]:
    """Lines that call bench's `name` (Metric, Judged): by name where the module is its home or
    imports it from there, or as an attribute of its home module (`metrics.Metric(...)`)."""
    home, module = HOMES[name]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    ours = str(path.relative_to(ROOT)) == home or any(
        isinstance(node, ast.ImportFrom)
        and (node.module or "").split(".")[-1] == module
        and any(alias.name == name for alias in node.names)
        for node in ast.walk(tree)
    )
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (ours and isinstance(node.func, ast.Name) and node.func.id == name)
            or (
                isinstance(node.func, ast.Attribute)
                and node.func.attr == name
                and ast.unparse(node.func.value) == module
            )
        )
    ]


def test_a_judged_figure_is_declared_in_the_catalogue_only() -> None:
    found = {
        (str(p.relative_to(ROOT)), name): lines
        for p in sorted(BENCH.rglob("*.py"))
        for name in ("Metric", "Judged")
        if (lines := calls(p, name))
    }
    judged = len([c for c in CATALOGUE if c.metric is not None])
    assert set(found) == {("bench/catalogue.py", "Judged"), ("bench/metrics.py", "Metric")}
    assert len(found["bench/catalogue.py", "Judged"]) == judged  # one Judged per judged column
    assert len(found["bench/metrics.py", "Metric"]) == 1  # made from the rows, in one place


def column_name_lists(path: Path) -> list[tuple[int, list[str]]]:
    """Tuple and list literals of two or more strings, all of them results columns."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Tuple | ast.List) and len(node.elts) > 1:
            values = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(values) == len(node.elts) and all(v in NAMES for v in values):
                out.append((node.lineno, values))
    return out


@pytest.mark.parametrize(
    "module",
    ["worker/ranks.py", "metrics.py", "measure/probes.py", "measure/gpuwatch.py"],
)
def test_modules_made_from_the_catalogue_hold_no_column_lists_of_their_own(module: str) -> None:
    assert column_name_lists(BENCH / module) == []


def test_the_scan_finds_a_column_list() -> None:
    source = BENCH.parent / "tests" / "_scan_probe.py"
    try:
        source.write_text('MAX_KEYS = ("window_s", "first_step_s")\n', encoding="utf-8")
        assert column_name_lists(source) == [(1, ["window_s", "first_step_s"])]
    finally:
        source.unlink()


# -- the metrics are the judged rows -----------------------------------------------------------
def test_the_metrics_are_the_judged_columns_with_their_rank_rule() -> None:
    judged = {c.name: c for c in CATALOGUE if c.metric is not None}
    assert set(metrics.BY_NAME) == set(judged)
    for m in metrics.METRICS:
        column = judged[m.name]
        assert (m.unit, m.rank_aggregation) == (column.unit, RANK_RULES[str(column.ranks)][0])
    assert [judged[m.name].metric.order for m in metrics.METRICS] == sorted(  # type: ignore[union-attr]
        judged[m.name].metric.order  # type: ignore[union-attr]
        for m in metrics.METRICS
    )


def test_a_judged_row_whose_traits_break_a_metric_rule_is_refused() -> None:
    bad = Column("x_per_s", "x/s", "speed", "x", ranks="sum", metric=Judged(9, "up", None, None, frozenset(), "x", 0))
    with pytest.raises(ValueError, match="metric 'x_per_s': direction 'up'"):
        metrics._metric(bad)


# -- the rank rules, as bench/worker/ranks.py applies them -------------------------------------
RULED = [c for c in CATALOGUE if c.ranks in ("sum", "min", "max", "mean", "slowest")]


def two_ranks(key: str, first: float, second: float) -> list[dict[str, Any]]:
    base = {"window_s": 1.0, "window_samples": 10, "loss_finite": True}
    return [
        {**base, "step_time_median_ms": 10.0, key: first},
        {**base, "step_time_median_ms": 12.0, key: second},  # rank 1 is the slowest
    ]


@pytest.mark.parametrize("column", RULED, ids=[c.name for c in RULED])
def test_a_columns_rank_rule_is_what_combine_ranks_gives(column: Column) -> None:
    read = column.of or column.name
    job = ranks.combine_ranks(two_ranks(read, 3.0, 5.0), "trainer")
    if read == "step_time_median_ms":
        job = ranks.combine_ranks(two_ranks(read, 10.0, 12.0), "trainer")
        assert job[column.name] == 12.0
        return
    expected = {"sum": 8.0, "min": 3.0, "max": 5.0, "mean": 4.0, "slowest": 5.0}[str(column.ranks)]
    assert job[column.name] == pytest.approx(expected)


@pytest.mark.parametrize(
    "column", [c for c in RULED if c.ranks != "slowest" and c.name != "window_s"], ids=lambda c: c.name
)
def test_a_figure_no_rank_measured_is_empty(column: Column) -> None:
    job = ranks.combine_ranks(two_ranks("unrelated", 1.0, 1.0), "trainer")
    assert job[column.name] is None


def test_the_jobs_own_columns_are_the_catalogues_job_rules() -> None:
    rank = {"window_s": 1.0, "window_samples": 10, "loss_finite": True, "tokens_per_s": 100.0}
    rank |= {"step_time_median_ms": 10.0, "trainer_samples_per_s": 9.0}
    job = ranks._job([rank, dict(rank)], "accelerate", dict(rank), 0)
    assert set(job) == {c.name for c in CATALOGUE if c.ranks in JOB_RULES}


def test_rank_figures_hold_the_per_rank_columns() -> None:
    job = ranks.combine_ranks(two_ranks("window_steps", 3, 4), "trainer")
    per_rank = [c.name for c in CATALOGUE if c.per_rank]
    assert [list(r) for r in json.loads(job["rank_figures"])] == [[*per_rank, "host", "counts_samples", "rank"]] * 2


def test_rank_only_keys_stay_out_of_the_row() -> None:
    job = ranks.combine_ranks([{"host": "a", "counts_samples": True, "window_s": 1.0}] * 2, "trainer")
    assert "host" not in job and "counts_samples" not in job


# -- the probes' columns are their catalogue rows --------------------------------------------
def test_each_probe_returns_its_catalogue_rows() -> None:
    assert {c.probe for c in CATALOGUE if c.probe} == {p.name for p in PROBES}
    for probe in PROBES:
        assert probe.columns == catalogue.probe_columns(probe.name)
        assert probe.columns  # a probe without rows measures nothing


# -- docs/columns.md ---------------------------------------------------------------------------
def columns_doc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "columns_doc.py"), "--check", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_docs_tables_are_the_catalogues() -> None:
    done = columns_doc()
    assert (done.returncode, done.stderr) == (0, "")


def test_a_docs_table_that_differs_from_the_catalogue_fails_naming_it(tmp_path: Path) -> None:
    page = tmp_path / "columns.md"
    text = (ROOT / "docs" / "columns.md").read_text(encoding="utf-8")
    page.write_text(text.replace("| `mfu` | model FLOPs", "| `mfu` | the model FLOPs"), encoding="utf-8")
    done = columns_doc("--doc", str(page))
    assert done.returncode == 1
    assert "the table(s) of flop differ from bench/catalogue.py" in done.stderr


def test_every_group_has_a_table_in_the_docs() -> None:
    text = (ROOT / "docs" / "columns.md").read_text(encoding="utf-8")
    shown = {g for line in text.splitlines() if line.startswith("<!-- catalogue: ") for g in line[16:-4].split()}
    assert shown == set(GROUPS)
