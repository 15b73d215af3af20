"""Build the model directly on the target device: random weights from a preset, or a checkpoint."""

from __future__ import annotations

from typing import Any

import torch

from ..models import PRESETS, preset_config


def build_model(model: str, device: torch.device, attn_implementation: str) -> Any:
    from transformers import AutoModelForSequenceClassification, BertConfig

    extra: dict[str, Any] = {}
    if attn_implementation != "default":
        extra["attn_implementation"] = attn_implementation
    if model in PRESETS:
        _, kwargs = preset_config(model)
        config = BertConfig(**kwargs)
        # Initialising on the device skips building 1.3 GB on the CPU and copying it over.
        with device:
            built = AutoModelForSequenceClassification.from_config(config, **extra)
        return built.float()
    # A local checkpoint: safetensors only and no remote code, so a downloaded directory cannot
    # run code on the benchmark machine.
    return AutoModelForSequenceClassification.from_pretrained(
        model,
        trust_remote_code=False,
        use_safetensors=True,
        local_files_only=True,
        dtype=torch.float32,
        device_map={"": device},
        **extra,
    )


def count_parameters(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())
