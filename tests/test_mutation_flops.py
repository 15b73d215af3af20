"""FLOPs and MFU figures a wrong operator would change unseen (make mutation): several GPUs, the
measured ceiling, the families without an analytic count, the peak table's lookups, the
cross-check note, and every reason a figure is left empty."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.families.bert import flops as bert_flops
from bench.families.llama import flops as llama_flops
from bench.measure import mfu
from bench.recipe.scenario import Scenario

GENERIC = 2.5e9  # a worker's generic count per sample


def sc(model: str = "llama-tiny", **settings: Any) -> Scenario:
    base = {"model": model, "precision": "bf16", "seq_len": 64, "samples": 64, "warmup_steps": 1}
    return Scenario(name="t", **{**base, **settings})


def inline(model_type: str, **cfg: Any) -> str:
    return json.dumps({"model_type": model_type, **cfg})


def test_two_gpus_double_the_peak_and_the_ceiling_not_the_mfu() -> None:
    one = mfu.figures(sc(), "llama-tiny", None, 1000.0, "NVIDIA H100 80GB HBM3", tf32=False, ceiling={"bf16": 600.0})
    two = mfu.figures(
        sc(), "llama-tiny", None, 2000.0, "NVIDIA H100 80GB HBM3", tf32=False, gpus=2, ceiling={"bf16": 600.0}
    )
    assert one["peak_tflops"] == 989.4 and two["peak_tflops"] == 2 * 989.4
    assert two["peak_source"] == "2 x " + one["peak_source"]
    assert one["ceiling_tflops"] == 600.0 and two["ceiling_tflops"] == 1200.0
    per_sample = one["flops_per_sample"]
    assert one["achieved_tflops"] == pytest.approx(per_sample * 1000.0 / 1e12)
    assert two["achieved_tflops"] == pytest.approx(2 * one["achieved_tflops"])
    assert two["mfu"] == pytest.approx(one["mfu"]) == pytest.approx(per_sample * 1000.0 / 1e12 / 989.4)
    assert one["mfu_ceiling"] == pytest.approx(one["achieved_tflops"] / 600.0)  # a ratio, not a product
    assert two["mfu_ceiling"] == pytest.approx(one["mfu_ceiling"])
    assert one["mfu_ceiling"] > one["mfu"]  # the ceiling is below the datasheet peak


def test_a_ceiling_of_another_format_or_without_a_gpu_gives_no_ceiling_share() -> None:
    other = mfu.figures(sc(), "llama-tiny", None, 10.0, "NVIDIA H100", tf32=False, ceiling={"fp32": 50.0})
    assert other["ceiling_tflops"] is None and other["mfu_ceiling"] is None
    cpu = mfu.figures(sc(), "llama-tiny", None, 10.0, None, tf32=False, ceiling={"bf16": 600.0})
    assert cpu["ceiling_tflops"] is None and cpu["mfu_ceiling"] is None and cpu["mfu"] is None
    assert cpu["achieved_tflops"] == pytest.approx(cpu["flops_per_sample"] * 10.0 / 1e12)
    still = mfu.figures(sc(), "llama-tiny", None, None, "NVIDIA H100", tf32=False, ceiling={"bf16": 600.0})
    assert still["ceiling_tflops"] == 600.0 and still["achieved_tflops"] is None and still["mfu_ceiling"] is None


@pytest.mark.parametrize(
    "model",
    [
        "qwen2-tiny",
        "mixtral-tiny",
        "vit-tiny",
        "tv-vit-tiny",
        inline("gpt2", n_embd=64, n_layer=2, n_head=2),
    ],
)
def test_every_other_family_takes_the_workers_generic_count(model: str) -> None:
    fig = mfu.figures(
        sc(model), model, 123, 4.0, "NVIDIA A100-SXM4-80GB", tf32=True, worker={"flops_generic_per_sample": GENERIC}
    )
    assert fig["flops_per_sample"] == GENERIC and fig["flops_source"].startswith("generic:")
    assert fig["mfu"] == pytest.approx(GENERIC * 4.0 / 1e12 / 312.0)
    none = mfu.figures(sc(model), model, 123, 4.0, "NVIDIA A100-SXM4-80GB", tf32=True)
    assert none["flops_per_sample"] is None and none["mfu"] is None and none["achieved_tflops"] is None
    assert none["flops_source"] == none["peak_source"]
    assert none["flops_source"].startswith("no FLOP count: the ") and "gave no generic count" in none["flops_source"]


def test_unreadable_or_unusable_dimensions_name_why() -> None:
    assert mfu.flops_per_sample(sc(), "/no/such/model", 10) == (None, "model dimensions unknown")
    assert bert_flops.model_dims(json.loads(inline("bert", hidden_size=8))) is None  # no num_hidden_layers
    bert = inline("bert", hidden_size=8, num_hidden_layers=2, vocab_size=10)
    assert mfu.flops_per_sample(sc(), bert, None) == (None, "model dimensions unknown")  # no parameter count
    assert mfu.flops_per_sample(sc(), bert, 0) == (None, "model dimensions unknown")
    llama = inline("llama", hidden_size=8)
    per_sample, why = mfu.flops_per_sample(sc(), llama, 10)
    assert per_sample is None and why.startswith("model dimensions unusable: ")


def test_bert_dims_count_only_the_embedding_tables_given() -> None:
    dims = bert_flops.model_dims(
        json.loads(inline("bert", hidden_size=8, num_hidden_layers=3, vocab_size=100, type_vocab_size=None))
    )
    assert dims == {"hidden": 8, "layers": 3, "embedding_params": 800}
    both = bert_flops.model_dims(
        json.loads(inline("bert", hidden_size=8, num_hidden_layers=3, vocab_size=100, type_vocab_size=2))
    )
    assert both is not None and both["embedding_params"] == 816
    assert (
        bert_flops.bert_flops_per_sample(100, {"embedding_params": 800, "layers": 3, "hidden": 8}, 4)
        == 12.0 * 3 * 8 * 16
    )
    assert (
        bert_flops.bert_flops_per_sample(900, {"embedding_params": 800, "layers": 1, "hidden": 1}, 2)
        == 6.0 * 100 * 2 + 48
    )


@pytest.mark.parametrize(
    "precision, tf32, fp8, cls",
    [
        ("bf16", False, False, "bf16"),
        ("fp16", True, False, "fp16"),
        ("fp32", True, False, "tf32"),
        ("fp32", False, False, "fp32"),
        ("bf16", False, True, "fp8"),
        ("fp32", False, True, "fp8"),
        ("transformer-engine", False, False, "fp8"),  # an engine's own FP8 precision
        ("bf16-true", False, False, "bf16"),
    ],
)
def test_the_precision_class(precision: str, tf32: bool, fp8: bool, cls: str) -> None:
    assert mfu.precision_class(precision, tf32, fp8) == cls
    if not fp8:
        assert mfu.precision_class(precision, tf32) == cls  # fp8 is off unless asked


@pytest.mark.parametrize(
    "gpu, precision, tf32, peak",
    [
        ("NVIDIA H200 NVL", "bf16", False, 835.5),
        ("NVIDIA H200", "fp32", True, 494.7),
        ("NVIDIA H100 NVL", "fp16", False, 835.5),
        ("NVIDIA H100 PCIe", "fp32", False, 51.2),
        ("NVIDIA L4", "bf16", False, 121.0),
        ("NVIDIA A10", "fp32", True, 62.5),
        ("Tesla V100-PCIE-32GB", "fp16", False, 112.0),
        ("NVIDIA GeForce RTX 3090", "bf16", False, 71.0),
    ],
)
def test_the_first_matching_peak_wins(gpu: str, precision: str, tf32: bool, peak: float) -> None:
    found, source = mfu.peak_tflops(gpu, precision, tf32)
    assert found == peak
    assert "(FP8)" not in source


def test_the_cross_check_note() -> None:
    assert mfu.check_note(5.0, None) == "" and mfu.check_note(-5.0, None) == ""
    assert mfu.check_note(None, None) == ""
    assert mfu.check_note(5.1, None) == "FlopCounterMode counts +5.1% against the generic count of the dense step"
    assert mfu.check_note(-7.25, None).startswith("FlopCounterMode counts -7.2")
    assert mfu.check_note(50.0, "not run: no CUDA") == "not run: no CUDA"
    fig = mfu.figures(sc(), "llama-tiny", None, 1.0, None, False, worker={"flops_check_per_sample": 1.0})
    assert fig["flops_check_note"] == ""
    fig = mfu.figures(sc(), "llama-tiny", None, 1.0, None, False, worker={"flops_check_note": "skipped"})
    assert fig["flops_check_note"] == "skipped"
    assert "flops_check_note" not in mfu.figures(sc(), "llama-tiny", None, 1.0, None, False)


def test_lora_flops_take_the_adapters_from_the_scenarios_rank() -> None:
    from bench.families.memory_model import load_dims

    d = load_dims("llama-tiny")
    full = llama_flops.decoder_flops_per_sample(d, sc())  # type: ignore[arg-type]
    lora = llama_flops.decoder_flops_per_sample(d, sc(peft="lora", lora_rank=4))  # type: ignore[arg-type]
    base = llama_flops.decoder_matmul_params(d)  # type: ignore[arg-type]
    assert full - lora == pytest.approx(
        2 * base * 64 - 6 * llama_flops.adapter_params(d, sc(peft="lora", lora_rank=4)) * 64
    )  # type: ignore[arg-type]
    assert (
        0
        < llama_flops.adapter_params(d, sc(peft="lora", lora_rank=4))
        < llama_flops.adapter_params(d, sc(peft="lora", lora_rank=8))
    )  # type: ignore[arg-type]
