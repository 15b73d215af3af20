"""The decoder memory model: exact LlamaForCausalLM tensors, and properties over dimensions and
settings (non-negative terms, LoRA's states, quantized sizes, monotonicity, paged states)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.families.llama import acts as decoder_acts
from bench.families.llama.dims import DecoderDims, param_count, param_tensors
from bench.families.llama.weights import adapter_tensors, weight_bytes
from bench.families.memory_model import load_dims, predict
from bench.families.resolve import preset_config
from bench.memory import terms
from bench.predict import predicted_columns
from bench.recipe.scenario import Scenario


def sc(**settings_: Any) -> Scenario:
    batch = settings_.get("batch_size", 4)
    base = {"model": "llama-tiny", "samples": 8 * batch, "warmup_steps": 1}
    return Scenario(name="t", **{**base, **settings_})


def test_tensors_are_llama_for_causal_lms_own() -> None:
    torch = pytest.importorskip("torch")
    from transformers import LlamaConfig, LlamaForCausalLM

    _, cfg = preset_config("llama-tiny")
    with torch.device("meta"):
        model = LlamaForCausalLM(LlamaConfig(**cfg))
    dims = load_dims("llama-tiny")
    assert isinstance(dims, DecoderDims)
    assert [(t.name, t.shape) for t in param_tensors(dims)] == [
        (n, tuple(p.shape)) for n, p in model.named_parameters()
    ]
    assert param_count(dims) == model.num_parameters()


def test_llama_1b_count_by_hand() -> None:
    dims = load_dims("llama-1b")
    assert isinstance(dims, DecoderDims)
    layer = 2048 * 2048 * 2 + 512 * 2048 * 2 + 8192 * 2048 * 3 + 2 * 2048
    assert param_count(dims) == 128256 * 2048 + 16 * layer + 2048 == 1_235_814_400  # tied: one table


dims_st = st.builds(
    lambda hidden_heads, kv_div, head_dim, layers, inter, vocab, tied: DecoderDims(
        hidden=hidden_heads * head_dim,
        layers=layers,
        heads=hidden_heads,
        kv_heads=hidden_heads // kv_div,
        head_dim=head_dim,
        intermediate=inter,
        vocab=vocab,
        tied=tied,
    ),
    st.sampled_from([2, 4, 8]),
    st.sampled_from([1, 2]),
    st.sampled_from([8, 16, 32]),
    st.integers(1, 4),
    st.integers(16, 512),
    st.integers(64, 5000),
    st.booleans(),
)
technique_st = st.sampled_from(
    [
        {},
        {"grad_checkpointing": True},
        {"liger": True},
        {"activation_offload": True},
        {"fp8": True},
        {"peft": "lora"},
        {"peft": "lora", "quantize_base": "nf4"},
        {"peft": "lora", "quantize_base": "int8"},
        {"peft": "lora", "liger": True, "grad_checkpointing": True},
    ]
)
optimizer_st = st.sampled_from(
    ["adamw", "adamw_fused", "adamw_foreach", "adamw_8bit", "paged_adamw_8bit", "adam8bit_manual", "adafactor", "sgd"]
)


def _scenario(technique: dict[str, Any], precision: str, optimizer: str, engine: str, batch: int, seq: int) -> Scenario:
    if technique.get("fp8"):
        precision = "bf16"
    return sc(**technique, precision=precision, optimizer=optimizer, engine=engine, batch_size=batch, seq_len=seq)


@settings(max_examples=60, deadline=None)
@given(
    dims_st,
    technique_st,
    st.sampled_from(["fp32", "bf16", "fp16"]),
    optimizer_st,
    st.sampled_from(["trainer", "accelerate"]),
    st.integers(1, 8),
    st.integers(1, 512),
)
def test_every_term_is_non_negative_and_the_peak_holds_the_weights(
    d: DecoderDims, technique: dict[str, Any], precision: str, optimizer: str, engine: str, batch: int, seq: int
) -> None:
    p = predict(_scenario(technique, precision, optimizer, engine, batch, seq), d)
    for phase, parts in p.phase_terms.items():
        assert all(v >= 0 for v in parts.values()), (phase, parts)
        assert sum(parts.values()) == p.phases[phase]
    assert p.peak >= p.weights + p.optimizer + p.workspace
    assert p.peak_term in p.phase_terms[p.peak_phase]


@settings(max_examples=30, deadline=None)
@given(dims_st, technique_st, st.sampled_from(["fp32", "bf16"]), st.integers(1, 4), st.integers(1, 256))
def test_more_tokens_never_need_less(d: DecoderDims, technique: dict[str, Any], precision: str, b: int, s: int) -> None:
    def peak(batch: int, seq: int) -> int:
        return predict(_scenario(technique, precision, "adamw", "accelerate", batch, seq), d).peak

    assert peak(b + 1, s) >= peak(b, s)
    assert peak(b, s + 1) >= peak(b, s)


@settings(max_examples=30, deadline=None)
@given(dims_st, st.sampled_from(["none", "nf4", "int8"]), st.sampled_from([1, 4, 16]))
def test_lora_states_are_the_adapters_and_grow_with_the_rank(d: DecoderDims, quantize: str, rank: int) -> None:
    lo = predict(sc(peft="lora", quantize_base=quantize, precision="bf16", lora_rank=rank), d)
    hi = predict(sc(peft="lora", quantize_base=quantize, precision="bf16", lora_rank=rank * 2), d)
    adapters = adapter_tensors(d, sc(peft="lora", lora_rank=rank))
    assert lo.grads == terms.grads(adapters)  # no gradient for any base tensor
    assert lo.optimizer == terms.optimizer_states(adapters, "adamw", "trainer")
    assert lo.grads <= hi.grads and lo.optimizer <= hi.optimizer  # equal only inside 512-byte blocks
    more = adapter_tensors(d, sc(peft="lora", lora_rank=rank * 2))
    assert sum(t.numel for t in more) == 2 * sum(t.numel for t in adapters)
    if 4 * rank <= d.kv_width:  # a low rank: A and B are smaller than every weight they adapt
        full = predict(sc(precision="bf16"), d)
        assert lo.grads < full.grads and lo.optimizer < full.optimizer


@given(st.integers(1, 4096), st.integers(1, 4096))
def test_quantized_weights_are_smaller(rows: int, cols: int) -> None:
    n4, i8, b16, f32 = (weight_bytes((rows, cols), k) for k in ("nf4", "int8", "bf16", "fp32"))
    if rows * cols >= 1 << 16:  # past the 512-byte blocks and the per-tensor statistics
        assert n4 < i8 < b16 < f32
    assert b16 <= f32 and i8 <= f32 + 4096


def test_paged_states_leave_the_allocator_and_say_where() -> None:
    d = load_dims("llama-1b")
    adamw8 = predict(sc(model="llama-1b", optimizer="adamw_8bit", engine="accelerate", precision="bf16"), d)
    paged = predict(sc(model="llama-1b", optimizer="paged_adamw_8bit", engine="accelerate", precision="bf16"), d)
    assert paged.optimizer < adamw8.optimizer / 50  # only absmax and small tensors' states stay
    note = next(n for n in paged.notes if "unified memory" in n)
    assert "cudaMallocManaged" in note and "not in the predicted peak" in note


def test_llama_1b_baseline_and_the_term_that_sets_its_peak() -> None:
    d = load_dims("llama-1b")
    base = {"model": "llama-1b", "batch_size": 4, "seq_len": 2048, "precision": "bf16", "engine": "accelerate"}
    p = predict(sc(**base, optimizer="adamw_fused"), d)
    assert p.peak_phase == "backward"
    # the head's fp32 b x s x V tensors at the start of the backward: log-softmax's output and
    # the two gradients, 12 bytes per token per vocabulary entry
    assert p.phase_terms["backward"]["logits"] == 12 * 4 * 2048 * 128256
    ckpt = predict(sc(**base, optimizer="adamw_fused", grad_checkpointing=True), d)
    assert ckpt.peak_term == "logits"
    liger = predict(sc(**base, optimizer="adamw_fused", liger=True), d)
    assert liger.phase_terms["forward"]["logits"] < p.phase_terms["forward"]["logits"] / 5


def test_liger_chunk_follows_liger_kernel() -> None:
    d = load_dims("llama-1b")
    assert isinstance(d, DecoderDims)
    # inc_factor = ceil(128256 / 2048) = 63; ceil(8192 / 63) = 131 -> next power of two 256
    assert decoder_acts.liger_chunk(d, 8192) == 256
    assert decoder_acts.liger_chunk(d, 100) == 2  # ceil(100 / 63) = 2


def test_predicted_columns_for_a_decoder() -> None:
    columns = predicted_columns(sc(precision="bf16"), "llama-tiny", {})
    assert columns["pred_peak_allocated_mb"] > columns["pred_weights_mb"] > 0
