"""Build the model directly on the target device, as its own task (bench/families): random weights
from a preset or a config (a directory or file holding only config.json), or a local checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..families import PRESETS, TASK_CLASSES, family_of, read_config, resolve_task
from ..models import has_weights


def task_of(model: str, task: str = "auto") -> str:
    """The task a model trains (the scenario's `task`, else its config's architectures, else its
    family's default)."""
    cfg = read_config(model)
    return resolve_task(task, cfg, family_of(model), model)


def auto_class(model: str, task: str = "auto") -> Any:
    """The transformers Auto class that builds this model's task."""
    import transformers

    return getattr(transformers, TASK_CLASSES[task_of(model, task)])


def model_config(model: str, task: str = "auto") -> Any:
    """The transformers config of a preset or a config file (random weights, real dimensions),
    readied for training the task: no key/value cache; a classifier's pad token (a decoder
    classifier needs one to find each row's last token)."""
    from transformers import AutoConfig

    cfg = read_config(model)
    model_type = cfg.pop("model_type")
    for key in ("transformers_version", "auto_map"):
        cfg.pop(key, None)  # auto_map would name remote code, which is never run
    config = AutoConfig.for_model(model_type, **cfg)
    return ready_for_training(config, task_of(model, task))


def ready_for_training(config: Any, task: str) -> Any:
    config.use_cache = False  # training: no key/value cache (a decoder would build one every forward)
    if task == "sequence-classification" and getattr(config, "pad_token_id", None) is None:
        eos = getattr(config, "eos_token_id", None)
        eos = eos[0] if isinstance(eos, list) and eos else eos
        vocab = getattr(config, "vocab_size", 0) or 0
        config.pad_token_id = eos if isinstance(eos, int) and 0 <= eos < vocab else 0
    return config


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
