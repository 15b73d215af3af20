"""gpubench recommend: the space per family, the memory pruning, the answer's rules (a deviating
candidate cannot win; the Pareto front leaves it out), the certificate a matrix `run` reads."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.errors import BadInput
from bench.families import by_name, family_of
from bench.planner.matrix import load_matrix
from bench.recipe.scenario import Scenario
from bench.recommend.answer import CandidateResult, build_answer, certificate_toml, pareto, read_answer, write_answer
from bench.recommend.prune import MEMORY_MARGIN, predicted_peaks, prune_by_memory
from bench.recommend.searching import RecommendRequest, check_request, objective_value
from bench.recommend.space import PLAIN, Candidate, build_space, micro_batches, plain_fields, valid_candidates
from bench.recommend.stages import StageReport

ALL = frozenset({"bitsandbytes", "liger_kernel", "torchao"})


@given(st.integers(1, 4096))
def test_micro_batches_always_make_the_global_batch(global_batch: int) -> None:
    pairs = micro_batches(global_batch)
    assert pairs and pairs[0] == (global_batch, 1)
    assert all(m * k == global_batch for m, k in pairs)
    assert [m for m, _ in pairs] == sorted({m for m, _ in pairs}, reverse=True)


def axes_of(space) -> dict[str, list[str]]:  # noqa: ANN001
    return {name: [label for label, _ in choices] for name, choices in space.axes}


def test_a_decoder_on_cuda_with_every_package_searches_liger_fp8_and_8bit() -> None:
    axes = axes_of(build_space(by_name("llama"), cuda=True, global_batch=32, installed=ALL))
    assert axes["precision"] == ["bf16", "fp16", "tf32", "fp8"]
    assert axes["liger"] == ["", "liger"] and "adamw_8bit" in axes["optimizer"]
    assert axes["batch"] == ["b32x1", "b16x2", "b8x4", "b4x8"]
    assert "adapters" not in axes  # LoRA only when allowed


def test_what_the_space_leaves_out_is_said() -> None:
    space = build_space(by_name("llama"), cuda=True, global_batch=8, installed=frozenset())
    notes = " | ".join(f"{n.axis}: {n.why}" for n in space.notes)  # as the answer shows them
    assert "precision: fp8: needs torchao" in notes and "| liger: needs liger_kernel" in notes
    assert "8-bit AdamW" in notes
    assert "liger" not in axes_of(space)


def test_bert_takes_no_liger_and_lora_only_where_its_family_takes_it() -> None:
    bert = build_space(by_name("bert"), cuda=True, global_batch=8, installed=ALL, allow=("lora",))
    assert "liger" not in axes_of(bert) and "fp8" not in axes_of(bert)["precision"]
    assert any("takes no lora" in n.why for n in bert.notes) or "lora" in axes_of(bert).get("adapters", [])
    vit = build_space(family_of("vit-tiny"), cuda=True, global_batch=8, installed=ALL, allow=("lora", "qlora"))
    assert axes_of(vit)["adapters"] == ["", "lora"] and any("takes no qlora" in n.why for n in vit.notes)


def test_on_the_cpu_only_fp32_and_no_compile() -> None:
    axes = axes_of(build_space(by_name("llama"), cuda=False, global_batch=8, installed=ALL))
    assert axes["precision"] == ["fp32"] and axes["compile"] == [""] and "liger" not in axes


def test_axes_keeps_the_others_at_their_default_and_names_a_wrong_axis() -> None:
    space = build_space(by_name("llama"), cuda=False, global_batch=8, axes=("checkpointing",))
    names = ["fp32.b1x8.adamw", "fp32.b1x8.ckpt2.adamw", "fp32.b1x8.ckpt.adamw"]  # the plain micro-batch
    assert [c.name for c in space.candidates()] == names
    with pytest.raises(BadInput, match="--axes nope"):
        build_space(by_name("llama"), cuda=False, global_batch=8, axes=("nope",))


def test_a_combination_the_scenario_refuses_is_left_out_with_its_reason() -> None:
    invalid_on = {}
    for cuda in (True, False):
        space = build_space(by_name("llama"), cuda=cuda, global_batch=16, installed=ALL, allow=("lora", "qlora"))
        kept, invalid = valid_candidates(space.candidates(), "llama-tiny", {})
        invalid_on[cuda] = invalid
        for c in kept:
            Scenario(name=c.name, model="llama-tiny", **c.fields)  # validates itself
        assert len(kept) + len(invalid) == len(space.candidates())
        Scenario(name=PLAIN, model="llama-tiny", **plain_fields(cuda, 16))
    assert "cannot be combined with quantize_base" in invalid_on[True]["fp8.b16x1.adamw_fused.qlora"]


def test_checkpointing_is_none_every_other_layer_or_every_layer_where_the_family_has_layers() -> None:
    space = build_space(by_name("llama"), cuda=False, global_batch=8, axes=("checkpointing",))
    assert [c.fields["checkpoint_every"] for c in space.candidates()] == [0, 2, 0]
    kept, _ = valid_candidates(space.candidates(), "llama-tiny", {})
    assert len(kept) == 3
    tv = build_space(by_name("torchvision"), cuda=False, global_batch=8, axes=("checkpointing",))
    kept, invalid = valid_candidates(tv.candidates(), "tv-vit-tiny", {})
    assert [c.name for c in kept] == ["fp32.b1x8.adamw"] and len(invalid) == 2


def test_the_plain_recipe_trains_the_same_global_batch() -> None:
    fields = plain_fields(False, 32)
    assert fields["batch_size"] * fields["grad_accum_steps"] == 32 and fields["optimizer"] == "adamw"


def test_the_memory_model_prunes_only_beyond_its_margin() -> None:
    small = Scenario(name="b2", model="llama-tiny", batch_size=2, seq_len=32)
    big = Scenario(name="b64", model="llama-tiny", batch_size=64, seq_len=512, warmup_steps=1)
    from bench.predict.predictions import prediction_of

    small_mb = prediction_of(small, "llama-tiny").peak / 2**20
    big_mb = prediction_of(big, "llama-tiny").peak / 2**20
    cap = (small_mb + big_mb) / 2
    assert big_mb * (1 - MEMORY_MARGIN) > cap  # the test's premise
    pruned = prune_by_memory(predicted_peaks({"b2": small, "b64": big}, "llama-tiny"), cap)
    assert set(pruned) == {"b64"} and "beyond the memory model's 15% margin" in pruned["b64"]
    near = prune_by_memory(
        predicted_peaks({"b64": big}, "llama-tiny"), big_mb * 0.95
    )  # within the margin: raced, not pruned
    assert near == {}


def test_a_lower_bound_prunes_only_when_it_alone_exceeds_the_cap() -> None:
    from bench.predict.predictions import prediction_of

    sc = Scenario(name="b2", model="vit-tiny", batch_size=2, warmup_steps=1)
    low = prediction_of(sc, "vit-tiny")
    assert not low.activations_predicted  # the premise: ViT has no activation model
    mb = low.peak / 2**20
    assert prune_by_memory(predicted_peaks({"b2": sc}, "vit-tiny"), mb * 1.01) == {}
    assert "a lower bound" in prune_by_memory(predicted_peaks({"b2": sc}, "vit-tiny"), mb * 0.99)["b2"]


def result(name: str, speed: float, parity: str = "equivalent", outcome: str = "raced", mem: float = 100.0):  # noqa: ANN201
    return CandidateResult(
        name=name, axes={"x": name}, fields={"batch_size": 4}, outcome=outcome, why="", probes=2, objective=speed,
        samples_per_s=speed, peak_mem_mb=mem, pred_peak_allocated_mb=None, energy_per_sample_j=None, bound=None,
        mfu_ceiling=None, parity=parity, parity_delta=0.0,
    )  # fmt: skip


def test_a_lower_bound_reads_as_one_in_every_output(tmp_path: Path) -> None:
    """A candidate whose family has no activation model has a lower bound, not a peak: the table and
    the report show it as >=, and recommend.json keeps it in its own field (read back the same)."""

    from bench.recommend.answer import read_answer, write_answer
    from bench.recommend.answer_text import row_cells

    bound = dataclasses.replace(result("qwen", 10.0), pred_peak_min_mb=9159.2)
    peak = dataclasses.replace(result("llama", 9.0), pred_peak_allocated_mb=18540.4)
    answer = answer_of([bound, peak])
    cells = {r.name: row_cells(answer, r)[4] for r in answer.candidates}
    assert cells == {"qwen": ">=9,159", "llama": "18,540"}
    write_answer(tmp_path, answer)
    again = read_answer(tmp_path)
    assert again is not None and {r.name: row_cells(again, r)[4] for r in again.candidates} == cells


def test_a_resumed_answer_gives_its_sitting_and_the_whole_search(tmp_path: Path) -> None:
    """wall_s is this sitting's; a resumed search's answer also gives the whole search's time, in
    the summary line and in recommend.json (search_s), and reads back the same."""
    from bench.recommend.answer import read_answer, write_answer
    from bench.recommend.answer_text import summary_lines

    answer = dataclasses.replace(answer_of([result("a", 10.0)]), wall_s=50.0, earlier_sittings_s=(100.0, 30.0))
    line = next(x for x in summary_lines(answer) if x.startswith("candidates:"))
    assert line.endswith("; 50 s this sitting, 180 s over the search's 3 sittings"), line
    write_answer(tmp_path, answer)
    assert json.loads((tmp_path / "recommend.json").read_text())["search_s"] == 180.0
    assert read_answer(tmp_path) == answer
    once = dataclasses.replace(answer, earlier_sittings_s=())
    assert next(x for x in summary_lines(once) if x.startswith("candidates:")).endswith("; 50 s")


def answer_of(results: list[CandidateResult]):  # noqa: ANN201
    return build_answer("speed", results, (), "one candidate left", "lm-synthetic", "causal-lm", "cpu", 100.0, 0.15, 1)


def test_a_deviating_candidate_cannot_win_and_leaves_the_pareto_front() -> None:
    answer = answer_of([result("fast", 10.0, "deviates"), result("ok", 8.0), result("slow", 5.0, mem=50.0)])
    assert answer.winner == "ok" and answer.runner_up == "slow"
    assert "fast" not in answer.pareto and set(answer.pareto) == {"ok", "slow"}


def test_no_equivalent_candidate_no_recommendation() -> None:
    answer = answer_of([result("a", 10.0, "deviates"), result("b", 9.0, "")])
    assert answer.winner is None and any("no recommendation" in n for n in answer.notes)


def test_the_pareto_front_keeps_only_undominated_candidates() -> None:
    rs = [result("a", 10.0, mem=200.0), result("b", 8.0, mem=100.0), result("c", 7.0, mem=150.0)]
    assert pareto(rs) == ("a", "b")


def test_a_front_member_whose_loss_was_not_judged_says_so() -> None:
    """Only the finalists' loss is judged: a Pareto member that was not (on an H100, llama-1b's Liger
    recipe, the lightest) is marked, not shown as if it trained the same."""
    from bench.recommend.answer_text import summary_lines

    answer = answer_of([result("fast", 10.0, mem=200.0), result("light", 5.0, parity="", mem=100.0)])
    line = next(x for x in summary_lines(answer) if x.startswith("Pareto front"))
    assert line.endswith(": fast, light (loss not judged)"), line


def test_a_family_that_lost_on_speed_says_by_how_much_with_its_interval() -> None:
    """Issue 61's answer names why each eliminated family lost, 'slower by X% with interval': the
    closest of the family (its best figure), as the race eliminated it."""

    def out(name: str, speed: float, by: str) -> CandidateResult:
        why = f"slower than fp32.b8x1.adamw by {by} (interval 5.0% to 20.0%)"
        return dataclasses.replace(result(name, speed, parity="", outcome="eliminated"), why=why)

    rs = [
        result("fp32.b8x1.adamw", 10.0),
        out("fp32.b4x2.ckpt.adamw", 8.0, "20.0%"),
        out("fp32.b2x4.ckpt.adamw", 9.0, "10.0%"),
    ]
    rs = [dataclasses.replace(r, axes={"checkpointing": "ckpt" if ".ckpt." in r.name else ""}) for r in rs]
    (line,) = answer_of(rs).lost
    assert line == (
        "ckpt (checkpointing): 2 candidates out; most often: slower (interval separated); the closest, "
        "fp32.b2x4.ckpt.adamw, slower than fp32.b8x1.adamw by 10.0% (interval 5.0% to 20.0%)"
    )


def test_a_choice_whose_candidates_were_never_measured_did_not_lose() -> None:
    """A race whose budget ended before it measured a choice's candidates gives that choice no
    "lost" line (on the CPU, a 2-minute budget spent on the plain recipe's checks listed every axis
    choice as "out; most often: not measured"); a choice with one refused candidate still has one."""
    from bench.recommend.answer import UNPROBED

    def skipped(name: str, ckpt: str, why: str = UNPROBED) -> CandidateResult:
        return dataclasses.replace(
            result(name, 0.0, parity="", outcome="skipped"), why=why, objective=None, samples_per_s=None,
            axes={"checkpointing": ckpt},
        )  # fmt: skip

    never = [skipped("a.ckpt", "ckpt"), skipped("b.ckpt", "ckpt"), skipped("c.ckpt2", "ckpt2")]
    assert answer_of(never).lost == ()
    refused = [*never, skipped("d.ckpt2", "ckpt2", "out of memory, predicted 900 MB > 100 MB")]
    (line,) = answer_of(refused).lost
    assert line == "ckpt2 (checkpointing): 2 candidates out; most often: out of memory (predicted)"


def test_the_certificate_is_a_matrix_run_reads(tmp_path: Path) -> None:
    answer = answer_of([result("fp32.b8x1.ckpt.adamw", 10.0)])
    plain = Candidate(PLAIN, plain_fields(False, 8), {})
    path = tmp_path / "recommended.toml"
    path.write_text(certificate_toml(answer, {"model": "llama-tiny", "seq_len": 32}, plain), encoding="utf-8")
    matrix = load_matrix(str(path))
    assert [s.name for s in matrix.scenarios] == [PLAIN, "fp32.b8x1.ckpt.adamw"]
    assert matrix.scenarios[1].batch_size == 4  # the result's own fields


def test_recommend_json_reads_back_as_the_answer_written_and_a_foreign_file_is_bad_input(tmp_path: Path) -> None:
    answer = answer_of([result("a", 10.0, mem=200.0), result("b", 8.0, "deviates")])
    answer = dataclasses.replace(answer, stages=(StageReport(("precision",), 2, 2, 4, "a", "one left"),))
    assert read_answer(tmp_path) is None  # not a recommend directory
    write_answer(tmp_path, answer)
    assert read_answer(tmp_path) == answer
    (tmp_path / "recommend.json").write_text('{"winner": "a"}', encoding="utf-8")
    with pytest.raises(BadInput, match="not a recommend.json"):
        read_answer(tmp_path)


@pytest.mark.parametrize(
    ("changes", "match"),
    [({"objective": "fast"}, "--objective"), ({"budget_s": 0}, "--budget"), ({"global_batch": 0}, "--global-batch"),
     ({"finalists": 99}, "--finalists"), ({"gpu_memory": "lots"}, "lots")],
)  # fmt: skip
def test_bad_flags_are_refused_before_any_work(changes: dict, match: str) -> None:
    with pytest.raises(BadInput, match=match):
        check_request(RecommendRequest(**changes))


def test_a_failed_probe_has_no_figure_but_its_status() -> None:
    assert objective_value({"status": "oom"}, "speed") == "oom"
    assert objective_value({"status": "ok", "samples_per_s": 4.0}, "speed") == 4.0
    assert objective_value({"status": "ok", "energy_per_sample_j": 0.5}, "energy") == 2.0
    assert objective_value({"status": "ok", "samples_per_s": float("nan")}, "speed") == "no figure"


def test_on_the_cpu_without_gpu_memory_or_with_a_bad_allow_nothing_runs(tmp_path: Path) -> None:
    from harness import gpubench

    for args, says in (
        (["--model", "llama-tiny", "--device", "cpu"], "needs --gpu-memory"),
        (["--model", "llama-tiny", "--device", "cpu", "--gpu-memory", "1GB", "--allow", "dora"], "--allow dora"),
        (["--model", "llama-tiny", "--device", "cpu", "--gpu-memory", "1GB", "--budget", "soon"], "--budget"),
    ):
        done = gpubench("recommend", *args, "--out", tmp_path / "out", timeout=120)
        assert done.returncode == 2 and says in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_resume_needs_the_out_of_a_recommend_search(tmp_path: Path) -> None:
    from harness import gpubench

    args = ["--model", "llama-tiny", "--device", "cpu", "--gpu-memory", "1GB", "--resume"]
    (tmp_path / "empty").mkdir()
    for extra, says in (([], "--resume needs --out DIR"), (["--out", tmp_path / "empty"], "not a gpubench recommend")):
        done = gpubench("recommend", *args, *extra, timeout=120)
        assert done.returncode == 2 and says in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    assert list((tmp_path / "empty").iterdir()) == []  # nothing written


def test_a_resume_is_refused_when_any_setting_of_the_search_differs(tmp_path: Path) -> None:
    import json

    from bench.recommend.resume import check_same_search, search_settings

    request = RecommendRequest(model="llama-tiny", gpu_memory="2GB", out=tmp_path, axes=("batch",))
    settings = search_settings(request, "[matrix]\n")
    (tmp_path / "env.json").write_text(json.dumps({"recommend": {"settings": settings}}), encoding="utf-8")
    check_same_search(tmp_path, settings)  # the same search: resumed
    for changes, says in (
        ({"objective": "energy"}, "made with --objective = 'speed', not 'energy'"),
        ({"axes": ("checkpointing",)}, "made with --axes = ['batch'], not ['checkpointing']"),
        ({"budget_s": 60.0, "finalists": 3}, "made with --finalists = 2, not 3"),  # the budget is a sitting's
    ):
        other = search_settings(RecommendRequest(**{**request.__dict__, **changes}), "[matrix]\n")
        with pytest.raises(BadInput, match=re.escape(says)):
            check_same_search(tmp_path, other)
    with pytest.raises(BadInput, match="the candidates planned"):
        check_same_search(tmp_path, search_settings(request, "[matrix]\nother = 1\n"))


def test_the_plain_recipes_loss_check_runs_uncapped_and_the_finalists_at_the_cap() -> None:
    """On one H100 capped at 24 GB llama-1b's plain recipe (AdamW, no savers) ran out of memory in the
    loss check, so no finalist could be judged: the reference is judged for its loss, not its memory."""
    from types import SimpleNamespace

    from bench.recommend.finalists import PARITY_PREFIX, judge_finalists, reference_checks

    names = [
        f"{PARITY_PREFIX}{PLAIN}",
        f"{PARITY_PREFIX}{PLAIN}.seed43",
        f"{PARITY_PREFIX}fast",
        f"{PARITY_PREFIX}slow",
    ]
    plan = SimpleNamespace(scenarios=[Scenario(name=n, model="llama-tiny") for n in names])
    request = RecommendRequest(model="llama-tiny", gpu_memory="2GB")
    ran: dict[str, float | None] = {}

    def one(sc: Scenario, _repeat: int) -> dict:
        ran[sc.name] = sc.memory_cap_mb
        return {"scenario": sc.name, "status": "ok", "final_loss": 1.0, "loss_finite": True}

    reference_checks(plan, request, one, lambda: False)  # type: ignore[arg-type]
    judge_finalists(plan, request, 1500.0, ["fast"], one, lambda: False)  # type: ignore[arg-type]
    assert ran == {names[0]: None, names[1]: None, names[2]: 1500.0}


def _named(*specs: tuple[str, str]) -> dict[str, Candidate]:
    return {name: Candidate(name, {}, {"optimizer": opt}) for name, opt in specs}


@given(st.lists(st.sampled_from(["adamw", "adamw_8bit", "adafactor"]), min_size=1, max_size=8), st.integers(1, 4))
def test_the_finalists_hold_the_best_of_each_optimizer_first(optimizers: list[str], n: int) -> None:
    """The second GPU run's finalists were all Adafactor recipes, whose loss deviates from AdamW's, so
    nothing could win: the best of each optimizer is checked before the next best of one already in."""
    from bench.recommend.finalists import pick_finalists

    named = _named(*((f"c{i}", opt) for i, opt in enumerate(optimizers)))
    ranked = list(named)
    chosen = pick_finalists(ranked, named, n)
    assert len(chosen) == min(n, len(ranked))
    assert chosen == sorted(chosen, key=ranked.index)  # best first
    firsts = [next(c for c in ranked if named[c].axes["optimizer"] == opt) for opt in dict.fromkeys(optimizers)]
    assert set(firsts[:n]) <= set(chosen)
    assert ranked[0] in chosen


def test_the_leaders_probe_time_is_what_the_race_keeps_for_their_checks() -> None:
    from bench.recommend.finalists import leaders_walls

    rows = {
        ("slow-compiled", 0): {"status": "ok", "samples_per_s": 60.0, "worker_wall_s": 80.0},
        ("eager", 0): {"status": "ok", "samples_per_s": 30.0, "worker_wall_s": 8.0},
        ("oom", 0): {"status": "oom", "samples_per_s": None, "worker_wall_s": 3.0},
    }
    speed = lambda row: objective_value(dict(row), "speed")  # noqa: E731
    assert leaders_walls(rows, 1, speed) == [80.0]
    assert leaders_walls(rows, 3, speed) == [80.0, 8.0, 0.0]
    assert leaders_walls({}, 2, speed) == [0.0, 0.0]


def test_a_winner_the_race_could_not_prove_says_what_its_lead_rests_on() -> None:
    """The H100's llama-1b answer came from one probe a candidate, the budget spent with the runner-up
    still racing: the answer says so, and says nothing when the race separated the winner."""
    once = dataclasses.replace(result("a", 66.4), probes=1)
    rival = dataclasses.replace(result("b", 52.8, parity=""), probes=1)
    answer = build_answer("speed", [once, rival], (), "the budget is spent", "lm-synthetic", "causal-lm", "cuda:0",
                          None, 0.15, 1)  # fmt: skip
    said = [n for n in answer.notes if n.startswith("the winner rests on")]
    assert said == [
        "the winner rests on 1 probe (no interval); 1 other candidate still racing when the budget is spent, not "
        "separated from it by an interval (the next: b, 52.8 samples/s): a larger --budget races more rounds"
    ]
    proven = answer_of([result("a", 10.0), result("b", 5.0, outcome="eliminated")])
    assert not [n for n in proven.notes if n.startswith("the winner rests on")]


@given(
    st.lists(st.integers(1, 600), min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 500), st.floats(0.1, 90.0)), max_size=12),
)
def test_each_earlier_sitting_lasts_from_its_start_to_the_end_of_its_last_row(
    gaps: list[int], rows: list[tuple[int, int, float]]
) -> None:
    """A resumed search's time over its sittings: each earlier sitting from its start (env.json's
    created_at, then each resume's) to the end of the last row it began; 0 for one that measured nothing;
    this sitting (the last start) is not among them."""
    from datetime import UTC, datetime, timedelta

    from bench.recommend.resume import earlier_sittings_s

    base = datetime(2026, 12, 7, 13, 0, tzinfo=UTC)
    starts = [base]
    for gap in gaps:  # each next sitting starts after the last one's rows could end
        starts.append(starts[-1] + timedelta(seconds=600 + 90 + gap))
    env = {"created_at": starts[0].isoformat(), "resumes": [{"created_at": s.isoformat()} for s in starts[1:]]}
    sittings = len(starts) - 1  # the earlier ones
    made = [
        {"started_at": (starts[i % sittings] + timedelta(seconds=at)).isoformat(), "worker_wall_s": wall}
        for i, at, wall in rows
    ]
    got = earlier_sittings_s(env, [*made, {"started_at": None, "worker_wall_s": 5.0}])
    assert len(got) == sittings
    for k in range(sittings):
        ends = [at + wall for i, at, wall in rows if i % sittings == k]
        assert got[k] == pytest.approx(max(ends) if ends else 0.0)


@given(st.floats(1, 3600), st.floats(0, 3600), st.floats(0, 1), st.booleans())
def test_a_search_past_its_budget_says_where_the_time_went_and_one_within_it_says_nothing(
    budget: float, wall: float, share: float, compiled: bool
) -> None:
    """The MoE at --budget 230s on an H100 ran past it (22 s when cut off), silently: its compiled leader's
    check compiled again. Past the budget, the note gives the search's time, when the race ended and
    what the checks took after it, from the sitting's own clock."""
    from bench.recommend.budget import overran

    race_end = wall * share
    said = overran(budget, wall, race_end, wall - race_end, compiled)
    if wall <= budget:
        assert said is None
        return
    assert said is not None and said.startswith(f"the search took {wall:.0f} s against its --budget of {budget:.0f} s")
    assert f"the race ended at {race_end:.0f} s" in said
    assert ("ended past it" in said) == (race_end > budget)
    assert ("compiles again" in said) == (compiled and wall - race_end > 0)


@given(st.lists(st.floats(0.5, 500.0), min_size=1, max_size=6))
def test_a_candidates_speed_is_the_figure_the_race_ranked_it_by(speeds: list[float]) -> None:
    """One figure wherever it is shown: the answer's samples/s (the table, the Pareto front, the
    --twin line) is the race's own statistic on the speed objective, the geometric mean of the probes,
    not their median (88.19 in the table against the race's 88.33 on the Liger twin)."""
    from bench.recommend.race import Entry

    c = Candidate("c", {"precision": "bf16"}, {"precision": "bf16"})
    rows = {("c", i): {"scenario": "c", "status": "ok", "samples_per_s": v} for i, v in enumerate(speeds)}
    result = CandidateResult.of(c, Entry("c", list(speeds)), None, rows, [])
    assert result.samples_per_s == pytest.approx(result.objective, rel=1e-12)
    assert min(speeds) * (1 - 1e-12) <= result.samples_per_s <= max(speeds) * (1 + 1e-12)
