"""The memory model's figures, byte for byte, for scenarios that reach each of its terms (make
mutation): eager and SDPA attention, checkpointing, LoRA and QLoRA, Liger's chunked head, 8-bit
and paged optimizers, FSDP and DeepSpeed sharding over 2 GPUs, BERT in fp16. A characterization
test: the figures are the model's as reviewed (docs/memory.md), stored in
tests/data/memory_figures.json; a deliberate change to the model rewrites that file with
`python tests/test_mutation_memory.py` and shows the changed figures in its diff."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.errors import BadInput
from bench.families.llama.dims import DecoderDims, buffer_bytes
from bench.families.memory_model import load_dims
from bench.memory.tensors import ParamTensor
from bench.memory.terms import BNB_PAGED_MIN_SIZE, tensor_paged_state
from bench.predict.predictions import prediction_of
from bench.recipe.scenario import Scenario

FIGURES = Path(__file__).parent / "data" / "memory_figures.json"
BASE: dict[str, Any] = {"samples": 64, "warmup_steps": 1, "seq_len": 128, "batch_size": 4}
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "llama-fp32": ("llama-tiny", {}),
    "llama-bf16-eager": ("llama-tiny", {"precision": "bf16", "attn_implementation": "eager"}),
    "llama-bf16-sdpa-ckpt": (
        "llama-tiny",
        {"precision": "bf16", "attn_implementation": "sdpa", "grad_checkpointing": True},
    ),
    "llama-lora": ("llama-tiny", {"precision": "bf16", "peft": "lora", "lora_rank": 8}),
    "llama-qlora": ("llama-tiny", {"precision": "bf16", "peft": "lora", "quantize_base": "nf4"}),
    "llama-liger": ("llama-tiny", {"precision": "bf16", "liger": True}),
    "llama-adamw8bit": ("llama-tiny", {"precision": "bf16", "optimizer": "adamw_8bit"}),
    "llama-paged": ("llama-tiny", {"precision": "bf16", "optimizer": "paged_adamw_8bit"}),
    "llama-fsdp": ("llama-tiny", {"precision": "bf16", "gpus": 2, "strategy": "fsdp"}),
    "llama-zero2": ("llama-tiny", {"precision": "bf16", "gpus": 2, "strategy": "deepspeed", "zero_stage": 2}),
    "llama-zero3-fp32": ("llama-tiny", {"gpus": 2, "strategy": "deepspeed", "zero_stage": 3}),
    "llama-zero2-offload": (
        "llama-tiny",
        {"precision": "bf16", "gpus": 2, "strategy": "deepspeed", "zero_stage": 2, "offload": "optimizer"},
    ),
    "llama-fsdp-offload": ("llama-tiny", {"precision": "bf16", "gpus": 2, "strategy": "fsdp", "offload": "params"}),
    "llama-accum": ("llama-tiny", {"grad_accum_steps": 2, "precision": "fp16"}),
    "bert-fp32": ("tiny", {}),
    "bert-fp16-eager": ("tiny", {"precision": "fp16", "attn_implementation": "eager"}),
    "bert-bf16-ckpt": ("tiny", {"precision": "bf16", "grad_checkpointing": True}),
}


def figures(case: str) -> dict[str, Any]:
    model, settings = CASES[case]
    p = prediction_of(Scenario(name=case, model=model, **{**BASE, **settings}), model)
    fields = (
        "params",
        "weights",
        "autocast_copies",
        "grads",
        "optimizer",
        "optimizer_temp",
        "activations",
        "workspace",
    )
    return {
        **{f: getattr(p, f) for f in fields},
        "phases": p.phases,
        "phase_terms": p.phase_terms,
        "notes": list(p.notes),
    }


@pytest.mark.parametrize("case", list(CASES))
def test_the_memory_figures_are_the_reviewed_ones(case: str) -> None:
    stored = json.loads(FIGURES.read_text())
    assert figures(case) == stored[case]


def test_every_case_is_stored() -> None:
    assert set(json.loads(FIGURES.read_text())) == set(CASES)


@pytest.mark.parametrize("case", ["llama-fsdp", "llama-zero2", "llama-zero3-fp32", "llama-paged"])
def test_bytes_are_whole_numbers(case: str) -> None:
    got = figures(case)
    numbers = [v for k, v in got.items() if k not in ("phases", "phase_terms", "notes")]
    numbers += [*got["phases"].values(), *(b for terms in got["phase_terms"].values() for b in terms.values())]
    assert all(isinstance(v, int) and not isinstance(v, bool) for v in numbers), got


def test_the_rotary_buffers_round_up_to_512_byte_blocks() -> None:
    d = load_dims("llama-tiny")
    assert isinstance(d, DecoderDims)
    assert buffer_bytes(dataclasses.replace(d, head_dim=64)) == 2 * 512  # 128 B: one block
    assert buffer_bytes(dataclasses.replace(d, head_dim=512)) == 2 * 1024  # 1024 B: two blocks
    assert buffer_bytes(dataclasses.replace(d, head_dim=520)) == 2 * 1536  # 1040 B: three


def test_a_tensor_of_exactly_the_paged_minimum_is_paged() -> None:
    at = ParamTensor("model.layers.0.mlp.up_proj.weight", (BNB_PAGED_MIN_SIZE,), 0)
    below = ParamTensor("model.layers.0.mlp.up_proj.weight", (BNB_PAGED_MIN_SIZE - 1,), 0)
    assert tensor_paged_state(at, "paged_adamw_8bit", "trainer") > 0
    assert tensor_paged_state(below, "paged_adamw_8bit", "trainer") == 0
    assert tensor_paged_state(at, "adamw_8bit", "trainer") == 0


@pytest.mark.parametrize("field", ["hidden", "layers", "heads", "vocab"])
def test_dims_below_one_are_bad_input(field: str) -> None:
    bert = load_dims("tiny")
    with pytest.raises(BadInput, match=f"{field} = 0 must be"):
        dataclasses.replace(bert, **{field: 0})


if __name__ == "__main__":  # rewrite the stored figures after a deliberate change to the model
    FIGURES.write_text(json.dumps({c: figures(c) for c in CASES}, indent=1, sort_keys=True) + "\n")
    sys.exit(0)
