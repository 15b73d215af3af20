"""`gpubench cost`: a run's measured rates projected onto a whole training run (bench/results/cost.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from harness import gpubench_in_process
from history_support import env, reps, write_run
from hypothesis import given
from hypothesis import strategies as st

from bench.errors import BadInput
from bench.results import load_run
from bench.results.cost import project


def frame(speed: float = 50.0, tokens_per_sample: float = 512.0, params: float = 3.35e8) -> pd.DataFrame:
    rows = reps("baseline", [speed * 0.99, speed, speed * 1.01])
    for r in rows:
        rate = r["samples_per_s"] * tokens_per_sample
        r.update(tokens_per_s=rate, energy_per_token_j=0.01, achieved_tflops=6 * params * rate / 1e12)
        r["model_params"] = params
    return pd.DataFrame(rows)


@given(st.floats(min_value=1e3, max_value=1e15), st.floats(min_value=0.1, max_value=1e4))
def test_hours_are_the_work_over_the_measured_rate(tokens: float, speed: float) -> None:
    (row,) = project(frame(speed), tokens=tokens, price_per_gpu_hour=2.0)
    rate = speed * 512.0  # the median repeat's tokens/s
    assert row["hours"] * 3600 * rate == pytest.approx(tokens)
    assert row["energy_kwh"] == pytest.approx(tokens * 0.01 / 3.6e6)
    assert row["price"] == pytest.approx(row["gpu_hours"] * 2.0)
    # the achieved FLOP rate was made from 6P per token, so C = 6PD takes the measured time
    assert row["hours_6pd"] == pytest.approx(row["hours"])


@pytest.mark.parametrize(
    ("tokens", "samples", "price"),
    [(None, None, None), (1e9, 1e6, None), (-1.0, None, None), (float("nan"), None, None), (1e9, None, 0.0)],
)
def test_bad_work_is_refused(tokens: float | None, samples: float | None, price: float | None) -> None:
    with pytest.raises(BadInput):
        project(frame(), tokens=tokens, samples=samples, price_per_gpu_hour=price)


def test_the_command_projects_a_run_and_refuses_bad_input(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "run", frame().to_dict("records"), env(1))
    done = gpubench_in_process("cost", run_dir, "--train-samples", "1e6", "-f", "json")
    assert done.code == 0, done.err
    (row,) = json.loads(done.out)["rows"]
    assert row["scenario"] == "baseline" and row["hours"] == pytest.approx(1e6 / 50.0 / 3600)
    bad = subprocess.run(
        [sys.executable, "-m", "bench", "cost", str(run_dir)], capture_output=True, text=True, timeout=120, check=False
    )
    assert bad.returncode == 2 and "--train-tokens" in bad.stderr and "Traceback" not in bad.stderr


def test_the_report_s_cost_columns_agree_with_the_cost_command(tmp_path: Path) -> None:
    from bench.report import data as report_data
    from bench.report.markdown import render

    rows = frame().to_dict("records")
    for r in rows:
        r["energy_per_sample_j"] = 0.01 * 512  # the fixture's J/token over 512 tokens
    run_dir = write_run(tmp_path / "run", rows, env(1))
    run = load_run(run_dir)
    (projected,) = project(run.frame, tokens=1e9)
    summary = report_data.build(run.frame, run.env, run_dir / "results.csv").summary.iloc[0]
    assert summary["gpu_hours_per_1b_tokens"] == pytest.approx(projected["gpu_hours"])
    assert summary["kwh_per_1b_tokens"] == pytest.approx(projected["energy_kwh"])
    text = render(report_data.build(run.frame, run.env, run_dir / "results.csv"))
    assert "GPU-h / 1B tokens" in text and f"{projected['gpu_hours']:.2f}" in text
