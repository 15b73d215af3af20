"""Loss verdicts a wrong operator would change unseen (make mutation): an ok row whose losses were
not all finite, the explosion rule's edges, losses too large to square, the seeds' names and range,
and the sentences and row fields the verdict is shown from."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from bench.planner.matrix import MAX_PARITY_SEEDS
from bench.recipe.scenario import Scenario
from bench.results.parity import HUGE, Parity, add_parity, band, judge, row_parity, seed_scenarios, worst

REF = [8.0, 8.1, 8.2]


def run(**rows: dict[str, Any]) -> dict[str, Any]:
    """add_parity over a reference of two seeds (8.30, 8.32) and the given rows; each row's parity."""
    base = {"repeat": 0, "status": "ok", "initial_loss": 10.0, "loss_finite": True}
    rs = [
        {**base, "scenario": "baseline", "final_window_loss": 8.30},
        {**base, "scenario": "baseline.seed43", "final_window_loss": 8.32},
        *({**base, "scenario": name, "final_window_loss": 8.31, **row} for name, row in rows.items()),
    ]
    add_parity(rs)
    return {r["scenario"]: r.get("parity") for r in rs}


@pytest.mark.parametrize(
    "row",
    [
        {"nonfinite_losses": 3},  # a NaN early in the curve: the final window is finite again
        {"nonfinite_losses": "2"},
        {"loss_finite": False},
        {"loss_finite": "false"},
        {"loss_finite": "False"},
        {"loss_finite": np.False_},
    ],
)
def test_an_ok_row_with_a_non_finite_loss_is_diverged_not_equivalent(row: dict[str, Any]) -> None:
    assert run(row=row)["row"] == "diverged"


@pytest.mark.parametrize("row", [{}, {"nonfinite_losses": 0}, {"nonfinite_losses": None}, {"loss_finite": "True"}])
def test_an_ok_row_whose_losses_were_finite_is_judged(row: dict[str, Any]) -> None:
    assert run(row=row)["row"] == "equivalent"


def test_the_reference_rows_and_the_statuses_judged() -> None:
    got = run(failed={"status": "oom"}, gone={"status": "diverged", "final_window_loss": 8.31})
    assert got == {"baseline": "reference", "baseline.seed43": "reference", "failed": None, "gone": "diverged"}
    rs = [{"scenario": "x", "repeat": 0, "status": "ok", "final_window_loss": 8.0}]
    add_parity(rs)  # no reference row at all: nothing is judged
    assert "parity" not in rs[0]


def test_the_reference_is_the_median_of_each_seeds_repeats() -> None:
    base = {"status": "ok", "initial_loss": 10.0}
    rs = [
        {**base, "scenario": "baseline", "repeat": 0, "final_window_loss": 8.0},
        {**base, "scenario": "baseline", "repeat": 1, "final_window_loss": 8.2},
        {**base, "scenario": "baseline", "repeat": 2, "final_window_loss": 9.0},
        {**base, "scenario": "baseline.seed2", "repeat": 0, "final_window_loss": 8.4},
        {**base, "scenario": "baseline.seed2", "repeat": 1, "final_window_loss": math.nan},
        {**base, "scenario": "baseline.seed3", "repeat": 0, "final_window_loss": 8.0, "status": "oom"},
        {**base, "scenario": "x", "repeat": 0, "final_window_loss": 8.3},
    ]
    add_parity(rs)
    x = rs[-1]
    assert x["parity_seeds"] == 2 and x["parity_delta"] == pytest.approx(8.3 - 8.3)
    assert x["parity_band"] == pytest.approx(band([8.2, 8.4]))
    assert rs[0]["parity"] == "reference" and rs[0]["parity_delta"] == pytest.approx(8.0 - 8.3)


def test_the_explosion_rule_and_its_edges() -> None:
    assert judge(12.0, [8.0, 8.0], start=8.0).verdict == "deviates"  # exactly 1.5x: not above it
    assert judge(12.01, [8.0, 8.0], start=8.0).verdict == "diverged"
    assert judge(8.1, REF, start=0.9).verdict == "diverged"  # a start below 1 still counts
    assert judge(8.1, REF, start=0.0).verdict == "equivalent"  # no start known
    assert judge(8.1, REF, start=-1.0).verdict == "equivalent"
    assert judge(8.1, REF, start=math.inf).verdict == "equivalent"
    exploded = judge(30.0, REF, start=10.0)
    assert exploded.why == "final loss above 1.5x the reference's initial 10"
    assert exploded.delta == pytest.approx(30.0 - 8.1) and exploded.seeds == 3


def test_a_loss_too_large_to_square_is_not_finite() -> None:
    assert judge(2 * HUGE, REF).verdict == "diverged"
    assert judge(HUGE, REF).verdict == "diverged"
    assert judge(8.1, [*REF, HUGE, -2 * HUGE]).seeds == 3
    assert band([8.0, 8.2, HUGE]) == band([8.0, 8.2])
    assert judge(8.1, []).verdict == "" and judge(8.1, []).why == "the reference has no finite loss"
    assert judge(8.1, []).seeds == 0


def test_the_verdicts_sentences() -> None:
    assert Parity("", math.nan, math.nan, 0).text() == "loss not judged"
    assert Parity("", 0.1, math.nan, 1, "one seed").text() == "loss not judged (one seed)"
    assert Parity("deviates", 0.1, math.nan, 1).text() == "loss deviates (delta +0.1)"
    assert Parity("deviates", math.nan, 0.2, 2).text() == "loss deviates (band ±0.2, 2 seeds)"
    assert Parity("equivalent", 0.2, 0.2, 2).text() == "loss equivalent (delta +0.2 within ±0.2, 2 seeds)"
    assert Parity("deviates", 0.3, 0.2, 2, "why").text() == "loss deviates (delta +0.3 beyond ±0.2, 2 seeds)"
    assert Parity("diverged", math.nan, math.nan, 0, "").text() == "loss diverged"


def test_a_rows_parity_as_shown() -> None:
    assert row_parity({}) == Parity("", math.nan, math.nan, 0) or row_parity({}).seeds == 0
    p = row_parity({"parity": "deviates", "parity_delta": 0.5, "parity_band": 0.1, "parity_seeds": 3.0})
    assert (p.verdict, p.delta, p.band, p.seeds) == ("deviates", 0.5, 0.1, 3)
    assert row_parity({"parity": math.nan, "parity_seeds": math.nan}).verdict == ""
    assert row_parity({"parity_seeds": math.nan}).seeds == 0
    assert row_parity({"parity_delta": True}).delta != row_parity({"parity_delta": True}).delta  # a bool is no figure
    assert worst(["equivalent", "deviates", None, "x"]) == "deviates" and worst([]) == ""


def test_the_seeds_wrap_at_2_to_the_32_and_run_up_to_the_maximum() -> None:
    ref = Scenario("baseline", model="tiny", seed=2**32 - 1)
    out = seed_scenarios((ref,), "baseline", 3)
    assert [(s.name, s.seed) for s in out[1:]] == [("baseline.seed0", 0), ("baseline.seed1", 1)]
    assert out[1].description == "parity: baseline at seed 0"
    assert len(seed_scenarios((ref,), "baseline", MAX_PARITY_SEEDS)) == MAX_PARITY_SEEDS
    assert seed_scenarios((ref,), "baseline", 1) == (ref,)
    assert seed_scenarios((ref,), "other", 3) == (ref,)
