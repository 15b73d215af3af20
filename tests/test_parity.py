"""The loss verdict (bench/results/parity.py), the loss curve's file and tracker, the learning-rate
fields and schedule: pure functions and in-process pieces. The end-to-end run is test_parity_e2e.py."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.compare.comparison import judge_parity
from bench.errors import BadInput
from bench.planner.matrix import expand
from bench.recipe.scenario import DEFAULT_LEARNING_RATE, Scenario
from bench.report.table import parity_cell
from bench.results import losscurve, parity
from bench.results.losscurve import Curve, final_window
from bench.results.parity import Parity, add_parity, band, judge, seed_scenarios

losses_st = st.floats(min_value=0.5, max_value=20.0, allow_nan=False)
refs_st = st.lists(losses_st, min_size=2, max_size=6, unique=True)


# -- the band and the verdict ----------------------------------------------------------------------
def test_band_is_the_prediction_interval_of_one_more_seed() -> None:
    # two seeds 0.1 apart: sd = 0.0707, t(0.975, 1) = 12.706, sqrt(1.5) = 1.2247
    assert band([8.0, 8.1]) == pytest.approx(12.706 * 0.070711 * 1.224745, rel=1e-3)
    # three seeds: t(0.975, 2) = 4.303, sd = 0.1, sqrt(4/3)
    assert band([8.0, 8.1, 8.2]) == pytest.approx(4.303 * 0.1 * math.sqrt(4 / 3), rel=1e-3)
    assert band([8.0, 8.0]) == pytest.approx(0.002 * 8.0)  # seeds that agree: the floor
    assert math.isnan(band([8.0])) and math.isnan(band([8.0, math.nan]))


def test_the_verdicts_and_their_statistic() -> None:
    ref = [8.0, 8.1, 8.2]
    half = band(ref)
    inside, outside = judge(8.1 + half * 0.9, ref), judge(8.1 - half * 1.1, ref)
    assert (inside.verdict, outside.verdict) == ("equivalent", "deviates")
    assert inside.delta == pytest.approx(half * 0.9) and outside.delta == pytest.approx(-half * 1.1)
    assert inside.seeds == 3 and inside.band == half
    assert judge(math.nan, ref).verdict == "diverged"
    assert judge(8.1, ref, finite=False).verdict == "diverged"  # a NaN loss along the way
    exploded = judge(30.0, ref, start=10.0)
    assert exploded.verdict == "diverged" and "1.5x" in exploded.why
    one_seed = judge(8.1, [8.0])
    assert one_seed.verdict == "" and "parity_seeds" in one_seed.why


def test_the_verdict_reads_as_a_sentence() -> None:
    assert Parity("equivalent", 0.0031, 0.0214, 3).text() == "loss equivalent (delta +0.0031 within ±0.0214, 3 seeds)"
    assert Parity("deviates", -0.5, 0.02, 2).text() == "loss deviates (delta -0.5 beyond ±0.02, 2 seeds)"
    assert Parity("diverged", math.nan, math.nan, 2, "a loss that is not finite").text() == (
        "loss diverged: a loss that is not finite"
    )
    assert Parity("reference", 0.0, 0.1, 2).text() == "the loss reference"


@given(refs_st, st.floats(min_value=-3.0, max_value=3.0), st.floats(min_value=-5.0, max_value=5.0))
def test_the_verdict_does_not_depend_on_where_the_losses_lie(ref: list[float], k: float, shift: float) -> None:
    """Shifting every loss alike moves nothing but the floor; k bands away decides it."""
    half = band(ref)
    mean = sum(ref) / len(ref)
    if abs(abs(k) - 1) < 1e-6 or half <= 0.002 * abs(mean) * 1.001:  # on the edge, or at the floor
        return
    got = judge(mean + k * half, ref).verdict
    shifted = judge(mean + shift + k * band([r + shift for r in ref]), [r + shift for r in ref]).verdict
    assert got == ("equivalent" if abs(k) < 1 else "deviates")
    assert shifted == got or band([r + shift for r in ref]) <= 0.002 * abs(mean + shift) * 1.001


@given(refs_st)
def test_the_reference_mean_is_equivalent_and_the_band_is_at_least_the_spread(ref: list[float]) -> None:
    mean = sum(ref) / len(ref)
    assert judge(mean, ref).verdict == "equivalent"
    assert band(ref) >= max(abs(r - mean) for r in ref)  # every reference seed is inside its own band


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=4), st.floats(allow_nan=True))
def test_judge_never_raises_and_names_a_known_verdict(ref: list[float], candidate: float) -> None:
    assert judge(candidate, ref).verdict in ("", "equivalent", "deviates", "diverged")


# -- the rows of a run ---------------------------------------------------------------------------
def rows(**final: float) -> list[dict[str, Any]]:
    return [
        {
            "scenario": name,
            "repeat": 0,
            "status": "ok",
            "final_window_loss": v,
            "initial_loss": 8.3,
            "loss_finite": True,
        }
        for name, v in final.items()
    ]


def test_add_parity_judges_every_row_against_the_reference_seeds() -> None:
    rs = rows(**{"baseline": 8.30, "bf16": 8.301, "lr-x1000": 8.9, "baseline.seed43": 8.32})
    rs.append({"scenario": "nan", "repeat": 0, "status": "diverged", "final_window_loss": math.nan})
    rs.append({"scenario": "oom", "repeat": 0, "status": "oom"})
    add_parity(rs)
    got = {r["scenario"]: r.get("parity") for r in rs}
    assert got == {
        "baseline": "reference",
        "baseline.seed43": "reference",
        "bf16": "equivalent",
        "lr-x1000": "deviates",
        "nan": "diverged",
        "oom": None,
    }
    bf16 = rs[1]
    assert bf16["parity_delta"] == pytest.approx(8.301 - 8.31) and bf16["parity_band"] == pytest.approx(
        band([8.3, 8.32])
    )
    assert (bf16["parity_seeds"], bf16["parity_ref"]) == (2, "baseline")
    add_parity(rs, reference="bf16")  # a reference of one seed: no band, nothing judged but a divergence
    assert [r.get("parity") for r in rs] == ["", None, "", "", "diverged", None]
    assert rs[0]["parity_seeds"] == 1 and rs[0]["parity_delta"] == pytest.approx(8.30 - 8.301)


def test_seed_scenarios_copy_the_reference_at_the_next_seeds() -> None:
    base = (Scenario("baseline", model="tiny", seed=7), Scenario("bf16", model="tiny", precision="bf16"))
    out = seed_scenarios(base, "baseline", 3)
    assert [(s.name, s.seed) for s in out] == [
        ("baseline", 7),
        ("bf16", 42),
        ("baseline.seed8", 8),
        ("baseline.seed9", 9),
    ]
    assert out[2].settings() == {
        **base[0].settings(),
        "name": "baseline.seed8",
        "seed": 8,
        "description": out[2].description,
    }
    assert seed_scenarios(base, "baseline", 1) == base and seed_scenarios(base, "absent", 3) == base
    assert parity.is_reference("baseline.seed8", "baseline") and not parity.is_reference("baseline.seedx", "baseline")
    with pytest.raises(BadInput, match="baseline.seed8.*taken"):
        seed_scenarios((*base, Scenario("baseline.seed8", model="tiny")), "baseline", 2)
    with pytest.raises(BadInput, match="parity_seeds = 0"):
        seed_scenarios(base, "baseline", 0)


def test_the_matrix_names_the_reference_and_its_seeds() -> None:
    data = {"matrix": {"parity_reference": "fp32", "parity_seeds": 3}, "scenarios": {"fp32": {}, "bf16": {}}}
    m = expand(data, origin="m.toml")
    assert (m.parity_reference, m.parity_seeds) == ("fp32", 3)
    assert (expand({"scenarios": {"a": {}}}, origin="m.toml").parity_reference) == "baseline"
    with pytest.raises(BadInput, match=r"parity_reference = 'fp33' is not one of its scenarios"):
        expand({**data, "matrix": {"parity_reference": "fp33"}}, origin="m.toml")
    with pytest.raises(BadInput, match="parity_seeds = 11 must be a whole number from 1 to 10"):
        expand({**data, "matrix": {"parity_seeds": 11}}, origin="m.toml")


# -- the learning rate and its schedule ---------------------------------------------------------------
def test_the_learning_rate_fields_validate_and_resolve() -> None:
    sc = Scenario("a", model="tiny", samples=40, batch_size=4, warmup_steps=1)
    assert sc.effective_learning_rate == DEFAULT_LEARNING_RATE and sc.loss_every == 1
    assert Scenario("a", model="tiny", samples=4000, learning_rate=0.05).loss_every == 10  # 1000 steps
    assert Scenario("a", model="tiny", loss_every_steps=7).loss_every == 7
    for key, value, why in (
        ("learning_rate", 0.0, "must be a positive number"),
        ("learning_rate", "1e-4", "must be a positive number"),
        ("lr_schedule", "cosin", "did you mean 'cosine'"),
        ("lr_warmup_steps", -1, "at least 0"),
    ):
        with pytest.raises(BadInput, match=f"scenario 'a': {key} = .*{why}"):
            Scenario("a", model="tiny", **{key: value})


def test_both_engines_build_the_schedule_transformers_names() -> None:
    pytest.importorskip("transformers")
    import torch

    from bench.worker.schedule import make_scheduler, scheduler_name

    sc = Scenario("a", model="tiny", samples=40, batch_size=4, warmup_steps=1, lr_schedule="constant")
    assert scheduler_name(sc) == "constant"
    warm = sc.replace(lr_warmup_steps=2)
    assert scheduler_name(warm) == "constant_with_warmup"
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = make_scheduler(sc.replace(lr_schedule="linear", lr_warmup_steps=2), opt)
    rates = []
    for _ in range(10):  # the epoch's 10 optimizer steps
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert rates[:3] == [0.0, 0.5, 1.0] and rates[-1] == pytest.approx(1 / 8)  # warm-up, then linear to 0


# -- the loss curve ----------------------------------------------------------------------------------
def test_final_window_is_the_mean_of_the_last_fifth_of_the_steps() -> None:
    steps = list(range(1, 11))
    assert final_window(steps, [float(s) for s in steps]) == pytest.approx(9.5)  # steps 9 and 10
    assert final_window([5], [3.0]) == 3.0 and math.isnan(final_window([], []))
    assert math.isnan(final_window([1, 2], [1.0, math.nan]))


def test_a_curve_round_trips_through_its_file(tmp_path: Path) -> None:
    data = {"every_steps": 2, "steps": [2, 4, 5], "loss": [8.0, None, 7.5]}
    written = losscurve.write_curve(tmp_path, "bf16.x", 1, data)
    assert written is not None and not written.finite
    path = tmp_path / "losses" / "bf16.x-r1.json"
    assert json.loads(path.read_text())["loss"] == [8.0, None, 7.5]
    back = losscurve.read_curves(tmp_path)[("bf16.x", 1)]
    assert back.steps == (2, 4, 5) and back.initial == 8.0 and back.loss[2] == 7.5 and math.isnan(back.loss[1])
    assert losscurve.write_curve(tmp_path, "empty", 0, {"every_steps": 1, "steps": [], "loss": []}) is None
    path.write_text('{"steps": [2, 1], "loss": [1, 2], "every_steps": 1, "scenario": "s", "repeat": 0}')
    with pytest.raises(BadInput, match="not a gpubench loss curve"):
        losscurve.read_curves(tmp_path)


def test_the_tracker_folds_the_losses_into_block_means() -> None:
    pytest.importorskip("torch")
    import torch

    from bench.worker.tracking import LossTracker

    tracker = LossTracker(fold_every=4, every_steps=2, micro_per_step=3)  # a point per 6 micro-batches
    assert tracker.fold_every == 6
    for i in range(15):  # 5 optimizer steps: 2 points and a last one of 1 step
        tracker.track(torch.tensor(float(i)))
    assert tracker.result()["final_loss"] == 14.0
    curve = tracker.curve()
    assert curve == {"every_steps": 2, "steps": [2, 4, 5], "loss": [2.5, 8.5, 13.0]}
    bad = LossTracker()
    for value in (1.0, float("nan")):
        bad.track(torch.tensor(value))
    bad.scale = 2.0  # the Trainer's losses over 2 accumulation steps
    assert bad.curve()["loss"] == [2.0, None]
    scaled = LossTracker()
    scaled.track(torch.tensor(1.5))
    scaled.scale = 4.0  # final_loss is the model's loss too, as the curve is (issue 58)
    assert scaled.result()["final_loss"] == 6.0 and scaled.curve()["loss"] == [6.0]


# -- where it is shown ----------------------------------------------------------------------------------
def test_compare_turns_equivalent_into_deviates_a_regression() -> None:
    def side(verdict: str, delta: float) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {
                    "scenario": "bf16",
                    "status": "ok",
                    "parity": verdict,
                    "parity_delta": delta,
                    "parity_band": 0.02,
                    "parity_seeds": 3,
                }
            ]
        )

    worse = judge_parity(side("equivalent", 0.001), side("deviates", 0.5))
    assert worse is not None and worse["verdict"] == "regression"
    assert worse["note"] == (
        "loss deviates (delta +0.5 beyond ±0.02, 3 seeds); base: loss equivalent (delta +0.001 within ±0.02, 3 seeds)"
    )
    back = judge_parity(side("diverged", math.nan), side("equivalent", 0.001))
    assert back is not None and back["verdict"] == "improvement"
    same = judge_parity(side("equivalent", 0.001), side("equivalent", 0.002))
    assert same is not None and same["verdict"] == "unchanged" and same["note"].startswith("loss equivalent")
    assert judge_parity(side("", math.nan), side("", math.nan)) is None


def test_the_run_table_cell() -> None:
    assert parity_cell({"parity": "deviates", "parity_delta": 0.5731}) == "deviates +0.573"
    assert parity_cell({"parity": "equivalent", "parity_delta": 0.0001}) == "equivalent"
    assert parity_cell({"parity": "reference"}) == "ref"
    assert parity_cell({"parity": math.nan}) == "-" and parity_cell({}) == "-"


@settings(max_examples=25)
@given(st.lists(st.sampled_from(["", "equivalent", "deviates", "diverged", "reference"]), max_size=5))
def test_a_scenario_takes_the_worst_verdict_of_its_rows(verdicts: list[str]) -> None:
    got = parity.worst(verdicts)
    order = ["diverged", "deviates", "equivalent", "reference"]
    assert got == next((v for v in order if v in verdicts), "")


def test_a_curve_of_its_own() -> None:
    curve = Curve("s", 0, 1, (1, 2, 3, 4, 5), (9.0, 8.0, 7.0, 6.0, 5.0))
    assert curve.finite and curve.initial == 9.0 and curve.final_window == 5.0
