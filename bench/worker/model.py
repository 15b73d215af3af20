"""Build the model directly on the target device, as its own task (bench/families): random weights
from a preset or a config (a directory or file holding only config.json), or a local checkpoint."""

from __future__ import annotations

import contextlib
import functools
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from ..families import PRESETS
from ..families.build import auto_class, model_config, ready_for_training, task_of
from ..families.resolve import has_weights

__all__ = [
    "auto_class",
    "build_model",
    "build_random_on_cpu",
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


def build_random_on_cpu(model: str, dtype: torch.dtype, task: str = "auto") -> Any:
    """build_model on the CPU for random weights (a preset or a config), drawn once: each torch
    module's constructor draws its own weights (nn.Linear's Kaiming uniform), which transformers'
    _init_weights then draws again, so the constructors' draws are replaced by a NaN fill
    (`_constructor_inits_fill_nan`). Any NaN left in a parameter or buffer afterwards is one that
    only its constructor initialises: then the model is built again the usual way. Deterministic in
    torch's seed like build_model, though not the same values (the constructors no longer draw).
    llama-1b in bf16 on a 2-core CPU: 8.4-9.0 s against 14.0-17.4 s (docs/llm.md)."""
    # imported before the patch: a module imported under it would keep the NaN fill for good
    # (transformers' init functions bind torch's at their import)
    import transformers.modeling_utils  # noqa: F401

    auto_class(model, task)
    with _constructor_inits_fill_nan():
        built = build_model(model, torch.device("cpu"), "default", dtype, task)
    if not _has_nan(built):
        return built
    del built
    return build_model(model, torch.device("cpu"), "default", dtype, task)


def _nan_filler(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    with torch.no_grad():
        return tensor.fill_(math.nan)


@contextlib.contextmanager
def _constructor_inits_fill_nan() -> Iterator[None]:
    """torch.nn.init's functions, wherever torch.nn's modules hold them, fill NaN while this is
    open; transformers' own init functions keep the real ones (they were bound at its import).
    Each function gets a filler of its own, so that on the way out every module that holds one
    (one imported meanwhile with `from torch.nn.init import normal_` too) gets the real one back."""
    real = [f for n, f in vars(torch.nn.init).items() if n.endswith("_") and not n.startswith("_") and callable(f)]
    pairs = [(f, functools.wraps(f)(functools.partial(_nan_filler))) for f in real]
    filler_of = {id(f): filler for f, filler in pairs}  # ids of objects held alive in `pairs`
    real_of = {id(filler): f for f, filler in pairs}
    holders = [m for n, m in list(sys.modules.items()) if n == "torch.nn.init" or n.startswith("torch.nn.modules")]
    for module in holders:
        for name, value in list(vars(module).items()):
            if id(value) in filler_of:
                setattr(module, name, filler_of[id(value)])
    try:
        yield
    finally:
        for module in list(sys.modules.values()):
            for name, value in list(getattr(module, "__dict__", {}).items()):
                if id(value) in real_of:
                    setattr(module, name, real_of[id(value)])


def _has_nan(model: Any) -> bool:
    tensors = [*model.parameters(), *model.buffers()]
    return any(t.is_floating_point() and bool(torch.isnan(t).any()) for t in tensors)


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
