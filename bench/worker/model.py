"""Build the model directly on the target device: random weights from a preset, or a checkpoint.

Two families (bench/models.py): BERT sequence classifiers and Llama-style causal language models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..models import PRESETS, family, preset_config


def auto_class(model: str) -> Any:
    """The transformers Auto class that builds this model's family."""
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    return AutoModelForCausalLM if family(model) == "llama" else AutoModelForSequenceClassification


def preset(model: str) -> Any:
    """The transformers config of a preset (random weights, real dimensions)."""
    from transformers import BertConfig, LlamaConfig

    model_type, kwargs = preset_config(model)
    config = LlamaConfig(**kwargs) if model_type == "llama" else BertConfig(**kwargs)
    config.use_cache = False  # training: no key/value cache (a decoder would build one every forward)
    return config


def build_model(model: str, device: torch.device, attn_implementation: str, dtype: torch.dtype = torch.float32) -> Any:
    """The model, its parameters in `dtype` (fp32 unless a frozen LoRA base is stored in half)."""
    extra: dict[str, Any] = {}
    if attn_implementation != "default":
        extra["attn_implementation"] = attn_implementation
    cls = auto_class(model)
    if model in PRESETS:
        # Initialising on the device skips building 1.3 GB on the CPU and copying it over.
        with device:
            built = cls.from_config(preset(model), dtype=dtype, **extra)
        return built.to(dtype)
    return load_checkpoint(model, device, dtype, **extra)


def load_checkpoint(path: str | Path, device: torch.device, dtype: torch.dtype, **extra: Any) -> Any:
    """A local checkpoint: safetensors only and no remote code, so a downloaded directory cannot
    run code on the benchmark machine. `extra`: attn_implementation, quantization_config."""
    built = auto_class(str(path)).from_pretrained(
        str(path),
        trust_remote_code=False,
        use_safetensors=True,
        local_files_only=True,
        dtype=dtype,
        device_map={"": device},
        **extra,
    )
    if getattr(built.config, "use_cache", None):
        built.config.use_cache = False
    return built


def count_parameters(model: Any) -> int:
    """Every parameter, counted as the model's (a 4-bit weight packs two values in a byte)."""
    return sum(_logical_numel(p) for p in model.parameters())


def count_trainable(model: Any) -> int:
    return sum(_logical_numel(p) for p in model.parameters() if p.requires_grad)


def _logical_numel(p: torch.Tensor) -> int:
    quant_state = getattr(p, "quant_state", None)  # bitsandbytes' Params4bit: the unpacked shape
    shape = getattr(quant_state, "shape", None)
    return int(torch.Size(shape).numel()) if shape is not None else p.numel()
