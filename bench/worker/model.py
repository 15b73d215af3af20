"""Build the model directly on the target device, as its own task (bench/families): random weights
from a preset or a config (a directory or file holding only config.json), or a local checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..families import PRESETS
from ..families.build import auto_class, model_config, ready_for_training, task_of
from ..models import has_weights

__all__ = [
    "auto_class",
    "build_model",
    "count_parameters",
    "count_trainable",
    "load_checkpoint",
    "model_config",
    "task_of",
]


def build_model(
    model: str,
    device: torch.device,
    attn_implementation: str,
    dtype: torch.dtype = torch.float32,
    task: str = "auto",
    experts_implementation: str = "default",
) -> Any:
    """The model, its parameters in `dtype` (fp32 unless a frozen LoRA base is stored in half)."""
    extra: dict[str, Any] = {}
    if attn_implementation != "default":
        extra["attn_implementation"] = attn_implementation
    if experts_implementation != "default":
        extra["experts_implementation"] = experts_implementation
    if model in PRESETS or not has_weights(model):
        cls = auto_class(model, task)
        # Initialising on the device skips building 1.3 GB on the CPU and copying it over.
        with device:
            built = cls.from_config(model_config(model, task), dtype=dtype, **extra)
        return built.to(dtype)
    return load_checkpoint(model, device, dtype, task=task, **extra)


def load_checkpoint(
    path: str | Path, device: torch.device, dtype: torch.dtype, task: str = "auto", **extra: Any
) -> Any:
    """A local checkpoint: safetensors only and no remote code, so a downloaded directory cannot
    run code on the benchmark machine. `extra`: attn_implementation, quantization_config."""
    built = auto_class(str(path), task).from_pretrained(
        str(path),
        trust_remote_code=False,
        use_safetensors=True,
        local_files_only=True,
        dtype=dtype,
        device_map={"": device},
        **extra,
    )
    ready_for_training(built.config, task_of(str(path), task))
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
