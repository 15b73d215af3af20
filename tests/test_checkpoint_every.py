"""checkpoint_every = k: every k-th layer checkpointed. The scenario's rules, the memory model's
activation term (between none and every layer where some layer is left whole below the top), and a
real CPU run that trains with it (bench/worker/checkpointing.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from harness import gpubench, write_matrix
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.errors import BadInput
from bench.families import read_config
from bench.families.llama.dims import DecoderDims
from bench.families.memory_model import predict
from bench.planner.rules import check
from bench.recipe.scenario import Scenario
from bench.results import read_results


def llama(layers: int, **fields: object) -> Scenario:
    return Scenario(name="t", model="llama-tiny", samples=64, warmup_steps=1, **fields)  # type: ignore[arg-type]


def dims(layers: int) -> DecoderDims:
    return DecoderDims(
        hidden=128, layers=layers, heads=4, kv_heads=2, head_dim=32, intermediate=352, vocab=4096, tied=False
    )


@settings(max_examples=40, deadline=None)
@given(
    layers=st.integers(2, 48),
    k=st.integers(2, 8),
    batch=st.integers(1, 16),
    seq=st.sampled_from([32, 128, 512]),
    precision=st.sampled_from(["fp32", "bf16"]),
)
def test_every_k_layers_needs_no_more_than_none_and_no_less_than_every_layer(
    layers: int, k: int, batch: int, seq: int, precision: str
) -> None:
    d = dims(layers)

    def peak(**fields: object) -> int:
        return predict(llama(layers, batch_size=batch, seq_len=seq, precision=precision, **fields), d).peak

    none, every, some = peak(), peak(grad_checkpointing=True), peak(checkpoint_every=k)
    assert some <= none
    whole = layers - math.ceil(layers / k)  # layers that keep their activations
    if whole >= 2:  # with at most one, checkpointing the top layer (every layer) can cost more than skipping it
        assert some >= every


def test_the_scenario_takes_k_of_two_or_more_alone() -> None:
    assert llama(2, checkpoint_every=2).checkpoint_every == 2
    for fields, says in (
        ({"checkpoint_every": 1}, "every layer: set grad_checkpointing"),
        ({"checkpoint_every": 2, "grad_checkpointing": True}, "cannot be combined with grad_checkpointing"),
        ({"checkpoint_every": -1}, "checkpoint_every"),
    ):
        with pytest.raises(BadInput, match=says):
            llama(2, **fields)


def test_a_family_without_layers_to_checkpoint_refuses_it_at_plan_time() -> None:
    sc = Scenario(name="t", model="tv-vit-tiny", checkpoint_every=2)  # a plain value: the rules step refuses it
    with pytest.raises(BadInput, match="checkpoint_every"):
        check(sc)


def test_it_trains_on_the_cpu_and_its_predicted_peak_lies_between_none_and_every_layer(tmp_path: Path) -> None:
    model = tmp_path / "llama-4"
    model.mkdir()
    config = {**read_config("llama-tiny"), "num_hidden_layers": 4, "architectures": ["LlamaForCausalLM"]}
    (model / "config.json").write_text(json.dumps(config), encoding="utf-8")
    base = {"model": str(model), "seq_len": 64, "batch_size": 4, "samples": 16, "warmup_steps": 1}
    matrix = write_matrix(
        tmp_path / "m.toml",
        {"none": {}, "every2": {"checkpoint_every": 2}, "every": {"grad_checkpointing": True}},
        base=base,
    )
    done = gpubench("run", "--matrix", matrix, "--device", "cpu", "--out", tmp_path / "out", timeout=600)
    assert done.returncode == 0, done.stderr
    rows = read_results(tmp_path / "out").set_index("scenario")
    assert (rows["status"] == "ok").all() and rows["final_loss"].map(math.isfinite).all()
    pred = rows["pred_peak_allocated_mb"]
    assert pred["every"] < pred["every2"] < pred["none"]
