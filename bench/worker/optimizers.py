"""Every optimizer gpubench builds itself, for both engines: the Accelerate loop's (the same classes
and settings as the Trainer's `optim` choices), and the ones the Trainer is handed through
`optimizers=` (scenario.OPTIMIZERS[name] is None: adamw_foreach, adam8bit_manual)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class AdamSettings:
    """Learning rate, betas, epsilon and weight decay: TrainingArguments' defaults, or its values."""

    lr: float = 5e-5
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0

    @classmethod
    def of(cls, args: Any) -> AdamSettings:
        """The settings of a TrainingArguments."""
        return cls(args.learning_rate, (args.adam_beta1, args.adam_beta2), args.adam_epsilon, args.weight_decay)


def decay_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """The guide's two groups, by the Trainer's rule: weight decay on every trainable parameter but
    biases and the weights of normalisation layers (LayerNorm, RMSNorm), none on those."""
    no_decay: set[str] = set()
    for prefix, module in model.named_modules():
        kind = type(module).__name__.lower()
        is_norm = isinstance(module, torch.nn.LayerNorm) or kind.endswith(("layernorm", "rmsnorm"))
        for name, _ in module.named_parameters(recurse=False):
            if is_norm or name == "bias":
                no_decay.add(f"{prefix}.{name}" if prefix else name)
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    return [
        {"params": [p for n, p in params if n not in no_decay], "weight_decay": weight_decay},
        {"params": [p for n, p in params if n in no_decay], "weight_decay": 0.0},
    ]


def make_optimizer(name: str, model: torch.nn.Module, hp: AdamSettings | None = None) -> torch.optim.Optimizer:
    """The optimizer over the model's trainable parameters (all of them, but under LoRA)."""
    hp = hp or AdamSettings()
    params = [p for p in model.parameters() if p.requires_grad]
    adam: dict[str, Any] = {"lr": hp.lr, "betas": hp.betas, "eps": hp.eps, "weight_decay": hp.weight_decay}
    if name == "adamw":
        return torch.optim.AdamW(params, **adam)
    if name == "adamw_fused":
        return torch.optim.AdamW(params, **adam, fused=True)
    if name == "adamw_foreach":
        return torch.optim.AdamW(params, **adam, foreach=True)
    if name == "adafactor":
        from transformers.optimization import Adafactor

        return Adafactor(params, lr=hp.lr, scale_parameter=False, relative_step=False)
    if name == "sgd":
        return torch.optim.SGD(params, lr=hp.lr)
    import bitsandbytes as bnb

    if name == "adamw_8bit":
        return bnb.optim.AdamW(params, **adam, optim_bits=8)
    if name == "paged_adamw_8bit":
        return bnb.optim.PagedAdamW8bit(params, **adam)
    if name == "adam8bit_manual":
        # the guide's own code: bnb.optim.Adam8bit over the decay / no-decay groups
        return bnb.optim.Adam8bit(decay_groups(model, hp.weight_decay), lr=hp.lr, betas=hp.betas, eps=hp.eps)
    raise ValueError(f"unknown optimizer {name!r}")
