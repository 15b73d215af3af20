"""`gpubench fit`: the search as a pure function (hypothesis over monotone thresholds), the memory
model's guess, the CPU's stand-in OOM, the summary and its front, bad input (exit 2 before any
work), and one real CPU run end to end."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from harness import gpubench, gpubench_in_process, results
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.fit.capacity_summary import (
    FitSummary,
    ProbeRecord,
    ScenarioFit,
    front,
    headline,
    ranked,
    read_summary,
    write_summary,
)
from bench.fit.dimensions import ProbeShape, predict_largest, value_range
from bench.fit.search import search
from bench.memory.terms import MB
from bench.predict.predictions import prediction_of
from bench.recipe.scenario import Scenario
from bench.report import capacity as fit_section
from bench.report import markdown
from bench.report.content import load


# -- the search --------------------------------------------------------------------------------
def fake(threshold: int, seen: list[int]) -> Any:
    """A probe for which every value up to `threshold` fits (monotone), recording what it ran."""

    def probe(value: int) -> str:
        seen.append(value)
        return "ok" if value <= threshold else "oom"

    return probe


@settings(max_examples=300, deadline=None)
@given(
    low=st.integers(1, 50),
    span=st.integers(0, 5000),
    data=st.data(),
    budget=st.integers(1, 40),
)
def test_the_search_finds_exactly_the_largest_fitting_value_or_says_it_did_not(
    low: int, span: int, data: st.DataObject, budget: int
) -> None:
    high = low + span
    threshold = data.draw(st.integers(low - 1, high), label="threshold")  # low - 1: nothing fits
    guess = data.draw(st.integers(low - 10, high + 10), label="guess")
    seen: list[int] = []
    result = search(guess, fake(threshold, seen), budget, low, high)
    assert [p.value for p in result.probes] == seen
    assert len(seen) <= budget and len(set(seen)) == len(seen)  # within the budget, no value twice
    assert all(low <= v <= high for v in seen)
    statuses = {p.value: p.status for p in result.probes}
    if result.largest_ok is not None:  # never a value it did not run ok
        assert statuses[result.largest_ok] == "ok" and result.largest_ok <= threshold
    if result.smallest_oom is not None:
        assert statuses[result.smallest_oom] == "oom" and result.smallest_oom > threshold
    if result.exact:
        assert result.largest_ok == (threshold if threshold >= low else None)
    enough = 2 * math.ceil(math.log2(span + 1)) + 2 if span else 1
    if budget >= enough:
        assert result.exact, (result, enough)


@given(low=st.integers(1, 20), span=st.integers(1, 5000), data=st.data())
def test_an_exact_guess_is_confirmed_in_two_probes(low: int, span: int, data: st.DataObject) -> None:
    threshold = data.draw(st.integers(low, low + span - 1))
    result = search(threshold, fake(threshold, []), 2, low, low + span)
    assert [(p.value, p.status) for p in result.probes] == [(threshold, "ok"), (threshold + 1, "oom")]
    assert result.exact and result.largest_ok == threshold and result.stopped == "bracket closed"


def test_a_probe_that_fails_otherwise_stops_the_search_and_claims_nothing_past_it() -> None:
    outcomes = {10: "ok", 11: "ok", 13: "crashed"}
    result = search(10, lambda v: outcomes[v], 5, 1, 100)
    assert [p.value for p in result.probes] == [10, 11, 13]
    assert result.largest_ok == 11 and result.smallest_oom is None and not result.exact
    assert result.stopped == "a probe at 13 ended 'crashed', not ok or oom"


def test_the_ends_of_the_range() -> None:
    assert search(50, lambda v: "ok", 3, 1, 8).stopped == "the largest value tried (8) fits"
    nothing = search(1, lambda v: "oom", 3, 1, 8)
    assert nothing.exact and nothing.largest_ok is None and nothing.probe_count == 1
    with pytest.raises(ValueError):
        search(1, lambda v: "ok", 0, 1, 8)


# -- the guess and the stand-in ----------------------------------------------------------------
TINY = Scenario(name="baseline", model="tiny", seq_len=32, samples=16, warmup_steps=1)
SHAPE = ProbeShape("batch_size", warmup_steps=1, steps=1, memory_cap_mb=150.0)


def peak_mb(sc: Scenario) -> float:
    return prediction_of(sc, "tiny").peak / MB


def test_the_guess_is_the_largest_batch_whose_predicted_peak_fits() -> None:
    low, high = value_range(TINY, "tiny", SHAPE, None)
    guess = predict_largest(TINY, "tiny", SHAPE, 150.0, low, high)
    assert guess.largest is not None and guess.largest > 1
    assert peak_mb(SHAPE.scenario(TINY, guess.largest)) <= 150.0 < peak_mb(SHAPE.scenario(TINY, guess.largest + 1))
    assert predict_largest(TINY, "tiny", SHAPE, 1.0, low, high).largest == 0  # not even batch 1


def test_a_probe_is_the_scenario_made_short_at_one_value() -> None:
    probe = SHAPE.scenario(TINY.replace(grad_accum_steps=2, samples=64, profile_steps=1), 7)
    assert (probe.name, probe.batch_size, probe.samples, probe.window) == ("baseline.b7", 7, 28, 1)
    assert (probe.memory_cap_mb, probe.profile_steps, probe.warmup_steps) == (150.0, 0, 1)
    seq = ProbeShape("seq_len", 1, 2, None).scenario(TINY, 64)
    assert (seq.name, seq.seq_len, seq.batch_size, seq.samples) == ("baseline.s64", 64, 4, 12)
    assert value_range(TINY, "tiny", ProbeShape("seq_len", 1, 1, None), None)[1] == 512  # position embeddings


@settings(max_examples=25)
@given(cap=st.one_of(st.floats(max_value=0), st.just(math.inf), st.just(math.nan), st.text(max_size=3)))
def test_a_memory_cap_that_is_no_positive_size_is_bad_input(cap: Any) -> None:
    from bench.errors import BadInput

    with pytest.raises(BadInput, match="memory_cap_mb"):
        TINY.replace(memory_cap_mb=cap)


# -- the summary -------------------------------------------------------------------------------
def scenario_fit(name: str, largest: int, speed: float, memory: float) -> ScenarioFit:
    probes = (ProbeRecord(largest, f"{name}.b{largest}", "ok", speed, memory), ProbeRecord(largest + 1, "x", "oom"))
    return ScenarioFit(name, "tiny", largest, memory, "", 1, 99, probes, largest, largest + 1, True, "bracket closed")


def test_the_summary_round_trips_and_ranks_the_recipes_that_fit(tmp_path: Path) -> None:
    fits = (
        scenario_fit("slow-light", 40, 10.0, 100.0),
        scenario_fit("fast-heavy", 20, 30.0, 160.0),
        scenario_fit("beaten", 30, 9.0, 150.0),  # slower and heavier than slow-light
        ScenarioFit("none", "tiny", 0, None, "", 1, 99, (ProbeRecord(1, "none.b1", "oom"),), None, 1, True, "x"),
    )
    summary = FitSummary("m", "cpu", "batch_size", 24576.0, 0.0, 24576.0, "stand-in", "pred", 3, fits)
    write_summary(tmp_path, summary)
    assert read_summary(tmp_path) == summary
    data = json.loads((tmp_path / "fit.json").read_text())
    assert data["schema"] == "gpubench.fit/1" and data["front"] == ["fast-heavy", "slow-light"]
    assert [s["probes_run"] for s in data["scenarios"]] == [2, 2, 2, 1]
    assert [f.scenario for f in ranked(summary)] == ["fast-heavy", "slow-light", "beaten"]
    assert [f.scenario for f in front(summary)] == ["fast-heavy", "slow-light"]
    assert headline(summary) == "fastest recipe that fits in 24.0 GB: fast-heavy at batch_size 20, 30.0 samples/s"
    assert read_summary(tmp_path / "nowhere") is None


# -- bad input: exit 2, nothing made --------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--only", "nope"], "nope"),
        (["--gpu-memory", "0GB"], "must be more than zero"),
        (["--gpu-memory", "-1GB"], "is not a memory size"),
        (["--gpu-memory", "24"], "is not a memory size"),
        (["--probes", "0"], "--probes 0 must be a whole number from 1 to 64"),
        (["--max", "0"], "--max 0 must be"),
        (["--dimension", "width"], "width"),
        (["--batch-size", "8"], "--batch-size sets the dimension the fit searches"),
        (["--gpu-memory", None], "on the CPU, gpubench fit needs --gpu-memory"),
        (["--model", "no-such-model"], "no-such-model"),
    ],
)
def test_bad_input_exits_2_before_any_work(tmp_path: Path, args: list[str | None], message: str) -> None:
    out = tmp_path / "out"
    argv = ["fit", "--device", "cpu", "--out", str(out), "--model", "tiny"]
    if "--gpu-memory" not in args:
        argv += ["--gpu-memory", "1GB"]
    argv += [a for a in args if a is not None]
    if None in args:
        argv = [a for a in argv if a not in ("--gpu-memory", "1GB")]
    done = gpubench_in_process(*argv)
    assert done.code == 2, done.err
    assert len(done.lines) == 1 and done.lines[0].startswith("gpubench: error: ") and message in done.err
    assert not out.exists()


# -- end to end on the CPU ---------------------------------------------------------------------
CAP = "150MB"  # at sequence 32 the tiny BERT's predicted peak passes it near batch 50


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("fit") / "out"
    done = gpubench(
        "fit", "--device", "cpu", "--model", "tiny", "--only", "baseline", "--seq-len", "32",
        "--gpu-memory", CAP, "--probe-steps", "1", "--out", out, "--no-report",
    )  # fmt: skip
    return out, done


def test_fit_on_the_cpu_brackets_the_largest_batch_with_real_probes(fitted: tuple[Path, Any]) -> None:
    out, done = fitted
    assert done.returncode == 0, done.stderr[-3000:]
    low, high = value_range(TINY, "tiny", SHAPE, None)
    b = predict_largest(TINY, "tiny", SHAPE, 150.0, low, high).largest
    assert b is not None
    frame = results(out)  # each probe a row: its batch, its status, the cap it ran under
    assert frame[["scenario", "batch_size", "status"]].values.tolist() == [
        [f"baseline.b{b}", b, "ok"],
        [f"baseline.b{b + 1}", b + 1, "oom"],
    ]
    assert frame["memory_cap_mb"].tolist() == [150.0, 150.0]
    assert "CPU stand-in for a capped GPU" in frame["error"].iloc[1]
    summary = read_summary(out)
    assert summary is not None
    (fit,) = summary.scenarios
    assert (fit.predicted_largest, fit.largest_ok, fit.smallest_oom, fit.exact) == (b, b, b + 1, True)
    assert [p.status for p in fit.probes] == ["ok", "oom"]
    assert fit.samples_per_s == pytest.approx(float(frame["samples_per_s"].iloc[0]))
    assert summary.mechanism.startswith("CPU stand-in")
    assert f"{b}:ok {b + 1}:oom" in done.stdout
    assert f"fastest recipe that fits in 150 MB: baseline at batch_size {b}," in done.stdout
    planned = json.loads((out / "scenarios.json").read_text())
    assert [s["name"] for s in planned["scenarios"]] == [f"baseline.b{b}", f"baseline.b{b + 1}"]
    report = load(out)  # the report's capacity section (the HTML chart is drawn by matplotlib: not here)
    assert f"| baseline | {b} | {b}:ok {b + 1}:oom | {b} | {b + 1} |" in markdown.render(report)
    fit_html = fit_section.html_section(summary, "<svg></svg>")
    assert fit_html.startswith('<section id="fit">') and f"<td>{b}:ok {b + 1}:oom</td>" in fit_html


@pytest.mark.gpu
def test_fit_on_a_gpu_finds_what_fits_in_24_gb(tmp_path: Path) -> None:
    """On a real GPU: the allocator capped at 24 GB less the context, real OOMs, a closed bracket."""
    if shutil.which("nvidia-smi") is None:
        pytest.skip("no CUDA GPU on this machine")
    out = tmp_path / "gpu-fit"
    done = gpubench(
        "fit", "--device", "cuda", "--model", "bert-large", "--only", "baseline",
        "--gpu-memory", "24GB", "--probes", "6", "--out", out, timeout=1200,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = read_summary(out)
    assert summary is not None and summary.memory_cap_mb == pytest.approx(24 * 1024 - 750)
    (fit,) = summary.scenarios
    assert fit.largest_ok is not None and fit.smallest_oom is not None
    frame = results(out).set_index("scenario")
    ok, oom = frame.loc[f"baseline.b{fit.largest_ok}"], frame.loc[f"baseline.b{fit.smallest_oom}"]
    assert ok["status"] == "ok" and oom["status"] == "oom"
    assert "stand-in" not in str(oom["error"])  # a real allocation failed
    assert float(ok["torch_max_reserved_mb"]) <= summary.memory_cap_mb
    assert fit.samples_per_s and fit.samples_per_s > 0
