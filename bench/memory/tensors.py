"""A model's parameter tensors as the memory model sees them: a name and a shape, nothing more.

Family-free: a family lists its tensors from its config (bench/families/bert/dims.py,
bench/families/llama/dims.py), or any built model
gives them through `from_named_parameters` - for instance one built on torch's meta device, which
allocates nothing:

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    tensors = from_named_parameters((n, p.shape) for n, p in model.named_parameters())

No torch import here: the caller passes names and shapes (a torch.Size is a tuple of ints).
The per-tensor rules (8-bit optimizer states from 4096 elements, Adafactor's factored states for
2-D tensors, the Trainer's weight-decay groups) read only what is here (terms.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ParamTensor:
    name: str
    shape: tuple[int, ...]
    layer: int | None  # encoder/decoder layer index; None for embeddings and the head

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def is_embedding(self) -> bool:
        return self.name.endswith(("_embeddings.weight", "embed_tokens.weight"))

    @property
    def is_linear_weight(self) -> bool:
        """An nn.Linear weight: the tensors autocast copies to half precision for the matmuls."""
        return len(self.shape) == 2 and not self.is_embedding

    @property
    def no_decay(self) -> bool:
        """Biases and norm weights: the Trainer's second optimizer group (no weight decay)."""
        return self.name.endswith((".bias", "norm.weight")) or "LayerNorm" in self.name


def layer_index(name: str) -> int | None:
    """The layer a parameter belongs to: the first all-digit part of its dotted name
    ('model.layers.3.mlp.up_proj.weight' -> 3, 'bert.encoder.layer.0....' -> 0), else None."""
    return next((int(part) for part in name.split(".") if part.isdigit()), None)


def from_named_parameters(named: Iterable[tuple[str, Sequence[int]]]) -> list[ParamTensor]:
    """(name, shape) pairs, as a built model's named_parameters() gives them, as ParamTensors in the
    same order; each one's layer is read from its name (layer_index)."""
    out = []
    for name, shape in named:
        dims = tuple(int(n) for n in shape)
        if any(n < 0 for n in dims):
            raise ValueError(f"parameter {name!r}: shape {dims} has a negative size")
        out.append(ParamTensor(name, dims, layer_index(name)))
    return out
