"""Scaling lines (bench.report.scaling_curves): rows in, one line per strategy and workload out."""

from __future__ import annotations

import math
import statistics
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.report.scaling_curves import ScalingLine, ScalingPoint, scaling_lines, strategy_label, workloads

STRATEGIES: dict[str, dict[str, Any]] = {  # label -> the row's strategy settings
    "ddp": {"strategy": "ddp"},
    "fsdp full": {"strategy": "fsdp", "fsdp_sharding": "full"},
    "fsdp grad_op": {"strategy": "fsdp", "fsdp_sharding": "grad_op"},
    "zero2": {"strategy": "deepspeed", "zero_stage": 2},
    "zero3 + offload": {"strategy": "deepspeed", "zero_stage": 3, "offload": "params"},
}
PLAIN = {"strategy": "none", "zero_stage": 0, "fsdp_sharding": "full", "offload": "none"}


def row(scenario: str, sps: float, world: int | None, status: str = "ok", **settings: Any) -> dict[str, Any]:
    """A results row as read back from results.csv (a plain single-GPU row has no world_size)."""
    return {
        "scenario": scenario,
        "status": status,
        "samples_per_s": sps,
        "world_size": math.nan if world is None else float(world),
        "gpus": world or 1,
        "batch_size": 8,
        "model_resolved": "bert-large",
        "engine": "accelerate",
        **PLAIN,
        **settings,
    }


def plain(scenario: str, sps: float, **settings: Any) -> dict[str, Any]:
    return row(scenario, sps, None, **settings)


def parallel(scenario: str, label: str, sps: float, world: int, **settings: Any) -> dict[str, Any]:
    return row(scenario, sps, world, **{**STRATEGIES[label], **settings})


def test_a_line_per_strategy_from_its_own_or_the_plain_one_gpu_rows() -> None:
    rows = [
        plain("single", 100.0),
        plain("single", 104.0),
        plain("single", 98.0),
        parallel("ddp", "ddp", 190.0, 2),
        parallel("ddp", "ddp", 180.0, 2),
        parallel("ddp", "ddp", 200.0, 2),
        parallel("fsdp-1", "fsdp full", 80.0, 1),
        parallel("fsdp", "fsdp full", 120.0, 2),
        parallel("trainer-ddp", "ddp", 170.0, 2, engine="trainer"),  # no trainer run on one GPU
        parallel("ddp", "ddp", 10.0, 2, status="oom"),
    ]
    assert scaling_lines(rows) == (
        ScalingLine(
            "ddp",
            "",
            (ScalingPoint(1, 100.0, 3, 1.0, ("single",)), ScalingPoint(2, 190.0, 3, 0.95, ("ddp",))),
        ),
        ScalingLine(
            "fsdp full",
            "",
            (ScalingPoint(1, 80.0, 1, 1.0, ("fsdp-1",)), ScalingPoint(2, 120.0, 1, 0.75, ("fsdp",))),
        ),
    )


def test_workloads_are_named_by_what_differs_and_kept_apart() -> None:
    rows = [
        plain("single", 100.0),
        plain("single-b4", 40.0, batch_size=4),
        parallel("ddp", "ddp", 180.0, 2),
        parallel("ddp-b4", "ddp", 60.0, 2, batch_size=4),
        parallel("ddp-b4-4", "ddp", 100.0, 4, batch_size=4),
    ]
    lines = scaling_lines(rows)
    assert [(line.label, line.workload, [p.gpus for p in line.points]) for line in lines] == [
        ("ddp", "batch 8", [1, 2]),
        ("ddp", "batch 4", [1, 2, 4]),
    ]
    assert lines[1].points[2].efficiency == 100.0 / (4 * 40.0)
    assert [(name, len(group)) for name, group in workloads(lines)] == [("batch 8", 1), ("batch 4", 1)]


def test_no_line_without_a_second_gpu_count() -> None:
    rows = [
        plain("single", 100.0, batch_size=16),  # another workload: no reference for the others
        parallel("ddp", "ddp", 180.0, 2),
        parallel("zero2", "zero2", 150.0, 2),
        parallel("zero2", "zero2", 150.0, 2, status="oom"),
    ]
    assert scaling_lines(rows) == ()
    assert scaling_lines([plain("single", 100.0)]) == ()


def test_strategy_labels() -> None:
    assert strategy_label(PLAIN) == "none"
    assert strategy_label({"strategy": "deepspeed", "zero_stage": 3.0, "offload": "params"}) == "zero3 + offload"
    assert strategy_label({"strategy": "deepspeed", "zero_stage": 2, "offload": "optimizer"}) == (
        "zero2 + optimizer offload"
    )
    assert strategy_label({"strategy": "fsdp", "fsdp_sharding": "grad_op", "offload": "none"}) == "fsdp grad_op"


# -- properties ------------------------------------------------------------------------------------
measured = st.tuples(
    st.sampled_from([None, *STRATEGIES]),  # None: a plain single-GPU row
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([4, 8]),
    st.sampled_from(["ok", "ok", "oom"]),
    st.floats(1.0, 1000.0),
)


def make_rows(specs: list[tuple[str | None, int, int, str, float]]) -> list[dict[str, Any]]:
    """One scenario name per (strategy, GPUs, batch), as a matrix would name them."""
    return [
        plain(f"single-b{batch}", sps, batch_size=batch, status=status)
        if label is None
        else parallel(f"{label}-{world}-b{batch}", label, sps, world, batch_size=batch, status=status)
        for label, world, batch, status, sps in specs
    ]


@settings(max_examples=150, deadline=None)
@given(st.lists(measured, max_size=30))
def test_every_point_is_the_median_of_its_rows_at_its_gpu_count(specs: list[Any]) -> None:
    rows = make_rows(specs)
    for line in scaling_lines(rows):
        gpus = [p.gpus for p in line.points]
        assert len(gpus) >= 2 and gpus == sorted(set(gpus))
        for p in line.points:
            behind = [r for r in rows if r["scenario"] in p.scenarios and r["status"] == "ok"]
            assert {r["gpus"] for r in behind} == {p.gpus}
            assert len(behind) == p.n
            assert p.samples_per_s == statistics.median(r["samples_per_s"] for r in behind)
        one = line.points[0]
        if one.gpus == 1:
            assert [p.efficiency is not None for p in line.points] == [True] * len(gpus)
            assert one.efficiency == 1.0
        else:
            assert all(p.efficiency is None for p in line.points)


@settings(max_examples=100, deadline=None)
@given(st.lists(measured, max_size=30))
def test_a_line_for_each_strategy_at_two_gpu_counts_and_no_other(specs: list[Any]) -> None:
    ok = [s for s in specs if s[3] == "ok"]
    singles = {batch for label, _, batch, _, _ in ok if label is None}
    expected = set()
    for label in STRATEGIES:
        for batch in (4, 8):
            counts = {world for lbl, world, b, _, _ in ok if lbl == label and b == batch}
            if batch in singles:
                counts.add(1)
            if len(counts) >= 2:
                expected.add((label, batch))
    lines = scaling_lines(make_rows(specs))
    assert len(lines) == len(expected)
    if len({line.workload for line in lines}) > 1:  # named by batch: "batch 4"
        assert {(line.label, int(line.workload.split()[1])) for line in lines} == expected
    else:  # one workload, not named
        assert {line.label for line in lines} == {label for label, _ in expected}
