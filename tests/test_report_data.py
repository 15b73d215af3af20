"""The report's data: the extended summary, the Pareto front, the problems and the findings."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from report_fixtures import CRASH_ERROR, H200_ENV, OOM_ERROR, SKIP_REASON, cpu_set, gpu_row, gpu_set, write_set

from bench.errors import BadInput
from bench.report import content as report_data
from bench.report.content import findings, pareto_front
from bench.results import CPU_NOTE

NAN = math.nan


@pytest.mark.parametrize(
    ("speeds", "memories", "front"),
    [
        ([10.0, 20.0, 30.0], [1.0, 2.0, 3.0], [True, True, True]),  # each trades speed for memory
        ([10.0, 20.0], [2.0, 1.0], [False, True]),  # faster and lighter beats
        ([10.0, 10.0], [1.0, 2.0], [True, False]),  # as fast but heavier is beaten
        ([10.0, 20.0], [1.0, 1.0], [False, True]),  # as light but slower is beaten
        ([10.0, 10.0], [1.0, 1.0], [True, True]),  # identical points beat nobody
        ([NAN, 10.0], [0.5, 1.0], [False, True]),  # a missing value is never on the front...
        ([99.0, 10.0], [NAN, 1.0], [False, True]),  # ...and beats nobody
        ([], [], []),
    ],
)
def test_pareto_front(speeds: list[float], memories: list[float], front: list[bool]) -> None:
    assert pareto_front(speeds, memories) == front


def test_gpu_summary_has_spread_memory_series_and_flags(tmp_path: Path) -> None:
    report = report_data.load(gpu_set(tmp_path))
    s = report.summary.set_index("scenario")
    assert list(s.index) == ["baseline", "fp16", "compile", "adafactor", "slowheavy", "flaky", "big-batch", "tf32"]
    assert s.loc["baseline", "samples_per_s"] == 34.0
    assert (s.loc["baseline", "samples_per_s_min"], s.loc["baseline", "samples_per_s_max"]) == (33.0, 35.0)
    assert s.loc["baseline", "torch_max_reserved_mb"] == 8501.0 - 700
    assert s.loc["baseline", "nvml_process_peak_mb"] == 8501.0
    assert s.loc["flaky", "ok"] == 2 and s.loc["flaky", "status"] == "crashed"
    assert s.loc["flaky", "samples_per_s_min"] == 30.0
    assert math.isnan(s.loc["big-batch", "samples_per_s_min"])
    assert list(s.index[s["is_baseline"]]) == ["baseline"]
    assert sorted(s.index[s["pareto"]]) == ["adafactor", "compile", "fp16"]
    assert s.loc["fp16", "description"] == "fp16 run"
    assert report.memory_source == "nvml-process" and report.has_mfu and report.max_repeats == 3
    assert report.title == "full on NVIDIA H200"


def test_problems_list_every_scenario_with_a_repeat_not_ok(tmp_path: Path) -> None:
    report = report_data.load(gpu_set(tmp_path))
    problems = {p.scenario: p for p in report.problems}
    assert list(problems) == ["flaky", "big-batch", "tf32"]
    assert (problems["flaky"].status, problems["flaky"].not_ok, problems["flaky"].repeats) == ("crashed", 1, 3)
    assert problems["flaky"].reason == CRASH_ERROR
    assert problems["big-batch"].reason == OOM_ERROR and "OutOfMemoryError" in problems["big-batch"].stderr_tail
    assert problems["tf32"].reason == SKIP_REASON and problems["tf32"].not_ok == 3


def test_a_failure_without_a_message_takes_the_last_stderr_line(tmp_path: Path) -> None:
    rows = [
        {"scenario": "baseline", "repeat": 0, "status": "ok", "samples_per_s": 1.0, "peak_mem_mb": 1.0},
        {"scenario": "x", "repeat": 0, "status": "error", "stderr_tail": "a\nValueError: bad\n"},
        {"scenario": "y", "repeat": 0, "status": "timeout"},
    ]
    report = report_data.load(write_set(tmp_path / "r", rows, None))
    assert [p.reason for p in report.problems] == ["ValueError: bad", "no reason recorded"]


def test_findings_name_the_fastest_the_leanest_the_front_and_the_trade_offs(tmp_path: Path) -> None:
    text = findings(report_data.load(gpu_set(tmp_path)))
    assert text[0] == (
        "Fastest: compile at 70.00 samples/s (+105.9% vs baseline); peak memory 12,001 MB (+41.2% vs baseline)."
    )
    assert text[1] == (
        "Lowest peak memory: adafactor at 6,201 MB (−27.1% vs baseline); 19.50 samples/s (−42.6% vs baseline)."
    )
    assert text[2].endswith("(Pareto front): fp16, compile, adafactor.")
    assert "Faster and leaner than the baseline: fp16 (+54.4% speed, −10.6% memory)." in text
    assert "Biggest speed-up at a memory cost: compile (+105.9% speed, +41.2% memory)." in text
    assert "Biggest memory saving at a speed cost: adafactor (−42.6% speed, −27.1% memory)." in text
    assert "Slower and heavier than the baseline: slowheavy (−39.7% speed, +5.9% memory)." in text
    assert text[-1].startswith("Without a full measurement: flaky (crashed), big-batch (oom), tf32 (skipped)")


def noisy_set(tmp_path: Path, speeds: dict[str, list[float]], mem: float = 576.0) -> report_data.Report:
    rows = [
        {"scenario": name, "repeat": r, "status": "ok", "samples_per_s": value, "peak_mem_mb": mem}
        for name, values in speeds.items()
        for r, value in enumerate(values)
    ]
    return report_data.load(write_set(tmp_path / "noisy", rows, H200_ENV))


def test_no_winner_where_the_ranges_overlap(tmp_path: Path) -> None:
    """The noisy CPU machine: bf16 +47% by median, but its repeats overlap the baseline's."""
    speeds = {"baseline": [20.1, 27.6, 14.2], "bf16": [33.0, 19.0, 29.5], "fp16": [26.0, 31.0, 22.0]}
    text = findings(noisy_set(tmp_path, speeds))
    assert text[0] == (
        "Fastest: no single winner beyond the noise of 3 repeats; the min–max ranges of "
        "bf16 (29.50 samples/s, the best median), baseline and fp16 overlap."
    )
    assert text[1] == "No scenario is faster than the baseline beyond the noise of 3 repeats."
    assert text[2].startswith("Lowest peak memory: no single winner beyond the noise of 3 repeats")
    assert "Within the noise or ±2% of the baseline on both: bf16, fp16." in text
    assert not any("Faster" in t or "speed-up" in t for t in text), text


def test_a_tie_at_the_top_still_names_those_beyond_the_baseline(tmp_path: Path) -> None:
    speeds = {"baseline": [10.0, 10.1, 10.2], "a": [20.0, 21.0, 22.0], "b": [21.5, 22.5, 23.0]}
    text = findings(noisy_set(tmp_path, speeds))
    assert text[0] == (
        "Fastest: no single winner beyond the noise of 3 repeats; the min–max ranges of "
        "b (22.50 samples/s, the best median) and a overlap."
    )
    assert text[1] == "Faster than the baseline beyond the noise: a, b."


def test_a_winner_needs_three_repeats_against_its_closest_rival(tmp_path: Path) -> None:
    speeds = {"baseline": [10.0, 10.5], "fast": [20.0, 21.0, 22.0], "slow": [5.0, 5.5, 6.0]}
    text = findings(noisy_set(tmp_path, speeds))
    assert text[0] == (
        "Fastest: 2 repeats: too few to tell differences from noise (3 or more needed); "
        "the best figure: fast at 21.00 samples/s (+104.9% vs baseline)."
    )
    three = findings(noisy_set(tmp_path / "3", {**speeds, "baseline": [10.0, 10.5, 11.0]}))
    assert three[0].startswith("Fastest: fast at 21.00 samples/s (+100.0% vs baseline); peak memory 576 MB")
    assert three[0].endswith("(+0.0% vs baseline, within the noise).")  # the same memory: named as noise


def test_one_repeat_names_no_winner_and_no_trade_off(tmp_path: Path) -> None:
    text = findings(report_data.load(cpu_set(tmp_path)))
    assert text[0] == (
        "Fastest: one repeat: cannot tell differences from noise; "
        "the best figure: accelerate at 114.30 samples/s (+50.2% vs baseline)."
    )
    assert text[1] == (
        "Lowest peak memory: one repeat: cannot tell differences from noise; "
        "the best figure: accelerate at 478 MB (−17.0% vs baseline)."
    )
    assert not any(t.startswith(("Faster", "Biggest", "Slower", "Within")) for t in text), text


def test_cpu_figures_say_what_they_are_first(tmp_path: Path) -> None:
    assert report_data.load(cpu_set(tmp_path)).caveats == (CPU_NOTE,)
    assert report_data.load(gpu_set(tmp_path)).caveats == ()
    rows = [{"scenario": "baseline", "repeat": 0, "status": "ok", "samples_per_s": 1.0, "device": "cpu"}]
    assert report_data.load(write_set(tmp_path / "no-env", rows, None)).caveats == (CPU_NOTE,)  # from the rows


def test_notes_for_single_repeats_and_busy_gpu(tmp_path: Path) -> None:
    report = report_data.load(cpu_set(tmp_path))
    assert any(n.startswith("one repeat per scenario") for n in report.notes)
    assert report.memory_source == "rss" and not report.has_mfu and report.title == "quick on CPU"
    busy = {**H200_ENV, "gpu_processes_at_start": [{"pid": 1, "used_mb": 500}]}
    rows = [{"scenario": "baseline", "repeat": 0, "status": "ok", "samples_per_s": 1.0, "peak_mem_mb": 1.0, "mfu": 1.3}]
    report = report_data.load(write_set(tmp_path / "busy", rows, busy))
    assert any("other processes were on the GPU" in n for n in report.notes)
    assert any(n.startswith("MFU above 100% for baseline") for n in report.notes)
    assert not any("CPU speed" in n for n in report.notes)  # no probe in that env.json: no claim


def test_note_for_a_machine_whose_cpu_speed_swings(tmp_path: Path) -> None:
    rows = [{"scenario": "baseline", "repeat": 0, "status": "ok", "samples_per_s": 1.0, "peak_mem_mb": 1.0}]
    probe = {"passes": 64, "p10_ms": 11.5, "p90_ms": 20.1, "p90_over_p10": 20.1 / 11.5}
    unsteady = report_data.load(write_set(tmp_path / "a", rows, {**H200_ENV, "cpu_speed": probe}))
    assert len(unsteady.caveats) == 1 and "11.5 ms (p10) to 20.1 ms (p90), 1.75x, over 64 passes" in unsteady.caveats[0]
    assert not any("CPU speed" in n for n in unsteady.notes)  # said once, at the top
    assert CPU_NOTE not in unsteady.caveats  # a GPU run on an unsteady host still measured the GPU
    steady = {**probe, "p90_ms": 12.0, "p90_over_p10": 12.0 / 11.5}
    calm = report_data.load(write_set(tmp_path / "b", rows, {**H200_ENV, "cpu_speed": steady}))
    assert calm.caveats == () and not any("CPU speed" in n for n in calm.notes)


def test_note_names_the_noisy_scenarios_whose_windows_met_a_cpu_of_another_speed(tmp_path: Path) -> None:
    def row(name: str, repeat: int, speed: float, start: float, end: float) -> dict:
        ids = {"scenario": name, "repeat": repeat, "status": "ok", "samples_per_s": speed, "peak_mem_mb": 1.0}
        return {**ids, "cpu_loop_start_ms": start, "cpu_loop_end_ms": end}

    rows = [
        *[row("fp16", r, speed, *loop) for r, (speed, loop) in enumerate([(58.6, (13.7, 12.3)), (48.4, (11.3, 20.0))])],
        *[row("steady", r, 40.0 + r * 0.1, 10.0, 10.0 + 5 * r) for r in range(2)],  # CV 0.2%: not noisy
        *[row("same-cpu", r, 30.0 + 5 * r, 10.0, 10.2) for r in range(2)],  # noisy, but one CPU speed
    ]
    report = report_data.load(write_set(tmp_path / "a", rows, H200_ENV))
    notes = [n for n in report.notes if "around the windows" in n]
    assert len(notes) == 1 and "fp16 (CV 13.5%, loop 13.0-15.7 ms)" in notes[0], report.notes
    assert "steady" not in notes[0] and "same-cpu" not in notes[0]
    old = [{k: v for k, v in r.items() if not k.startswith("cpu_loop")} for r in rows]  # before the probe
    assert not any("around the windows" in n for n in report_data.load(write_set(tmp_path / "b", old, H200_ENV)).notes)


def test_the_undivided_loss_note_names_only_the_rows_the_trainer_did_not_divide(tmp_path: Path) -> None:
    """summarize's training_note also says why a row has no held-out accuracy: that row is not undivided."""
    ids = {"repeat": 0, "status": "ok", "samples_per_s": 1.0, "peak_mem_mb": 1.0}
    rows = [
        {**ids, "scenario": "baseline"},
        {**ids, "scenario": "accum", "loss_accum_divided": False},
        {**ids, "scenario": "ddp", "eval_note": "scored in one process only; this row trained in 2"},
    ]
    notes = [n for n in report_data.load(write_set(tmp_path, rows, H200_ENV)).notes if "did not divide" in n]
    assert len(notes) == 1 and notes[0].startswith("accum: the Trainer did not divide the loss"), notes


def test_baseline_choice(tmp_path: Path) -> None:
    rows = [
        {"scenario": name, "repeat": 0, "status": "ok", "samples_per_s": sps, "peak_mem_mb": 100.0}
        for name, sps in (("first", 10.0), ("second", 20.0))
    ]
    directory = write_set(tmp_path / "r", rows, None)
    report = report_data.load(directory)
    assert report.baseline == "first"
    assert report.notes[0].startswith("no scenario named 'baseline': changes are relative to 'first'")
    assert report.summary["samples_per_s_vs_baseline_pct"].tolist() == [0.0, 100.0]
    assert report_data.load(directory, "second").summary["samples_per_s_vs_baseline_pct"].tolist() == [-50.0, 0.0]
    with pytest.raises(BadInput, match="no scenario named 'secnd'.*did you mean 'second'"):
        report_data.load(directory, "secnd")


def test_a_failed_baseline_leaves_no_changes(tmp_path: Path) -> None:
    rows = [
        {"scenario": "baseline", "repeat": 0, "status": "oom", "error": OOM_ERROR},
        {"scenario": "fp16", "repeat": 0, "status": "ok", "samples_per_s": 5.0, "peak_mem_mb": 9.0},
    ]
    report = report_data.load(write_set(tmp_path / "r", rows, H200_ENV))
    assert any("the baseline 'baseline' has no ok repeat (oom)" in n for n in report.notes)
    assert report.summary["samples_per_s_vs_baseline_pct"].isna().all()
    assert findings(report)[0] == "Fastest: fp16 at 5.00 samples/s; peak memory 9 MB."


def test_nothing_measured(tmp_path: Path) -> None:
    rows = [{"scenario": "baseline", "repeat": 0, "status": "oom", "error": OOM_ERROR}]
    report = report_data.load(write_set(tmp_path / "r", rows, H200_ENV))
    assert findings(report) == ["No scenario produced a measurement."]
    assert report.ok.empty and len(report.problems) == 1


def test_missing_results_are_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="no such results file"):
        report_data.load(tmp_path / "nope")


def ranked_set(tmp_path: Path, rows: dict[str, tuple[float, float, str, str]]) -> report_data.Report:
    """name -> (samples/s, peak MB, parity verdict, model); three repeats each, 0.1% apart."""
    out = []
    for name, (sps, mem, verdict, model) in rows.items():
        for r in range(3):
            parity = {"parity": verdict, "parity_delta": 0.867 if verdict == "deviates" else 0.001}
            out.append({**gpu_row(name, r, sps * (1 + r / 1000), mem + r), **parity, "model": model})
    return report_data.load(write_set(tmp_path / "ranked", out, H200_ENV))


def test_a_row_whose_loss_deviates_or_diverged_is_never_recommended(tmp_path: Path) -> None:
    """The issue's report: the Pareto front "baseline, grad-accum, lr-too-low" with lr-too-low
    `deviates +0.867`. Rows judged deviates or diverged are left out of the front, the best-of
    findings and the trade-offs, and the findings say so."""
    report = ranked_set(
        tmp_path,
        {
            "baseline": (30.0, 8000.0, "reference", "llama"),
            "grad-accum": (20.0, 6000.0, "equivalent", "llama"),
            "lr-too-low": (60.0, 5000.0, "deviates", "llama"),
            "fp16-nan": (80.0, 4000.0, "diverged", "llama"),
        },
    )
    s = report.summary.set_index("scenario")
    assert sorted(s.index[s["pareto"]]) == ["baseline", "grad-accum"]
    text = findings(report)
    assert text[0] == (
        "Left out of the rankings and the Pareto front, their loss not the reference's: "
        "lr-too-low (loss deviates +0.867), fp16-nan (loss diverged)."
    )
    assert text[1].startswith("Fastest: baseline at 30.03 samples/s")
    assert text[2].startswith("Lowest peak memory: grad-accum at 6,001 MB")
    assert text[3].endswith("(Pareto front): baseline, grad-accum.")
    assert not any("lr-too-low" in t or "fp16-nan" in t for t in text[1:]), text
    from bench.report import markdown

    lines = markdown.render(report).splitlines()
    assert not [x for x in lines if x.startswith("| lr-too-low") and "◆" in x]
    assert any(
        "Pareto front (no other scenario, of those whose loss did not deviate or diverge, is" in x for x in lines
    )


def test_rows_of_different_models_are_never_ranked_against_each_other(tmp_path: Path) -> None:
    """A matrix mixing models: a front and a best-of per model, each finding named by its model;
    the trade-offs vs the baseline only among the baseline's model."""
    report = ranked_set(
        tmp_path,
        {
            "baseline": (30.0, 8000.0, "", "llama"),
            "bf16": (45.0, 7000.0, "", "llama"),
            "small-model": (300.0, 1900.0, "", "bert"),
            "small-model-bf16": (400.0, 2000.0, "", "bert"),
        },
    )
    s = report.summary.set_index("scenario")
    assert sorted(s.index[s["pareto"]]) == ["bf16", "small-model", "small-model-bf16"]
    text = findings(report)
    assert text[0] == "The scenarios train 2 models (llama, bert): each is ranked among its own."
    assert text[1].startswith("llama: Fastest: bf16 at ") and text[2].startswith("llama: Lowest peak memory: bf16 ")
    assert text[3] == "llama: Not beaten on both speed and memory by any other scenario (Pareto front): bf16."
    assert text[4].startswith("bert: Fastest: small-model-bf16 at ")
    assert text[5].startswith("bert: Lowest peak memory: small-model at ")
    assert text[6].endswith("(Pareto front): small-model, small-model-bf16.")
    tradeoffs = text[7:]
    assert tradeoffs and not any("small-model" in t for t in tradeoffs), tradeoffs
