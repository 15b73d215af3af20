"""Llama-style decoders trained as causal LMs: grouped-query attention, RMSNorm, SwiGLU, RoPE.
Its own FLOP count (flops.py) and memory model (dims.py: dimensions and tensors, weights.py: model
states, acts.py: saved tensors and logits, phases.py: the phases), written for LlamaForCausalLM;
every decoder technique applies."""

from __future__ import annotations

from typing import Any

from ..base import Family

_COMMON: dict[str, Any] = {
    "model_type": "llama",
    "hidden_act": "silu",
    "rms_norm_eps": 1e-5,
    "attention_bias": False,
    "mlp_bias": False,
}
# `llama-1b` and `llama-3b` have the dimensions of Llama-3.2-1B and -3B (their config.json:
# 128,256-token vocabulary, tied embeddings, rope_theta 500,000; the llama3 RoPE scaling is left
# out, it changes no FLOP or byte); `llama-tiny` trains on a CPU in seconds.
PRESETS: dict[str, dict[str, Any]] = {
    "llama-tiny": {
        "hidden_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "intermediate_size": 352,
        "vocab_size": 4096,
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        **_COMMON,
    },
    "llama-1b": {
        "hidden_size": 2048,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "intermediate_size": 8192,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "tie_word_embeddings": True,
        **_COMMON,
    },
    "llama-3b": {
        "hidden_size": 3072,
        "num_hidden_layers": 28,
        "num_attention_heads": 24,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": 8192,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "tie_word_embeddings": True,
        **_COMMON,
    },
    # the dense counterpart of the moe matrix's mixtral-1b: the same layers, heads and vocabulary,
    # one MLP as wide as its two routed experts (2 x 2,816), so both run the same active weights
    "llama-0.4b": {
        "hidden_size": 1024,
        "num_hidden_layers": 16,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "intermediate_size": 5632,
        "vocab_size": 32000,
        "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": False,
        **_COMMON,
    },
}

FAMILY = Family(
    name="llama",
    model_types=("llama",),
    tasks=("causal-lm",),
    default_task="causal-lm",
    description="Llama-style causal LMs; exact FLOPs and memory, every decoder technique",
    techniques=frozenset({"lora", "qlora", "liger", "fp8"}),
    flops="bench.families.llama.flops:flops_per_sample",
    memory="bench.families.llama.phases:MODEL",
    presets=PRESETS,
    preload=("transformers.models.llama.modeling_llama",),
    # the function the published llm rows ran
    liger_patch="liger_kernel.transformers:apply_liger_kernel_to_llama",
)
