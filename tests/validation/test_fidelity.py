"""`python -m validation.fidelity`: its table from made-up results (fast, in the default suite), and
the script end to end on the CPU with the tiny model (repeats, engine and reference alternating,
resuming what is left, a spent time limit), where its figures mean nothing; its H200 set is in git at
f8fc4d3 (results/h200-bert-large/fidelity), folded into results/engine-vs-loop/."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from harness import REPO

from validation import fidelity

FIDELITY = [sys.executable, "-m", "validation.fidelity"]
SMALL = ["--", "--samples", "16", "--seq-len", "32", "--warmup-steps", "1"]
HANG_GUARD_S = 3600  # only a hang reaches this: each run below takes 1-3 minutes on a busy 2-core CPU


def run_fidelity(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [*FIDELITY, "--out", str(out), "--only", "fp32-b4", "--device", "cpu", *args, *SMALL]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=HANG_GUARD_S, stdin=subprocess.DEVNULL)


def mtimes(out: Path) -> dict[str, float]:
    return {str(p.relative_to(out)): p.stat().st_mtime for p in out.rglob("*") if p.is_file()}


@pytest.mark.validation
def test_fidelity_repeats_resumes_and_stops_at_its_time_limit(tmp_path: Path) -> None:
    out = tmp_path / "fid"
    stopped = run_fidelity(out, "--repeats", "2", "--sampler-off", "fp32-b4", "--time-limit", "0.001")
    assert stopped.returncode == 4, stopped.stderr[-3000:]
    assert not list(out.rglob("work")) and not list(out.glob("reference-*"))  # no worker, no reference loop ran

    done = run_fidelity(out, "--repeats", "2", "--sampler-off", "fp32-b4")
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
    assert math.isnan(row["pair_geomean_ratio"])  # two pairs: too few for an interval, and it says so
    ref = json.loads((out / "reference-blocking-fp32-b4-r0.json").read_text())
    assert 0 < ref["step_time_p10_ms"] <= ref["step_time_median_ms"] <= ref["step_time_p90_ms"]  # steps timed
    assert ref["cpu_loop_start_ms"] > 0 and ref["cpu_loop_end_ms"] > 0
    assert row["engine_cpu_loop_ms"] > 0 and row["blocking_cpu_loop_ms"] > 0  # both sides probed their CPU

    # a lost reference result and table: only that reference runs again, the engine runs are kept
    before = mtimes(out)
    (out / "reference-fp32-b4-r1.json").unlink()
    (out / "fidelity.csv").unlink()
    again = run_fidelity(out, "--repeats", "2", "--sampler-off", "fp32-b4")
    assert again.returncode == 0, again.stderr[-3000:]
    after = mtimes(out)
    rerun = {name for name in after if after[name] != before.get(name)}
    assert rerun == {"reference-fp32-b4-r1.json", "fidelity.csv"}, rerun
    assert "bench run" not in again.stderr  # every engine run was finished: skipped


def write_repeat(
    out: Path, r: int, scenario: str, engine: float, loop: float, blocking: float | None, cpu_ms: float = 10.0
) -> None:
    """One repeat's files as the script leaves them: the engine's results.csv and the loops' JSON."""
    run = out / f"engine-r{r}"
    run.mkdir()
    row = {"scenario": scenario, "repeat": 0, "status": "ok", "samples_per_s": engine}
    row |= {"torch_max_allocated_mb": 100.0, "peak_mem_mb": 100.0}
    row |= {"cpu_loop_start_ms": cpu_ms, "cpu_loop_end_ms": cpu_ms * 1.2}
    pd.DataFrame([row]).to_csv(run / "results.csv", index=False)
    ref = {"samples_per_s": loop, "torch_max_allocated_mb": 100.0}
    (out / f"reference-{scenario}-r{r}.json").write_text(json.dumps(ref))
    if blocking is not None:
        ref = {"samples_per_s": blocking, "torch_max_allocated_mb": 100.0, "cpu_loop_start_ms": 20.0}
        (out / f"reference-blocking-{scenario}-r{r}.json").write_text(json.dumps(ref))


@pytest.mark.parametrize(("with_blocking", "within"), [(True, True), (False, False)])
def test_fidelity_judges_the_engine_against_the_loop_with_its_own_data_path(
    tmp_path: Path, with_blocking: bool, within: bool
) -> None:
    """Engine 97 samples/s, blocking loop 98, non-blocking loop 110: within 3% of the yardstick (the
    loop with the engine's blocking copy) and 12% off the non-blocking loop, which is the verdict
    only where the blocking loop did not run."""
    for r, scale in enumerate((1.0, 1.02)):
        write_repeat(tmp_path, r, "tf32-b4", 97 * scale, 110 * scale, 98 * scale if with_blocking else None, 10 * scale)
    table = fidelity.table(tmp_path, repeats=2, sampler_off=False)
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


def test_fidelity_table_gives_the_pairs_geometric_mean_with_its_interval(tmp_path: Path) -> None:
    """Four repeats whose speeds drift by 1.5x while the engine stays 2% behind the blocking loop in
    each pair: the pairs' geometric mean says 0.98 with a tight interval."""
    for r, speed in enumerate((60.0, 40.0, 55.0, 45.0)):
        write_repeat(tmp_path, r, "fp16-b4", 0.98 * speed, 1.1 * speed, speed)
    row = fidelity.table(tmp_path, repeats=4, sampler_off=False).iloc[0]
    assert row["pair_geomean_ratio"] == pytest.approx(0.98)
    assert row["pair_ci_low"] == pytest.approx(0.98) and row["pair_ci_high"] == pytest.approx(0.98)
    assert "cpu_adjusted_ratio" not in row.index  # the CPU-speed fit is archived at lab-h200-2026-11
