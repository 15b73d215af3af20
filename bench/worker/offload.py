"""Activation offloading (activation_offload = true): the tensors autograd saves for the backward go
to pinned CPU memory during the forward and come back to the GPU when the backward needs them.

Through torch.autograd.graph.saved_tensors_hooks, like torchtune's OffloadActivations, on one stream
(no copy/compute overlap: the copies' cost is part of what the row measures). Unlike
torch.autograd.graph.save_on_cpu it leaves the weights alone: a saved tensor that is a parameter,
or a view of one (a linear layer saves its weight transposed), stays where it is, as does any
tensor under MIN_BYTES, not worth a transfer (torchtune's default threshold), and any expanded view
(a copy would materialise the broadcast).
"""

from __future__ import annotations

import functools
from typing import Any

import torch

MIN_BYTES = 1024


class OffloadActivations(torch.autograd.graph.saved_tensors_hooks):
    """While active, saved tensors other than `params` (and small ones) are packed as CPU copies."""

    def __init__(
        self, params: list[torch.nn.Parameter], min_bytes: int = MIN_BYTES, tally: dict[str, int] | None = None
    ) -> None:
        weights = {_storage(p) for p in params}
        self.tally = tally if tally is not None else {"tensors": 0, "bytes": 0}  # what was copied out

        def pack(t: torch.Tensor) -> Any:
            storage = _storage(t)
            if (
                isinstance(t, torch.nn.Parameter)
                or storage is None  # a tensor subclass without plain storage: left alone
                or storage in weights
                or t.numel() * t.element_size() < min_bytes
                or 0 in t.stride()  # an expanded view (a broadcast mask): a copy would materialise it
            ):
                return t
            host = torch.empty_like(t, device="cpu", pin_memory=t.is_cuda)
            host.copy_(t, non_blocking=True)
            self.tally["tensors"] += 1
            self.tally["bytes"] += t.numel() * t.element_size()
            return (t.device, host)

        def unpack(packed: Any) -> torch.Tensor:
            if isinstance(packed, tuple):
                device, host = packed
                return host.to(device, non_blocking=True)
            return packed

        super().__init__(pack, unpack)


def _storage(t: torch.Tensor) -> int | None:
    try:
        return int(t.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError, TypeError):
        return None


def offload_forward(model: torch.nn.Module, min_bytes: int = MIN_BYTES) -> dict[str, int]:
    """Run every forward of `model` under OffloadActivations (the backward unpacks what it packed,
    wherever it runs); returns the running tally of tensors and bytes copied out. The parameters
    are read again at each forward (cheap): a wrapper that comes later may replace them."""
    inner = model.forward
    tally = {"tensors": 0, "bytes": 0}

    @functools.wraps(inner)
    def forward(*args: Any, **kwargs: Any) -> Any:
        with OffloadActivations(list(model.parameters()), min_bytes, tally):
            return inner(*args, **kwargs)

    model.forward = forward  # type: ignore[method-assign]
    return tally
