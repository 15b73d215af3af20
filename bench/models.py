"""Model presets (random weights, real dimensions) and local checkpoints; no torch import here.

Two families: BERT sequence classifiers (the guide's model) and Llama-style decoders trained as
causal language models. A preset's `model_type` says which; a checkpoint says it in config.json.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import BadInput, did_you_mean

_BERT_COMMON: dict[str, Any] = {
    "vocab_size": 30522,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "num_labels": 2,
}
# Dimensions of bert-base-uncased / bert-large-uncased; `tiny` is for CPU smoke tests.
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {
        "hidden_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 512,
        **_BERT_COMMON,
    },
    "bert-base": {
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        **_BERT_COMMON,
    },
    "bert-large": {
        "hidden_size": 1024,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "intermediate_size": 4096,
        **_BERT_COMMON,
    },
}
# Llama-style decoders: grouped-query attention, RMSNorm, SwiGLU, RoPE. `llama-1b` and `llama-3b`
# have the dimensions of Llama-3.2-1B and -3B (their config.json: 128,256-token vocabulary, tied
# embeddings, rope_theta 500,000; the llama3 RoPE scaling is left out, it changes no FLOP or byte);
# `llama-tiny` trains on a CPU in seconds.
_LLAMA_COMMON: dict[str, Any] = {
    "model_type": "llama",
    "hidden_act": "silu",
    "rms_norm_eps": 1e-5,
    "attention_bias": False,
    "mlp_bias": False,
}
DECODER_PRESETS: dict[str, dict[str, Any]] = {
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
        **_LLAMA_COMMON,
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
        **_LLAMA_COMMON,
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
        **_LLAMA_COMMON,
    },
}
for _bert in PRESETS.values():
    _bert["model_type"] = "bert"
PRESETS.update(DECODER_PRESETS)
AUTO_GPU, AUTO_CPU = "bert-large", "tiny"
FAMILIES = ("bert", "llama")  # what gpubench builds: BERT classifiers and Llama-style causal LMs


def preset_config(name: str) -> tuple[str, dict[str, Any]]:
    """(model_type, the keyword arguments of its transformers config class) of a preset."""
    cfg = dict(PRESETS[name])
    return cfg.pop("model_type"), cfg


def family(name: str) -> str | None:
    """'bert' or 'llama' for a preset, 'auto' or a checkpoint directory (its config.json's
    model_type); None when a directory's config cannot be read (the run's own check says why)."""
    if name == "auto":
        return "bert"
    if name in PRESETS:
        return str(PRESETS[name]["model_type"])
    try:
        cfg = json.loads((Path(name) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    model_type = cfg.get("model_type") if isinstance(cfg, dict) else None
    return model_type if model_type in FAMILIES else None


def resolve_model(name: str, device: str) -> str:
    """'auto' becomes a preset for the device; presets pass; a local directory must hold a config."""
    if name == "auto":
        return AUTO_CPU if device == "cpu" else AUTO_GPU
    if name in PRESETS:
        return name
    path = Path(name)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise BadInput(
                f"model directory {path} has no config.json",
                hint="give a Hugging Face checkpoint directory or a preset name",
            )
        return str(path.resolve())
    hint = did_you_mean(name, list(PRESETS))
    raise BadInput(
        f"unknown model '{name}': not a preset and not a local directory",
        hint=hint or f"presets are {', '.join(PRESETS)}, or give a checkpoint directory",
    )


def is_preset(name: str) -> bool:
    return name in PRESETS
