"""bench.metrics, the contract every row keeps: parametrized from METRICS itself, so a new metric
is checked by adding it. Its columns are results.csv columns, its direction and threshold make
sense, and every stage that the row says judges it does (compare, history, summary, report), on
tiny hand-built result sets, while the others leave it out."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from history_support import env, reps, write_run

from bench.catalogue import CATALOGUE, PARENT_RULES
from bench.cli import history_cmd
from bench.compare.comparison import Thresholds, compare
from bench.history import check, ingest, schema
from bench.metrics import BY_NAME, DIRECTIONS, METRICS, THRESHOLD_GROUPS, Metric, in_group
from bench.report import content as report_data
from bench.results import COLUMNS, load_run, summarize, to_frame
from bench.worker.ranks import combine_ranks

IDS = [m.name for m in METRICS]
# combined from the parent's measurement, not by combine_ranks: the largest GPU's NVML peak
# energy per sample: the parent divides the ranks' summed gpu_energy_j by the job's window samples
# (bench/measure/gpuwatch.per_work; the sum is test_gpuwatch's)
COMBINED_BY_THE_PARENT = {"peak_mem_mb": "max", "energy_per_sample_j": "sum"}
# a metric whose column has a parent rule in bench/catalogue.py: combined by the parent too
BY_THE_PARENT = {c.name for c in CATALOGUE if c.ranks in PARENT_RULES}


def worse(metric: Metric, value: float, pct: float = 50.0) -> float:
    """value moved pct% the wrong way for the metric."""
    return value * (1 - metric.sign * pct / 100)


def rows_with(scenario: str, speeds: list[float], changed: Metric | None = None) -> list[dict[str, Any]]:
    """history_support's rows (every judged figure set); changed: that metric made 50% worse."""
    rows = reps(scenario, speeds)
    for row in rows:
        for m in METRICS:  # a metric the fixture does not fill follows the speed, the better way
            if m.threshold is not None and row.get(m.name) is None:
                row[m.name] = float(row["samples_per_s"]) if m.sign > 0 else 1000.0 / float(row["samples_per_s"])
        row["step_time_median_ms"] = 40.0  # the same on both sides unless changed
        # the loss within its band on both sides (bench/results/parity.py)
        row.update({"parity": "equivalent", "parity_delta": 0.001, "parity_band": 0.01, "parity_seeds": 3})
        if changed is not None and changed.threshold is not None:
            row[changed.name] = worse(changed, float(row[changed.name]))
    return rows


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("metrics")
    base = load_run(write_run(root / "base", rows_with("baseline", [100.0, 100.5, 99.5]), env(1)))
    return {"root": root, "base": base}


# -- the row itself ------------------------------------------------------------------------------
@pytest.mark.parametrize("metric", METRICS, ids=IDS)
def test_its_columns_are_results_columns(metric: Metric) -> None:
    assert [c for c in metric.columns if c not in COLUMNS] == []
    assert metric.columns[0] == metric.name


@pytest.mark.parametrize("metric", METRICS, ids=IDS)
def test_its_direction_threshold_and_rank_rule_are_known(metric: Metric) -> None:
    assert metric.direction in DIRECTIONS
    assert metric.sign == (1 if metric.direction == "higher" else -1)
    assert metric.threshold in (*THRESHOLD_GROUPS, None)
    if metric.threshold is not None:
        assert metric.default_threshold_pct is not None and metric.default_threshold_pct > 0
        assert Thresholds().for_metric(metric.name) == metric.default_threshold_pct


@pytest.mark.parametrize("group", THRESHOLD_GROUPS)
def test_the_metrics_of_a_threshold_group_share_its_default(group: str) -> None:
    defaults = {m.default_threshold_pct for m in in_group(group)}
    assert len(defaults) == 1


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"direction": "up"}, "direction 'up'"),
        ({"rank_aggregation": "median"}, "rank_aggregation 'median'"),
        ({"judged_in": frozenset({"nightly"})}, "judged_in nightly"),
        ({"threshold": None}, "a threshold group and a default threshold go together"),
        ({"columns": ("peak_mem_mb",)}, "columns must start with its own column"),
        ({"best": ""}, "judged in the report"),
    ],
)
def test_a_bad_row_is_refused_naming_the_metric_and_the_field(change: dict[str, Any], problem: str) -> None:
    fields = {**BY_NAME["samples_per_s"].__dict__, **change}
    with pytest.raises(ValueError, match="metric 'samples_per_s': .*" + problem):
        Metric(**fields)


@pytest.mark.parametrize("metric", [m for m in METRICS if m.name not in BY_THE_PARENT], ids=lambda m: m.name)
def test_its_rank_rule_is_the_one_combine_ranks_applies(metric: Metric) -> None:
    ranks: list[dict[str, Any]] = [
        {"window_s": 1.0, "window_samples": 100, "loss_finite": True, "step_time_median_ms": 10.0},
        {"window_s": 1.0, "window_samples": 120, "loss_finite": True, "step_time_median_ms": 12.0},
    ]
    ranks[0].setdefault(metric.name, 100.0)
    ranks[1].setdefault(metric.name, 120.0)
    values = [float(r[metric.name]) for r in ranks]
    slowest = max(range(len(ranks)), key=lambda i: float(ranks[i]["step_time_median_ms"]))
    expected = {
        "sum": sum(values),
        "min": min(values),
        "max": max(values),
        "mean": sum(values) / len(values),
        "slowest": values[slowest],
        "rank0": values[0],
    }[metric.rank_aggregation]
    assert combine_ranks(ranks, "trainer")[metric.name] == pytest.approx(expected)


def test_metrics_combined_by_the_parent_say_so() -> None:
    assert {m: BY_NAME[m].rank_aggregation for m in COMBINED_BY_THE_PARENT} == COMBINED_BY_THE_PARENT
    assert set(COMBINED_BY_THE_PARENT) <= BY_THE_PARENT


# -- compare -------------------------------------------------------------------------------------
@pytest.mark.parametrize("metric", METRICS, ids=IDS)
def test_compare_judges_it_where_the_row_says(sides: dict[str, Any], metric: Metric) -> None:
    new_dir = write_run(
        sides["root"] / f"new-{metric.name}", rows_with("baseline", [100.0, 100.5, 99.5], metric), env(2)
    )
    new = load_run(new_dir)
    base = sides["base"]
    rows = compare(base.frame, new.frame, base.env, new.env).rows
    judged = rows[rows["metric"] == metric.name]
    if "compare" not in metric.judged_in:
        assert judged.empty
        return
    assert len(judged) == 1
    row = judged.iloc[0]
    if metric.threshold is None:
        assert row["verdict"] == "unchanged"  # the loss stayed finite
    else:
        assert row["threshold_pct"] == metric.default_threshold_pct
        assert row["verdict"] == "regression"
        assert math.copysign(1, row["change_pct"]) == -metric.sign


# -- history -------------------------------------------------------------------------------------
def test_the_history_store_holds_no_column_per_figure() -> None:
    """Since schema version 4 the figures are rows (metric, value): a metric judged in the history
    later needs no column and no migration (bench/history/migrate.py)."""
    columns = {c.name for table in schema.metadata.tables.values() for c in table.columns}
    assert not columns & {m.name for m in METRICS}


@pytest.mark.parametrize("metric", METRICS, ids=IDS)
def test_history_stores_shows_and_judges_it_where_the_row_says(sides: dict[str, Any], metric: Metric) -> None:
    stored = "history" in metric.judged_in
    judged = stored and metric.threshold is not None
    assert (metric.name in schema.FIGURES) is stored
    assert (metric.name in {m.value for m in history_cmd.Metric}) is stored
    assert (metric.name in check.METRICS) is judged
    assert (metric.name in {m.value for m in history_cmd.AcceptMetric}) is judged
    record = ingest.read_result_dir(sides["base"].csv_path.parent)
    assert (metric.name in record.results[0].figures) is stored
    assert metric.name in record.results[0].repeat_figures[0] or not stored


def series_of(metric: Metric, values: list[float], last: float) -> check.Series:
    """Three nights at the values, then a night of three repeats at `last`."""
    start = datetime(2026, 11, 1, 2)
    nights = [*values, last]
    points = tuple(
        check.Point(
            run_id=i + 1,
            created_at=start + timedelta(days=i),
            status="ok",
            values={metric.name: v},
            repeats={metric.name: (v * 0.999, v, v * 1.001)},
        )
        for i, v in enumerate(nights)
    )
    return check.Series("k", "baseline", "NVIDIA H200", "bert-large", {}, points)


@pytest.mark.parametrize("metric", [m for m in METRICS if "history" in m.judged_in], ids=lambda m: m.name)
def test_history_check_flags_a_move_the_wrong_way_only_for_a_judged_metric(metric: Metric) -> None:
    series = series_of(metric, [100.0, 100.2, 99.8], worse(metric, 100.0))
    last = check.marks(series, metric.name, check.Params())[-1]
    assert last.flag == (check.BEYOND if metric.threshold is not None else check.WITHIN)


# -- summary and report --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def two_scenarios() -> pd.DataFrame:
    rows = rows_with("baseline", [100.0, 100.5, 99.5]) + [
        {**row, "scenario": "other"} for row in rows_with("other", [150.0, 150.5, 149.5])
    ]
    for row in rows[3:]:
        row["peak_mem_mb"] = 800.0
    return to_frame([{**row, "peak_mem_source": "nvml-process"} for row in rows])


@pytest.mark.parametrize("metric", METRICS, ids=IDS)
def test_the_summary_judges_it_against_the_baseline_where_the_row_says(
    two_scenarios: pd.DataFrame, metric: Metric
) -> None:
    summary = summarize(two_scenarios)
    judged = "summary" in metric.judged_in
    assert (f"{metric.name}_vs_baseline_pct" in summary) is judged
    assert (f"{metric.name}_vs_baseline_noise" in summary) is judged
    if judged:
        other = summary[summary["scenario"] == "other"].iloc[0]
        assert not math.isnan(other[f"{metric.name}_vs_baseline_pct"])
        assert other[f"{metric.name}_vs_baseline_noise"] == "beyond"


@pytest.mark.parametrize("metric", METRICS, ids=IDS)
def test_the_report_names_the_best_scenario_on_it_where_the_row_says(
    two_scenarios: pd.DataFrame, metric: Metric
) -> None:
    report = report_data.build(two_scenarios, env(1), Path("results.csv"))
    lines = report_data.findings(report)
    named = [line for line in lines if metric.best and line.startswith(f"{metric.best}: other at ")]
    assert bool(named) is ("report" in metric.judged_in)
