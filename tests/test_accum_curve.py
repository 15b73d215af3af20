"""The loss curve under gradient accumulation shows the model's loss, whatever the Trainer did with
it: a classifier's (whose head ignores `num_items_in_batch`, so the Trainer neither divides nor is
the loss divided: transformers issue 47688) and a causal LM's (whose head normalises over the step)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from harness import gpubench, results, write_matrix
from hypothesis import given
from hypothesis import strategies as st

from bench.fmt import spec
from bench.results.losscurve import read_curves
from bench.worker.engines.trainer import loss_scale

pytestmark = pytest.mark.slow
BASE = {"engine": "trainer", "samples": 32, "seq_len": 32, "warmup_steps": 1, "precision": "fp32"}


@pytest.mark.parametrize("model", ["tiny", "llama-tiny"])
def test_an_accumulated_rows_curve_starts_where_the_one_batch_row_does(tmp_path: Path, model: str) -> None:
    """Batch 4 and batch 1 x 4 accumulated see the same 4 samples in their first step (same seed),
    so their first points are the same mean loss; a curve scaled by the accumulation steps where the
    Trainer had not divided reads 4 times it."""
    matrix = write_matrix(
        tmp_path / "m.toml",
        {"batch4": {"batch_size": 4}, "accum4": {"batch_size": 1, "grad_accum_steps": 4}},
        base={**BASE, "model": model},
    )
    done = gpubench("run", "--matrix", matrix, "--device", "cpu", "--report", "--out", tmp_path / "run")
    assert done.returncode == 0, done.stderr[-2000:]
    assert set(results(tmp_path / "run")["status"]) == {"ok"}
    curves = read_curves(tmp_path / "run")
    whole, accumulated = curves[("batch4", 0)].initial, curves[("accum4", 0)].initial
    assert accumulated == pytest.approx(whole, rel=0.05), (whole, accumulated)
    # what the Trainer did, as a column: a causal LM's loss is the step's share (its head normalises
    # over the step's tokens); a classifier's is, on transformers versions that divide it
    divided = results(tmp_path / "run").set_index("scenario")["loss_accum_divided"]
    assert divided.isna()["batch4"]
    assert str(divided["accum4"]).lower() in ("true", "false")
    if model == "llama-tiny":
        assert str(divided["accum4"]).lower() == "true"
    # and the run's table says it where it was not
    undivided = str(divided["accum4"]).lower() == "false"
    assert ("transformers#47688" in done.stdout) is undivided, done.stdout[-2000:]
    report = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    assert ("accum4: the Trainer did not divide the loss" in report) is undivided


ENGINES = ("torch", "trainer", "accelerate", "fabric")


@pytest.mark.parametrize("model", ["tiny", "llama-tiny"])  # a classifier (BERT) and a causal LM
def test_every_engine_records_the_models_loss_undivided_under_accumulation(tmp_path: Path, model: str) -> None:
    """One undivided loss, for every engine: a row of batch 1 x 4 accumulated has a final_loss
    (the last micro-batch's) near its own curve's final window and near the batch-4 row's loss,
    never about a quarter of it, as the Trainer's causal LM rows had (llama-tiny: 8.33 vs 2.08).
    The run's table shows that stored figure."""
    accumulated = {f"{e}-accum4": {"engine": e, "batch_size": 1, "grad_accum_steps": 4} for e in ENGINES}
    matrix = write_matrix(
        tmp_path / "m.toml",
        {"batch4": {"batch_size": 4}, **accumulated},
        base={**BASE, "model": model, "samples": 16},
    )
    done = gpubench("run", "--matrix", matrix, "--device", "cpu", "--out", tmp_path / "run", timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    frame = results(tmp_path / "run").set_index("scenario")
    assert set(frame["status"]) == {"ok"}
    whole = float(frame.loc["batch4", "final_loss"])
    for name in accumulated:
        final, window = float(frame.loc[name, "final_loss"]), float(frame.loc[name, "final_window_loss"])
        assert final == pytest.approx(window, rel=0.25), (name, final, window)
        assert final == pytest.approx(whole, rel=0.25), (name, final, whole)
        shown = [line for line in done.stdout.splitlines() if f" {name} " in line]
        assert shown and spec(window, ".4g") in shown[0], (name, window, done.stdout[-3000:])  # the judged figure


@given(
    accum=st.integers(1, 64),
    loss=st.floats(0.01, 100.0),
    task=st.sampled_from(["causal-lm", "sequence-classification", "image-classification"]),
    divided=st.booleans(),
)
def test_the_scale_is_the_accumulation_steps_unless_nothing_divided_a_classifiers_loss(
    accum: int, loss: float, task: str, divided: bool
) -> None:
    model = torch.tensor(loss)
    returned = model / accum if divided else model.clone()
    scale = loss_scale(accum, {"model": model, "returned": returned}, task)
    if accum == 1:
        assert scale == 1.0
    elif divided or task == "causal-lm":
        assert scale == accum
    else:
        assert scale == 1.0
    assert loss_scale(accum, {}, task) == float(accum)  # nothing seen (no step): as the Trainer documents
