"""Mixture-of-experts decoders (Mixtral, Qwen-MoE, OLMoE...): FLOPs count only the experts a token
is routed to (num_experts_per_tok of the config's experts); the experts' implementation in
transformers (`eager`, `batched_mm`, `grouped_mm`) is the scenario field `experts_implementation`."""

from __future__ import annotations

from typing import Any

from .base import Family

_MIXTRAL: dict[str, Any] = {
    "model_type": "mixtral",
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "vocab_size": 32000,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "tie_word_embeddings": False,
}
PRESETS: dict[str, dict[str, Any]] = {
    "mixtral-tiny": {
        **_MIXTRAL,
        "hidden_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 256,
        "vocab_size": 4096,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
    },
    # A Mixtral-shaped MoE of ~1.2B parameters, ~0.38B active (8 experts, 2 a token)...
    "mixtral-1b": {
        **_MIXTRAL,
        "hidden_size": 1024,
        "num_hidden_layers": 16,
        "intermediate_size": 2816,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
    },
}

MODEL_TYPES = (
    "mixtral",
    "qwen2_moe",
    "qwen3_moe",
    "olmoe",
    "granitemoe",
    "phimoe",
    "deepseek_v3",
    "gpt_oss",
)
# config keys: (experts, experts per token); first present pair wins
EXPERT_KEYS = (
    ("num_local_experts", "num_experts_per_tok"),
    ("num_experts", "num_experts_per_tok"),
    ("n_routed_experts", "num_experts_per_tok"),
)

FAMILY = Family(
    name="moe",
    model_types=MODEL_TYPES,
    tasks=("causal-lm",),
    default_task="causal-lm",
    description="mixture-of-experts decoders (Mixtral, Qwen-MoE, OLMoE): active-expert FLOPs",
    techniques=frozenset({"lora", "liger", "experts"}),
    moe=True,
    presets=PRESETS,
)


def experts(cfg: dict[str, Any]) -> tuple[int, int] | None:
    """(experts, experts per token) from a config, or None."""
    for total_key, active_key in EXPERT_KEYS:
        total, active = cfg.get(total_key), cfg.get(active_key)
        if isinstance(total, int) and isinstance(active, int) and total >= 1 and 1 <= active <= total:
            return total, active
    return None
