"""`gpubench cost`: a run's measured rates projected onto a whole training run (bench/results/cost.py)."""

from __future__ import annotations

import io
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
    from bench.report import content as report_data
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


# -- every format, and no figure that is not a number ------------------------------------------------
def test_csv_and_markdown_are_the_rows_not_the_box_table(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "run", frame().to_dict("records"), env(1))
    args = ("cost", run_dir, "--train-tokens", "1e9", "--price-per-gpu-hour", "2")
    done = gpubench_in_process(*args, "-f", "csv")
    assert done.code == 0, done.err
    table = pd.read_csv(io.StringIO(done.out))
    assert list(table.columns) == ["scenario", "unit", "work", "gpus", "hours", "gpu_hours", "energy_kwh", "price",
                                   "flops_6pd", "hours_6pd"]  # fmt: skip
    (row,) = project(frame(), tokens=1e9, price_per_gpu_hour=2.0)
    assert table.iloc[0]["scenario"] == "baseline" and table.iloc[0]["hours"] == pytest.approx(row["hours"])
    assert "┃" not in done.out and "│" not in done.out
    written = gpubench_in_process(*args, "-f", "csv", "-o", tmp_path / "x.csv")
    assert written.code == 0 and written.out == "" and (tmp_path / "x.csv").read_text() == done.out
    md = gpubench_in_process(*args, "-f", "markdown")
    assert md.code == 0, md.err
    lines = md.out.splitlines()
    assert lines[0] == "## Training 1e+09 tokens" and lines[2].startswith("| scenario ")
    assert lines[3].startswith("|:---") and lines[4].startswith("| baseline ")
    assert f"{row['gpu_hours']:,.2f}" in lines[4] and "│" not in md.out


@given(
    tokens=st.floats(min_value=1e300, max_value=1e308),
    price=st.one_of(st.none(), st.floats(min_value=1.0, max_value=1e308)),
)
def test_a_projection_that_overflows_is_refused_in_every_format(tokens: float, price: float | None) -> None:
    """6PD of 3.35e8 parameters over 1e300+ tokens is past a float's range: refused, never Infinity."""
    with pytest.raises(BadInput, match=r"--train-tokens .*: scenario 'baseline' projects \w+ = inf, not a finite"):
        project(frame(), tokens=tokens, price_per_gpu_hour=price)


@given(
    tokens=st.floats(min_value=1.0, max_value=1e200),
    speed=st.floats(min_value=1e-3, max_value=1e6),
    fmt=st.sampled_from(["json", "csv", "markdown"]),
)
def test_every_format_holds_only_finite_figures_and_the_names(tokens: float, speed: float, fmt: str) -> None:
    from bench.results.cost import render

    rows = project(frame(speed), tokens=tokens, price_per_gpu_hour=3.0)
    text = render(rows, fmt)
    assert "inf" not in text.lower() and "nan" not in text.lower() and "baseline" in text
    if fmt == "json":
        json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    if fmt == "markdown":  # a huge figure is 1.23e+200, never 200 digits
        assert max(len(c.strip()) for c in text.splitlines()[4].split("|")) <= len("999,999,999.99")


def test_a_huge_projection_keeps_the_names_in_the_terminal_table(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "run", frame().to_dict("records"), env(1))
    done = gpubench_in_process("cost", run_dir, "--train-tokens", "1e200", "--price-per-gpu-hour", "1e50")
    assert done.code == 0, done.err
    assert "baseline" in done.out and "e+" in done.out
    bad = gpubench_in_process("cost", run_dir, "--train-tokens", "1e300", "-f", "json")
    assert bad.code == 2 and bad.out == "" and "Infinity" not in bad.err
    assert "projects flops_6pd = inf, not a finite number" in bad.err
