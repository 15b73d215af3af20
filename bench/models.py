"""Model presets (BERT dimensions, random weights) and local checkpoints; no torch import here."""

from __future__ import annotations

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
AUTO_GPU, AUTO_CPU = "bert-large", "tiny"


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
