"""Parity end to end on the CPU: one `gpubench run` (the reference at 3 seeds, a bf16 row, a row at a
thousandfold learning rate, llama-tiny, 6 optimizer steps each), shared by the module's tests, which
assert on its table, results.csv, loss curves, report and `gpubench compare`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from harness import gpubench, gpubench_in_process, results, toml_value

from bench.recipe.scenario import DEFAULT_LEARNING_RATE
from bench.results.losscurve import read_curves

pytestmark = pytest.mark.slow

# The task every row trains on: the learnable synthetic language, 16 optimizer steps; the reference
# at 3 seeds (with 2, Student's t of 12.7 makes a band that holds almost anything).
DATA: dict[str, Any] = {"data": "lm-synthetic"}  # a learnable task (bench/planner/datakinds.py): the loss falls
BASE: dict[str, Any] = {"model": "llama-tiny", "samples": 64, "seq_len": 32, "batch_size": 4, "warmup_steps": 1, **DATA}
SCENARIOS: dict[str, dict[str, Any]] = {
    "fp32": {},
    "bf16": {"precision": "bf16"},
    "lr-x1000": {"learning_rate": DEFAULT_LEARNING_RATE * 1000},
}


def write_parity_matrix(path: Path) -> Path:
    lines = ["[matrix]", 'parity_reference = "fp32"', "", "[base]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in BASE.items()]
    for name, settings in SCENARIOS.items():
        lines += ["", f"[scenarios.{name}]", *(f"{k} = {toml_value(v)}" for k, v in settings.items())]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    root = tmp_path_factory.mktemp("parity")
    matrix = write_parity_matrix(root / "parity.toml")
    out = root / "run"
    done = gpubench("run", "--matrix", matrix, "--device", "cpu", "--parity-seeds", "3", "--report", "--out", out)
    return done, out


def test_the_run_judges_bf16_equivalent_and_a_thousandfold_learning_rate_not(
    run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    done, out = run
    assert done.returncode == 0, done.stderr[-3000:]
    frame = results(out)
    rows = {r["scenario"]: r for r in frame.to_dict("records")}
    assert list(rows) == ["fp32", "bf16", "lr-x1000", "fp32.seed43", "fp32.seed44"]  # the reference's seeds appended
    assert rows["fp32.seed43"]["seed"] == 43 and rows["fp32"]["seed"] == 42
    verdicts = {name: r["parity"] for name, r in rows.items()}
    assert verdicts["fp32"] == verdicts["fp32.seed43"] == verdicts["fp32.seed44"] == "reference"
    assert verdicts["bf16"] == "equivalent"
    assert verdicts["lr-x1000"] in ("deviates", "diverged")
    bf16, fast = rows["bf16"], rows["lr-x1000"]
    assert (
        abs(bf16["parity_delta"]) <= bf16["parity_band"] and bf16["parity_seeds"] == 3 and bf16["parity_ref"] == "fp32"
    )
    assert abs(fast["parity_delta"]) > fast["parity_band"]
    # the engines' effective values, the default included
    assert bf16["effective_learning_rate"] == DEFAULT_LEARNING_RATE and fast["effective_learning_rate"] == 0.05
    assert {r["effective_lr_schedule"] for r in rows.values()} == {"linear"}
    assert {r["effective_lr_warmup_steps"] for r in rows.values()} == {0}
    # the run's table: a parity column
    table = {line.split("│")[1].strip(): line for line in done.stdout.splitlines() if line.startswith("│")}
    assert "equivalent" in table["bf16"] and "ref" in table["fp32"] and verdicts["lr-x1000"] in table["lr-x1000"]


def test_every_row_has_its_loss_curve(run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, out = run
    curves = read_curves(out)
    assert sorted(curves) == [("bf16", 0), ("fp32", 0), ("fp32.seed43", 0), ("fp32.seed44", 0), ("lr-x1000", 0)]
    fp32 = curves[("fp32", 0)]
    assert fp32.steps == tuple(range(1, 17)) and fp32.finite  # 64 samples at batch 4; a point a step
    assert json.loads((out / "losses" / "fp32-r0.json").read_text())["schema"] == "gpubench.loss_curve/1"
    row = results(out).set_index("scenario").loc["fp32"]
    assert row["final_window_loss"] == pytest.approx(fp32.final_window) and row["initial_loss"] == fp32.initial
    assert curves[("lr-x1000", 0)].initial == pytest.approx(fp32.initial)  # the same seed: the same first step


def test_the_report_draws_the_loss_curves_and_shows_the_verdicts(
    run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    _, out = run
    html = (out / "report.html").read_text()
    assert "<h2>Loss</h2>" in html and 'aria-label="Training loss against optimizer steps"' in html
    assert html.index("<h2>Throughput</h2>") < html.index("<h2>Loss</h2>") < html.index("<h2>Peak memory</h2>")
    assert "vs reference" in html and "The thick black line is the loss reference, fp32." in html
    md = gpubench_in_process("report", out, "--format", "markdown")
    assert md.code == 0
    line = next(line for line in md.out.splitlines() if line.startswith("| bf16 "))
    assert "equivalent" in line


def test_compare_says_each_scenarios_speed_and_loss(run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, out = run
    done = gpubench_in_process("compare", out, out)
    assert done.code == 0, done.err
    assert "bf16: samples/s +0.0%, loss equivalent" in done.out
    assert "fp32: samples/s +0.0%, the loss reference" in done.out
    data = json.loads(gpubench_in_process("compare", out, out, "--format", "json").out)
    parity = {r["scenario"]: r for r in data["rows"] if r["metric"] == "parity"}
    assert parity["bf16"]["verdict"] == "unchanged" and parity["bf16"]["note"].startswith("loss equivalent (delta ")
