"""Decoders transformers builds that gpubench has no analytic count for (Qwen, Mistral, Gemma, Phi,
GPT-2, OLMo...): FLOPs from the built model's matmul weights, parameters and optimizer states from
its tensors, activations not predicted. Causal LM by default; a sequence classifier on request."""

from __future__ import annotations

from typing import Any

from .base import Family

# Shapes of public checkpoints (their config.json), random weights: the decoders matrix.
PRESETS: dict[str, dict[str, Any]] = {
    "qwen2-tiny": {
        "model_type": "qwen2",
        "hidden_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 352,
        "vocab_size": 4096,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": True,
    },
    "qwen2-0.5b": {  # Qwen/Qwen2-0.5B
        "model_type": "qwen2",
        "hidden_size": 896,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "intermediate_size": 4864,
        "vocab_size": 151936,
        "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
    },
    "qwen3-0.6b": {  # Qwen/Qwen3-0.6B
        "model_type": "qwen3",
        "hidden_size": 1024,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": 3072,
        "vocab_size": 151936,
        "max_position_embeddings": 40960,
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
    },
    "mistral-7b": {  # mistralai/Mistral-7B-v0.3
        "model_type": "mistral",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": 14336,
        "vocab_size": 32768,
        "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-5,
        "sliding_window": None,
        "tie_word_embeddings": False,
    },
}

MODEL_TYPES = (
    "qwen2",
    "qwen3",
    "mistral",
    "gemma",
    "gemma2",
    "gemma3_text",
    "phi",
    "phi3",
    "gpt2",
    "gpt_neox",
    "olmo",
    "olmo2",
    "granite",
    "starcoder2",
    "cohere",
    "stablelm",
    "smollm3",
)

FAMILY = Family(
    name="decoder",
    model_types=MODEL_TYPES,
    tasks=("causal-lm", "sequence-classification"),
    default_task="causal-lm",
    description="other decoders (Qwen, Mistral, Gemma, Phi, GPT-2...): generic FLOPs, activations not predicted",
    techniques=frozenset({"lora", "qlora", "liger", "fp8"}),
    presets=PRESETS,
)
