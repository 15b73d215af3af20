"""LoRA adapts exactly the layers docs/models.md names, in every family (issue 58, item 5): GPT-2's
Conv1D projections included, a MoE's routed experts left out (a dense MLP and a shared expert
kept), the same layers in the worker, the memory model and the row's `lora_modules`; a LoRA row's
FLOPs below its full fine-tune's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness import SHORT, gpubench, results, write_matrix

from bench.families.build import auto_class, chosen_layers, inventory, model_config
from bench.measure.flopcount import generic_flops_per_sample
from bench.recipe.scenario import Scenario
from bench.worker.llm import adapted_layers, lora_figures, with_lora

DIMS = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 256}
# tiny configs of families with linear layers of every kind LoRA meets (transformers' config keys)
CONFIGS: dict[str, dict[str, Any]] = {
    "gpt2": {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 256, "n_positions": 64},
    "deepseek_v3": {
        "model_type": "deepseek_v3",
        **DIMS,
        "num_key_value_heads": 4,
        "intermediate_size": 128,
        "moe_intermediate_size": 16,
        "n_routed_experts": 16,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 1,
        "q_lora_rank": 32,
        "kv_lora_rank": 32,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 8,
        "v_head_dim": 16,
        "n_group": 1,
        "topk_group": 1,
    },
    "qwen2_moe": {
        "model_type": "qwen2_moe",
        **DIMS,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 64,
        "num_experts": 4,
        "num_experts_per_tok": 2,
    },
    "qwen2": {"model_type": "qwen2", **DIMS, "num_key_value_heads": 2, "intermediate_size": 128},
}
PRESETS = ("llama-tiny", "mixtral-tiny", "vit-tiny")
MODELS = (*CONFIGS, *PRESETS)


@pytest.fixture(scope="module")
def configs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("configs")
    out = {}
    for name, cfg in CONFIGS.items():
        (folder / f"{name}.json").write_text(json.dumps(cfg))
        out[name] = str(folder / f"{name}.json")
    return {**out, **{p: p for p in PRESETS}}


def _task(model: str) -> str:
    return "image-classification" if model.startswith("vit") else "causal-lm"


def _built(model: str) -> Any:
    task = _task(model)
    return auto_class(model, task).from_config(model_config(model, task))


def _lora(model: str, rank: int = 2, targets: str = "all-linear") -> Any:
    sc = Scenario(name="lora", model=model, peft="lora", lora_rank=rank, lora_targets=targets)
    return with_lora(sc, _built(model), _task(model))


def _plain(name: str) -> str:
    return name.removeprefix("base_model.model.")


@pytest.mark.parametrize("name", MODELS)
def test_the_worker_adapts_exactly_the_layers_the_memory_model_counts(name: str, configs: dict[str, str]) -> None:
    model = configs[name]
    wrapped = _lora(model)
    planned = [fqn for fqn, _, _ in chosen_layers(inventory(model, _task(model))[1], "all-linear")]
    assert planned and sorted(_plain(f) for f in adapted_layers(wrapped)) == sorted(planned)
    figures = lora_figures(wrapped)
    assert figures["lora_layers"] == len(planned)
    assert figures["lora_modules"] == ",".join(sorted({f.rsplit(".", 1)[-1] for f in planned}))


def test_gpt2s_conv1d_projections_are_adapted(configs: dict[str, str]) -> None:
    """Before: the target finder saw no nn.Linear in GPT-2 and peft raised NoMatchingPeftModuleError."""
    figures = lora_figures(_lora(configs["gpt2"]))
    assert figures == {"lora_modules": "c_attn,c_fc,c_proj", "lora_layers": 8}


@pytest.mark.parametrize("name", ["deepseek_v3", "qwen2_moe", "mixtral-tiny"])
def test_a_moes_routed_experts_are_left_out_and_its_dense_and_shared_mlps_kept(
    name: str, configs: dict[str, str]
) -> None:
    """Before: peft moved every gate/up/down_proj target onto the routed experts' 3-D parameters,
    leaving DeepSeek-V3's dense MLP and shared expert without adapters."""
    wrapped = _lora(configs[name])
    adapters = [n for n, _ in wrapped.named_parameters() if "lora_" in n]
    assert not [n for n in adapters if ".experts." in n]
    if name == "deepseek_v3":
        assert any(".layers.0.mlp.down_proj.lora_A" in n for n in adapters)  # the dense first layer
        assert any(".mlp.shared_experts.gate_proj.lora_A" in n for n in adapters)
    if name == "qwen2_moe":
        assert any(".mlp.shared_expert.up_proj.lora_A" in n for n in adapters)


@pytest.mark.parametrize("name", MODELS)
def test_a_lora_rows_flops_stay_below_its_full_fine_tunes(name: str, configs: dict[str, str]) -> None:
    """At rank 8 on width 64 (about d/6: docs/models.md). Before, DeepSeek-V3's adapters on its 16
    routed experts counted 18.7M against the full fine-tune's 15.3M (87M against 64M in the issue)."""
    model = configs[name]
    vision = _task(model) == "image-classification"
    tokens = 17 if vision else 32
    causal = not vision
    full = generic_flops_per_sample(_built(model), tokens, causal, vision)
    lora = generic_flops_per_sample(_lora(model, rank=8), tokens, causal, vision)
    assert 0 < lora < full


def test_named_targets_pick_among_the_same_layers(configs: dict[str, str]) -> None:
    figures = lora_figures(_lora(configs["deepseek_v3"], targets="q_b_proj,down_proj"))
    assert figures == {"lora_modules": "down_proj,q_b_proj", "lora_layers": 4}  # 2 q_b_proj, dense + shared down


def test_lora_on_gpt2_trains_and_its_row_names_the_adapted_layers(tmp_path: Path) -> None:
    config = tmp_path / "gpt2.json"
    config.write_text(json.dumps(CONFIGS["gpt2"]))
    matrix = write_matrix(
        tmp_path / "m.toml", {"lora": {"peft": "lora", "lora_rank": 2}}, base={**SHORT, "model": str(config)}
    )
    done = gpubench("run", "--matrix", matrix, "--device", "cpu", "--out", tmp_path / "out", "--engine", "torch")
    assert done.returncode == 0, done.stderr
    row = results(tmp_path / "out").iloc[0]
    assert row["status"] == "ok"
    assert (row["lora_modules"], int(row["lora_layers"])) == ("c_attn,c_fc,c_proj", 8)
