"""checkpoint_every = k: activation checkpointing of every k-th transformer layer (layers 0, k, 2k, ...).

The layers are the model's ModuleList as long as its config's num_hidden_layers (a decoder's
`model.layers`, BERT's `encoder.layer`, ViT's `encoder.layer`); each chosen layer's forward runs under
torch.utils.checkpoint (non-reentrant, so keyword arguments and frozen inputs work): it keeps only its
input and recomputes the rest in the backward. The other layers save their activations as usual:
memory between none and every layer, fewer recomputed layers than every layer. A model without such
a list is refused at plan time where its family takes no checkpointing, and here otherwise."""

from __future__ import annotations

import functools
from typing import Any


def layer_list(model: Any) -> Any:
    """The model's transformer layers: the ModuleList as long as num_hidden_layers (the first found)."""
    import torch

    config = getattr(model, "config", None)
    count = getattr(config, "num_hidden_layers", None)
    for _, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) > 0 and (count is None or len(module) == count):
            return module
    raise ValueError(f"checkpoint_every: no list of {count} layers in {type(model).__name__} to checkpoint")


def checkpoint_every(model: Any, k: int) -> list[int]:
    """Wrap every k-th layer's forward in torch.utils.checkpoint; the indices wrapped."""
    from torch.utils.checkpoint import checkpoint

    def run(forward: Any, *args: Any, **kwargs: Any) -> Any:
        if not forward.__self__.training:  # evaluation saves nothing for a backward
            return forward(*args, **kwargs)
        return checkpoint(forward, *args, use_reentrant=False, **kwargs)

    chosen = []
    for i, layer in enumerate(layer_list(model)):
        if i % k == 0:
            layer.forward = functools.partial(run, layer.forward)
            chosen.append(i)
    return chosen
