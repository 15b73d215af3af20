"""torch.compile over the whole model, or over each repeated block ("regional compilation")."""

from __future__ import annotations

from typing import Any

import torch


def repeated_blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The blocks of the largest ModuleList (or nn.Sequential: torchvision's ViT's encoder.layers)
    whose children all share one class (BERT: its layers)."""
    best: list[torch.nn.Module] = []
    best_params = -1
    for module in model.modules():
        if not isinstance(module, torch.nn.ModuleList | torch.nn.Sequential) or len(module) < 2:
            continue
        children = list(module)
        if len({type(c) for c in children}) != 1:
            continue
        params = sum(p.numel() for p in module.parameters())
        if params > best_params:
            best, best_params = children, params
    return best


def compile_layers(model: torch.nn.Module, mode: str = "default") -> int:
    """Compile each repeated block in place; dynamo reuses one graph for all of them.

    The code around the blocks (embeddings, attention-mask creation, the head, the loss) stays
    eager: with transformers 5.17 compiling the whole BERT materialises the all-ones attention mask,
    which keeps SDPA off its flash kernels (measured on the H200: results/README.md)."""
    blocks = repeated_blocks(model)
    if not blocks:
        raise ValueError(
            f"compile_scope = 'layers': {type(model).__name__} has no list of repeated blocks to compile; "
            "use compile_scope = 'model'"
        )
    for block in blocks:
        block.compile(mode=mode)
    return len(blocks)


def compiled(model: Any, scope: str, mode: str = "default") -> Any:
    """The model to train: torch.compile(model, mode=mode), or the model with its blocks compiled in
    place; `mode` is torch.compile's (default, reduce-overhead, max-autotune)."""
    if scope == "layers":
        compile_layers(model, mode)
        return model
    return torch.compile(model, mode=mode)
