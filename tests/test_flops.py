"""FLOPs and MFU: the decoder's causal attention, the LM head counted once, LoRA's 4P + 6P_adapters,
the FP8 peak, and MFU left empty (with the reason) where no peak is known."""

from __future__ import annotations

from typing import Any

import pytest

from bench.families.llama import flops as llama_flops
from bench.families.llama.dims import DecoderDims
from bench.families.memory_model import load_dims
from bench.measure import mfu
from bench.recipe.scenario import Scenario

S = 2048


def sc(**settings: Any) -> Scenario:
    base = {"model": "llama-1b", "precision": "bf16", "seq_len": S, "samples": 64, "warmup_steps": 1}
    return Scenario(name="t", **{**base, **settings})


def test_llama_1b_by_hand() -> None:
    d = load_dims("llama-1b")
    assert isinstance(d, DecoderDims)
    per_layer = 2048 * 2048 * 2 + 2 * 512 * 2048 + 3 * 2048 * 8192  # q, o; k, v; gate, up, down
    matmul = 16 * per_layer + 128256 * 2048  # the tied head counted once
    assert llama_flops.decoder_matmul_params(d) == matmul == 1_235_814_400 - 33 * 2048  # all but the norms
    causal = 6 * 16 * S * S * 2048
    assert llama_flops.decoder_flops_per_sample(d, sc()) == 6 * matmul * S + causal


def test_causal_attention_is_half_of_bidirectional() -> None:
    d = load_dims("llama-1b")
    assert isinstance(d, DecoderDims)
    short, long = sc(seq_len=1024), sc(seq_len=2048)
    linear = 6 * llama_flops.decoder_matmul_params(d)
    attention_short = llama_flops.decoder_flops_per_sample(d, short) - linear * 1024
    attention_long = llama_flops.decoder_flops_per_sample(d, long) - linear * 2048
    assert attention_long == 4 * attention_short  # s^2
    assert attention_long == 12 * 16 * 2048 * 2048**2 / 2  # BERT's 12 x L x h x s^2, halved


def test_lora_counts_4_for_the_base_and_6_for_the_adapters() -> None:
    d = load_dims("llama-1b")
    assert isinstance(d, DecoderDims)
    lora = sc(peft="lora", lora_rank=16)
    adapters = 16 * 16 * ((2048 + 2048) * 2 + (2048 + 512) * 2 + (2048 + 8192) * 3)
    assert llama_flops.adapter_params(d, lora) == adapters
    attention = 6 * 16 * S * S * 2048
    expected = 4 * llama_flops.decoder_matmul_params(d) * S + 6 * adapters * S + attention
    assert llama_flops.decoder_flops_per_sample(d, lora) == expected
    qlora = sc(peft="lora", quantize_base="nf4")
    assert llama_flops.decoder_flops_per_sample(d, qlora) == expected  # same matmuls, dequantized
    assert llama_flops.decoder_flops_per_sample(d, sc(peft="lora", lora_rank=64)) > expected


def test_fp8_rows_use_the_fp8_peak() -> None:
    fig = mfu.figures(sc(fp8=True), "llama-1b", None, 10.0, "NVIDIA H200", tf32=False)
    assert fig["peak_tflops"] == 1979.0 and "FP8" in fig["peak_source"]
    assert fig["mfu"] == pytest.approx(fig["flops_per_sample"] * 10.0 / 1e12 / 1979.0)
    bf16 = mfu.figures(sc(), "llama-1b", None, 10.0, "NVIDIA H200", tf32=False)
    assert bf16["peak_tflops"] == 989.4 and bf16["flops_per_sample"] == fig["flops_per_sample"]
    qlora = mfu.figures(sc(peft="lora", quantize_base="nf4"), "llama-1b", None, 10.0, "NVIDIA H200", False)
    assert qlora["peak_tflops"] == 989.4  # the base's matmuls run in bf16 after dequantizing


@pytest.mark.parametrize(
    "gpu, why",
    [
        ("NVIDIA H100 PCIe", "no confirmed fp8 tensor-core peak"),
        ("NVIDIA GeForce RTX 4090", "no confirmed fp8 tensor-core peak"),
        ("NVIDIA A100-SXM4-80GB", "no confirmed fp8 tensor-core peak"),
        ("Some Future GPU", "unknown GPU 'Some Future GPU'"),
        (None, "no GPU"),
    ],
)
def test_no_known_peak_leaves_mfu_empty_with_the_reason(gpu: str | None, why: str) -> None:
    fig = mfu.figures(sc(fp8=True), "llama-1b", None, 10.0, gpu, tf32=False)
    assert fig["mfu"] is None and fig["peak_tflops"] is None
    assert why in fig["peak_source"]
    assert fig["flops_per_sample"] is not None  # the FLOPs are still counted


def test_bert_keeps_its_bidirectional_count() -> None:
    bert = Scenario(name="b", model="bert-large", seq_len=512, samples=64, warmup_steps=1)
    fig = mfu.figures(bert, "bert-large", 335_143_938, 1.0, "NVIDIA H200", tf32=False)
    embeddings = (30522 + 512 + 2) * 1024
    assert fig["flops_per_sample"] == 6 * (335_143_938 - embeddings) * 512 + 12 * 24 * 1024 * 512**2
    assert fig["peak_tflops"] == 67.0  # fp32 without tf32
