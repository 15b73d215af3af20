"""`benchmarks/fidelity.py` on the CPU (tiny model): repeats, engine and reference alternating,
resuming what is left, and a spent time limit. The figures mean nothing on the CPU; the script's
bookkeeping is what is tested (the GPU figures are in results/h200-bert-large/fidelity)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from harness import REPO

pytestmark = pytest.mark.slow

FIDELITY = [sys.executable, str(REPO / "benchmarks" / "fidelity.py")]
SMALL = ["--", "--samples", "16", "--seq-len", "32", "--warmup-steps", "1"]


def fidelity(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [*FIDELITY, "--out", str(out), "--only", "fp32-b4", "--device", "cpu", *args, *SMALL]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)


def mtimes(out: Path) -> dict[str, float]:
    return {str(p.relative_to(out)): p.stat().st_mtime for p in out.rglob("*") if p.is_file()}


def test_fidelity_repeats_resumes_and_stops_at_its_time_limit(tmp_path: Path) -> None:
    out = tmp_path / "fid"
    stopped = fidelity(out, "--repeats", "2", "--sampler-off", "fp32-b4", "--time-limit", "0.001")  # blocking too
    assert stopped.returncode == 4, stopped.stderr[-3000:]
    assert not list(out.rglob("work")) and not list(out.glob("reference-*"))  # no worker, no reference loop ran

    done = fidelity(out, "--repeats", "2", "--sampler-off", "fp32-b4")
    assert done.returncode == 0, done.stderr[-3000:]
    for r in (0, 1):
        assert (out / f"engine-r{r}" / "results.csv").is_file()
        assert (out / f"engine-no-sampler-r{r}" / "results.csv").is_file()
        assert (out / f"reference-fp32-b4-r{r}.json").is_file()
        assert json.loads((out / f"reference-blocking-fp32-b4-r{r}.json").read_text())["blocking_copy"] is True
    table = pd.read_csv(out / "fidelity.csv")
    assert list(table["scenario"]) == ["fp32-b4"] and int(table["repeats"][0]) == 2
    row = table.iloc[0]
    assert row["engine_over_reference"] == pytest.approx(row["engine_samples_per_s"] / row["reference_samples_per_s"])
    assert row["ratio_min"] <= row["ratio_max"] and row["sampler_cost_pct"] == row["sampler_cost_pct"]  # not NaN
    assert row["engine_over_blocking"] == pytest.approx(
        row["engine_samples_per_s"] / row["reference_blocking_samples_per_s"]
    )
    ref = json.loads((out / "reference-blocking-fp32-b4-r0.json").read_text())
    assert 0 < ref["step_time_p10_ms"] <= ref["step_time_median_ms"] <= ref["step_time_p90_ms"]  # steps timed
    assert ref["cpu_loop_start_ms"] > 0 and ref["cpu_loop_end_ms"] > 0
    assert row["engine_cpu_loop_ms"] > 0 and row["blocking_cpu_loop_ms"] > 0  # both sides probed their CPU

    # a lost reference result and table: only that reference runs again, the engine runs are kept
    before = mtimes(out)
    (out / "reference-fp32-b4-r1.json").unlink()
    (out / "fidelity.csv").unlink()
    again = fidelity(out, "--repeats", "2", "--sampler-off", "fp32-b4")
    assert again.returncode == 0, again.stderr[-3000:]
    after = mtimes(out)
    rerun = {name for name in after if after[name] != before.get(name)}
    assert rerun == {"reference-fp32-b4-r1.json", "fidelity.csv"}, rerun
    assert "bench run" not in again.stderr  # every engine run was finished: skipped


def test_fidelity_without_the_non_blocking_loop_runs_the_yardstick_only(tmp_path: Path) -> None:
    out = tmp_path / "fid"
    done = fidelity(out, "--repeats", "1", "--sampler-off", "", "--no-non-blocking-loop")
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in out.glob("reference-*")) == ["reference-blocking-fp32-b4-r0.json"]
    table = pd.read_csv(out / "fidelity.csv")
    assert "engine_over_reference" not in table.columns and table["engine_over_blocking"][0] > 0
    assert math.isnan(table["cpu_adjusted_ratio"][0])  # one pair: too few for a fit, and it says so


def test_cpu_noise_times_windows_per_placement_on_the_cpu(tmp_path: Path) -> None:
    out = tmp_path / "noise"
    cmd = [sys.executable, str(REPO / "benchmarks" / "cpu_noise.py"), "--out", str(out), "--device", "cpu"]
    cmd += ["--model", "tiny", "--seq-len", "16", "--processes", "2", "--windows", "3", "--steps", "2"]
    cmd += ["--warmup-steps", "1", "--python-rounds", "1"]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    windows = pd.read_csv(out / "windows.csv")
    assert list(windows["placement"]) == ["free", "one-cpu", "two-cpus"] * 2 and (windows["samples_per_s"] > 0).all()
    one = windows[windows["placement"] == "one-cpu"]
    main_thread_cpus = [int(str(c).split()[0]) for c in one["thread_cpus"]]
    assert main_thread_cpus == list(one["cpu"])  # the training thread ran where it was pinned
    summary = pd.read_csv(out / "summary.csv").set_index("placement")
    assert list(summary["processes"]) == [2, 2, 2]
    assert len(pd.read_csv(out / "cpus.csv")) == len(os.sched_getaffinity(0))
    env = json.loads((out / "env.json").read_text())
    assert env["device"] == "cpu" and env["command"].startswith("benchmarks/cpu_noise.py") and env["cpu_speed"]


def load_fidelity_module():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import fidelity as module
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    return module


@pytest.mark.parametrize(("with_blocking", "within"), [(True, True), (False, False)])
def test_fidelity_judges_the_engine_against_the_loop_with_its_own_data_path(
    tmp_path: Path, with_blocking: bool, within: bool
) -> None:
    """Engine 97 samples/s, blocking loop 98, non-blocking loop 110: within 3% of the yardstick (the
    loop with the engine's blocking copy) and 12% off the non-blocking loop, which is the verdict
    only where the blocking loop did not run."""
    for r, scale in enumerate((1.0, 1.02)):
        run = tmp_path / f"engine-r{r}"
        run.mkdir()
        row = {"scenario": "tf32-b4", "repeat": 0, "status": "ok", "samples_per_s": 97 * scale}
        row |= {"torch_max_allocated_mb": 100.0, "peak_mem_mb": 100.0}
        row |= {"cpu_loop_start_ms": 10.0 * scale, "cpu_loop_end_ms": 12.0 * scale}
        pd.DataFrame([row]).to_csv(run / "results.csv", index=False)
        ref = {"samples_per_s": 110 * scale, "torch_max_allocated_mb": 100.0}
        (tmp_path / f"reference-tf32-b4-r{r}.json").write_text(json.dumps(ref))
        if with_blocking:
            ref = {"samples_per_s": 98 * scale, "torch_max_allocated_mb": 100.0, "cpu_loop_start_ms": 20.0}
            (tmp_path / f"reference-blocking-tf32-b4-r{r}.json").write_text(json.dumps(ref))
    table = load_fidelity_module().table(tmp_path, repeats=2, sampler_off=False)
    row = table.iloc[0]
    assert row["engine_over_reference"] == pytest.approx(97 / 110)
    assert bool(row["within_3pct"]) is within
    if with_blocking:
        assert row["engine_over_blocking"] == pytest.approx(97 / 98)
        assert row["blocking_ratio_min"] == pytest.approx(97 / 98) == row["blocking_ratio_max"]
        assert row["blocking_cv_pct"] > 1  # 98 and 99.96
        assert row["engine_cpu_loop_ms"] == pytest.approx(11.11)  # median of 11 and 11.22
        assert math.isnan(row["blocking_cpu_loop_ms"])  # one end missing: no figure, not half of one
    else:
        assert "engine_over_blocking" not in table.columns


RUN_ALL = [sys.executable, str(REPO / "benchmarks" / "run_all.py")]


def test_make_bench_runs_a_part_skips_it_when_finished_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    """benchmarks/run_all.py (make bench) on the CPU with the tiny model: the cpu-loop part gives 4
    repeats of tf32 and fp16 (tf32 skipped on the CPU, with its reason); a second call skips it."""
    cmd = [*RUN_ALL, "--out", str(tmp_path), "--parts", "cpu-loop", "--", "--device", "cpu", *SMALL[1:]]
    first = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert first.returncode == 0, first.stderr[-3000:]
    frame = pd.read_csv(tmp_path / "cpu-loop" / "results.csv")
    assert sorted(frame["scenario"].unique()) == ["fp16", "tf32"] and len(frame) == 8
    ok = frame[frame["status"] == "ok"]
    assert len(ok) and (ok["cpu_loop_start_ms"] > 0).all() and (ok["cpu_loop_end_ms"] > 0).all()
    again = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert again.returncode == 0 and "cpu-loop: finished, skipped" in again.stderr, again.stderr[-3000:]
    bad = [*RUN_ALL, "--out", str(tmp_path), "--parts", "cpu-loops"]
    refused = subprocess.run(bad, cwd=REPO, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert refused.returncode == 2 and "unknown part 'cpu-loops'" in refused.stderr


def part_command(name: str, out: Path, extra: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[str]]:
    """run_all and the one command its part `name` would start (nothing is started)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import run_all
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    calls: list[list[str]] = []
    with monkeypatch.context() as patch:
        patch.setattr(
            run_all.subprocess, "run", lambda cmd, **_: calls.append(cmd) or subprocess.CompletedProcess(cmd, 0)
        )
        assert run_all.run_part(name, out, extra, None) == 0
    (cmd,) = calls
    return run_all, cmd


def test_make_bench_fidelity_matched_cpu_part_hands_fidelity_py_arguments_it_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, cmd = part_command("fidelity-matched-cpu", tmp_path / "m", [], monkeypatch)
    assert cmd[cmd.index("--only") + 1] == "tf32-b4,fp16-b4" and cmd[cmd.index("--repeats") + 1] == "13"
    assert "--no-non-blocking-loop" in cmd and cmd[cmd.index("--sampler-off") + 1] == ""
    # fidelity.py takes those arguments: a spent time limit stops it after parsing them, before any run
    spent = subprocess.run([*cmd, "--time-limit", "0"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert spent.returncode == 4, spent.stderr[-2000:]
    assert not (tmp_path / "m").exists() or not list((tmp_path / "m").rglob("results.csv"))


def test_fidelity_table_fits_the_engine_against_the_loop_at_equal_cpu_speed(tmp_path: Path) -> None:
    """Six repeats in which the engine twice met a CPU 1.5x slower than its loop did: its ratio of
    medians says 0.95, while at equal CPU speed (the fit on each side's CPU probe) it is 1.0."""
    cpu = [(10.0, 10.0), (15.0, 10.0), (10.0, 12.0), (15.0, 10.0), (12.0, 12.0), (11.0, 14.0)]
    for r, (engine_cpu, loop_cpu) in enumerate(cpu):
        run = tmp_path / f"engine-r{r}"
        run.mkdir()
        row = {"scenario": "fp16-b4", "repeat": 0, "status": "ok", "samples_per_s": 600 / engine_cpu}
        row |= {"torch_max_allocated_mb": 100.0, "peak_mem_mb": 100.0}
        row |= {"cpu_loop_start_ms": engine_cpu, "cpu_loop_end_ms": engine_cpu}
        pd.DataFrame([row]).to_csv(run / "results.csv", index=False)
        ref = {"samples_per_s": 600 / loop_cpu, "torch_max_allocated_mb": 100.0}
        ref |= {"cpu_loop_start_ms": loop_cpu, "cpu_loop_end_ms": loop_cpu}
        (tmp_path / f"reference-blocking-fp16-b4-r{r}.json").write_text(json.dumps(ref))
    table = load_fidelity_module().table(tmp_path, repeats=6, sampler_off=False)
    row = table.iloc[0]
    assert "engine_over_reference" not in table.columns  # no non-blocking loop ran: no columns for it
    assert row["engine_over_blocking"] == pytest.approx(((600 / 12 + 600 / 11) / 2) / 55)  # medians: 52.3, 55
    assert row["cpu_adjusted_ratio"] == pytest.approx(1.0)
    assert row["cpu_slope"] == pytest.approx(-1.0)  # all CPU: the speed is the CPU's
    assert row["cpu_adjusted_ci_low"] <= 1.0 <= row["cpu_adjusted_ci_high"]
    assert bool(row["within_3pct_at_matched_cpu"]) is True
    assert row["pair_geomean_ratio"] < 0.97  # the pairs alone blame the engine for the slower CPU


def test_cpu_adjusted_ratio_recovers_a_real_gap_and_refuses_what_it_cannot_separate() -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from cpu_adjust import cpu_adjusted_ratio, paired_ratio
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    engine_cpu, loop_cpu = [10.0, 14.0, 11.0, 19.0, 12.0], [12.0, 10.0, 18.0, 11.0, 15.0]
    noise = [1.01, 0.99, 1.0, 1.02, 0.98]
    engine = [0.9 * 1000 / c**0.5 * n for c, n in zip(engine_cpu, noise, strict=True)]
    loop = [1000 / c**0.5 for c in loop_cpu]
    fit = cpu_adjusted_ratio(engine, loop, engine_cpu, loop_cpu)
    assert fit["ratio"] == pytest.approx(0.9, abs=0.01) and fit["cpu_slope"] == pytest.approx(-0.5, abs=0.05)
    assert fit["ci_low"] < 0.9 < fit["ci_high"] < 0.97
    # the engine always on one CPU speed, the loop on another: side and CPU cannot be told apart
    assert math.isnan(cpu_adjusted_ratio(engine, loop, [10.0] * 5, [12.0] * 5)["ratio"])
    assert math.isnan(cpu_adjusted_ratio(engine[:3], loop[:3], engine_cpu[:3], loop_cpu[:3])["ratio"])  # < 4 pairs
    pairs = paired_ratio([2.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 2.0])
    assert pairs["ratio"] == pytest.approx(1.0) and pairs["ci_low"] < 1.0 < pairs["ci_high"]


def test_make_bench_interleaved_part_hands_interleaved_py_arguments_it_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_all, cmd = part_command("interleaved", tmp_path / "i", ["--model", "bert-base"], monkeypatch)
    assert cmd[1].endswith("interleaved.py") and "--model" not in cmd  # the fidelity matrix as it is
    assert cmd[cmd.index("--control") + 1] == "tf32-b4" and cmd[cmd.index("--trackers") + 1] == "fp16-b4"
    # interleaved.py takes those arguments: a spent time limit stops it after parsing them, before any run
    spent = subprocess.run([*cmd, "--time-limit", "0"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert spent.returncode == 4, spent.stderr[-2000:]
    assert not list((tmp_path / "i").glob("*.json"))
    (tmp_path / "i" / "interleaved.csv").write_text("scenario\n")  # finished: the part is skipped
    assert run_all.run_part("interleaved", tmp_path / "i", [], None) == 0


@pytest.mark.parametrize(
    ("part", "script", "last"),
    [
        ("interleaved-launch-bound", "interleaved.py", "interleaved.csv"),
        ("engine-costs", "engine_costs.py", "engine-costs.csv"),
    ],
)
def test_make_bench_script_parts_hand_their_scripts_arguments_they_accept(
    part: str, script: str, last: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_all, cmd = part_command(part, tmp_path / "p", ["--model", "bert-base"], monkeypatch)
    assert cmd[1].endswith(script) and "--model" not in cmd  # the fidelity matrix as it is
    assert "fp16-b4" in cmd[cmd.index("--only") + 1].split(",")
    spent = subprocess.run([*cmd, "--time-limit", "0"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert spent.returncode == 4, spent.stderr[-2000:]
    assert not list((tmp_path / "p").glob("*.json"))
    (tmp_path / "p").mkdir(exist_ok=True)
    (tmp_path / "p" / last).write_text("scenario\n")  # finished: the part is skipped
    assert run_all.run_part(part, tmp_path / "p", [], None) == 0
