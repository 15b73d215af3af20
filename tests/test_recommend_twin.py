"""recommend --twin: a staged answer judged on its exhaustive twin's own probes (the gap to the twin's
best with its interval, within 5%), and every twin that cannot answer refused before any work."""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.errors import BadInput
from bench.recommend.answer import BELOW, UNPROBED, CandidateResult, build_answer, read_answer, write_answer
from bench.recommend.answer_text import summary_lines, twin_line
from bench.recommend.race import BUDGET_SPENT
from bench.recommend.twin import TOLERANCE_PCT, Twin, check_against, load_twin

SETTINGS = {"model": "llama-1b", "gpu_memory": "24GB", "axes": ["precision", "optimizer"], "exhaustive": False}


def candidate(name: str, speed: float) -> CandidateResult:
    return CandidateResult(
        name=name, axes={"x": name}, fields={}, outcome="raced", why="", probes=3, objective=speed,
        samples_per_s=speed, peak_mem_mb=1.0, pred_peak_allocated_mb=None, energy_per_sample_j=None, bound=None,
        mfu_ceiling=None, parity="equivalent", parity_delta=0.0,
    )  # fmt: skip


def answer(  # noqa: ANN201
    winner: str | None,
    wall_s: float = 100.0,
    stopped: str = "one candidate left",
    others: dict[str, float] | None = None,
):
    results = [candidate(winner, 1.0)] if winner else []
    results += [candidate(name, speed) for name, speed in (others or {}).items() if name != winner]
    return build_answer("speed", results, (), stopped, "lm-synthetic", "causal-lm", "cuda", None, 0.15, wall_s)


def twin(best: str | None, probes: dict[str, list[float]]) -> Twin:
    """An exhaustive twin: every candidate in its answer at the median of its probes, as its table shows it."""
    rows = {
        (name, i): {"scenario": name, "status": "ok", "v": v} for name, vs in probes.items() for i, v in enumerate(vs)
    }
    rows[("parity.plain", 0)] = {"scenario": "parity.plain", "status": "ok", "v": 1.0}  # a check, not a probe
    medians = {name: statistics.median(vs) for name, vs in probes.items()}
    return Twin(Path("twin"), dataclasses.replace(answer(best, wall_s=600.0, others=medians), winner=best), rows)


def figure(row) -> float | str:  # noqa: ANN001
    return float(row["v"]) if row["status"] == "ok" else str(row["status"])


def test_the_same_recipe_holds_exactly_and_the_times_of_both_searches_are_said() -> None:
    check = check_against(
        answer("a", wall_s=250.0), twin("a", {"a": [40.0, 41.0, 39.0], "b": [30.0] * 3}), figure, "speed"
    )
    assert (check.ratio, check.verdict, check.why) == (1.0, "holds", "the same recipe")
    assert (check.search_s, check.twin_search_s, check.twin_probes) == (250.0, 600.0, 6)
    assert "this search 250 s (4.2 GPU-minutes) against the twin's 600 s (6 probes)" in twin_line(check, "speed")


@settings(max_examples=60, deadline=None)
@given(st.floats(0.5, 1.0), st.lists(st.floats(-0.002, 0.002), min_size=6, max_size=6))
def test_another_winner_is_judged_on_the_twins_probes_against_the_5_percent_edge(share: float, noise: list) -> None:
    """Two candidates the twin measured 3 times each, the winner at `share` of the best: the verdict
    follows the interval around the true share (noise 0.2%): holds well above 95%, not well below."""
    best = [40.0 * (1 + e) for e in noise[:3]]
    mine = [40.0 * share * (1 + e) for e in noise[3:]]
    check = check_against(answer("w"), twin("b", {"b": best, "w": mine}), figure, "speed")
    assert check.low is not None and check.high is not None and check.low <= check.ratio <= check.high
    assert abs(check.ratio - share) < 0.01
    edge = 1 - TOLERANCE_PCT / 100
    if share > edge + 0.02:
        assert check.verdict == "holds"
    elif share < edge - 0.02:
        assert check.verdict == "does not hold" and f"{check.ratio:.3f}x" in twin_line(check, "speed")


def test_a_winner_the_twin_never_measured_or_no_answer_at_all_does_not_hold() -> None:
    failed = twin("b", {"b": [40.0] * 3})
    failed.rows[("w", 0)] = {"scenario": "w", "status": "oom", "v": None}
    check = check_against(answer("w"), failed, figure, "speed")
    assert (check.verdict, check.why) == ("does not hold", "w has no ok probe in the twin")
    assert check_against(answer(None), twin("b", {"b": [1.0] * 3}), figure, "speed").verdict == "does not hold"
    nothing = check_against(answer("w"), twin(None, {"w": [1.0] * 3}), figure, "speed")
    assert (nothing.verdict, nothing.why) == ("not comparable here", "the twin recommends nothing")


def test_the_check_reads_back_from_recommend_json_and_shows_in_the_summary(tmp_path: Path) -> None:
    check = check_against(answer("w"), twin("b", {"b": [40.0, 40.2, 39.8], "w": [39.0, 39.1, 38.9]}), figure, "speed")
    done = dataclasses.replace(answer("w"), twin=check)
    write_answer(tmp_path, done)
    again = read_answer(tmp_path)
    assert again == done and again is not None and again.twin is not None
    assert twin_line(check, "speed") in summary_lines(again)
    assert json.loads((tmp_path / "recommend.json").read_text())["twin"]["verdict"] == check.verdict


def stored(tmp_path: Path, name: str, exhaustive: bool, stopped: str = "3 rounds", **changed: object) -> Path:
    d = tmp_path / name
    d.mkdir()
    env = {"recommend": {"settings": {**SETTINGS, **changed, "exhaustive": exhaustive}}}
    (d / "env.json").write_text(json.dumps(env), encoding="utf-8")
    write_answer(d, answer("a", stopped=stopped))
    return d


def test_a_twin_that_cannot_answer_is_refused_with_one_line(tmp_path: Path) -> None:
    assert load_twin(stored(tmp_path, "ok", True), SETTINGS).answer.winner == "a"
    refusals = {
        tmp_path / "missing": "not a gpubench recommend directory",
        stored(tmp_path, "staged", False): "a staged search, not an --exhaustive one",
        stored(tmp_path, "unfinished", True, BUDGET_SPENT): "the exhaustive search is unfinished",
        stored(tmp_path, "other", True, gpu_memory="80GB"): "made with --gpu-memory = '80GB', not '24GB'",
    }
    for path, said in refusals.items():
        with pytest.raises(BadInput, match=said):
            load_twin(path, SETTINGS)


def test_a_twin_from_another_model_of_gpu_is_refused_with_one_line(tmp_path: Path) -> None:
    """The staged winner is read off the twin's probes: a twin from another card (an H100's, for a
    search on an H200) answers for that card, so it is refused before any work; the same card, or both
    on the CPU, is accepted."""
    from bench.recommend.twin import check_same_card

    h100 = {"name": "NVIDIA H100 80GB HBM3", "memory_total_mb": 81559.0}
    d = stored(tmp_path, "h100", True)
    env = json.loads((d / "env.json").read_text()) | {"gpu": h100}
    (d / "env.json").write_text(json.dumps(env), encoding="utf-8")
    check_same_card(load_twin(d, SETTINGS), dict(h100, uuid="GPU-other"))  # another card of the same model: accepted
    with pytest.raises(BadInput, match=r"measured on NVIDIA H100 80GB HBM3, and this search runs on NVIDIA H200 \("):
        check_same_card(load_twin(d, SETTINGS), {"name": "NVIDIA H200"})
    with pytest.raises(BadInput, match="and this search runs on the CPU"):
        check_same_card(load_twin(d, SETTINGS), None)
    check_same_card(load_twin(stored(tmp_path, "cpu", True), SETTINGS), None)  # both on the CPU


def test_the_twin_line_shows_each_figure_as_the_twins_own_table_does() -> None:
    """One figure wherever it is shown: the line gives the best's and this winner's figures as the
    twin's answer shows them (the median of their probes), not another statistic of the same probes
    (it gave the geometric mean, 88.33 against the table's 88.19); the ratio and its interval stay
    those of the geometric means. On the published Liger twin (H100, 24 GB) and its staged answer."""
    from bench.recommend.resume import earlier_rows

    sets = Path(__file__).resolve().parents[1] / "results" / "recommend" / "llama-1b-24gb-twin" / "liger"
    exhaustive, staged = read_answer(sets / "exhaustive"), read_answer(sets / "staged")
    assert exhaustive is not None and staged is not None
    check = check_against(
        staged, Twin(sets / "exhaustive", exhaustive, earlier_rows(sets / "exhaustive")), figure_of, "speed"
    )
    table = {c.name: c.samples_per_s for c in exhaustive.candidates}
    assert check.best_value == table["bf16.b32x1.ckpt.adamw_fused.liger"]
    assert check.winner_value == table["bf16.b8x4.ckpt.adamw_8bit"]
    line = twin_line(check, "speed")
    assert f"at {table['bf16.b32x1.ckpt.adamw_fused.liger']:.4g} samples/s" in line
    assert "0.577x on speed (0.550-0.605)" in line and "does not hold" in line


def figure_of(row) -> float | str:  # noqa: ANN001
    value = row.get("samples_per_s")
    return float(value) if row.get("status") == "ok" and isinstance(value, float) else str(row.get("status"))


def test_a_micro_batch_the_stages_passed_over_says_which_larger_one_ran() -> None:
    """Each stage races a recipe at its largest micro-batch that fits: the smaller ones of that recipe
    are not measured, and the answer says why (naming the one that ran), not "off the staged path";
    the lost line groups them so."""
    ran = dataclasses.replace(candidate("r.b8x1", 80.0), axes={"batch": "b8x1", "x": "r"}, fields={"batch_size": 8})
    oom = dataclasses.replace(
        candidate("r.b16x1", 1.0), axes={"batch": "b16x1", "x": "r"}, fields={"batch_size": 16}, outcome="failed",
        why="oom", objective=None, samples_per_s=None,
    )  # fmt: skip
    smaller = [
        dataclasses.replace(
            candidate(f"r.b{m}x{8 // m}", 1.0),
            axes={"batch": f"b{m}x{8 // m}", "x": "r"},
            fields={"batch_size": m},
            outcome="skipped",
            why=UNPROBED,
            objective=None,
            samples_per_s=None,
        )  # fmt: skip
        for m in (4, 2)
    ]
    other = dataclasses.replace(
        candidate("s.b4x2", 1.0), axes={"batch": "b4x2", "x": "s"}, fields={"batch_size": 4}, outcome="skipped",
        why=UNPROBED, objective=None, samples_per_s=None,
    )  # fmt: skip
    answer = build_answer(
        "speed", [ran, oom, *smaller, other], (), "one candidate left", "lm-synthetic", "causal-lm", "cuda", None,
        0.15, 10.0,
    )  # fmt: skip
    why = {c.name: c.why for c in answer.candidates}
    assert why["r.b4x2"] == why["r.b2x4"] == f"{BELOW} (r.b8x1)"
    assert why["s.b4x2"] == UNPROBED  # its recipe never ran: nothing to name
    assert why["r.b16x1"] == "oom"
    assert any(
        line.startswith("b2x4 (batch)") and "the same recipe ran at a larger micro-batch" in line
        for line in answer.lost
    )
