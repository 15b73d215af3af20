"""A worker as one rank of a torchrun job: the process group, the barriers that align the timed
window on every rank, the broadcast that ends an "auto" window at the same step on every rank, and
the gather that turns the ranks' figures into one row. With several nodes, the ranks first check
that every node runs the same scenario settings.

The group is created here, before the engine, with a timeout of its own: accelerate, the Trainer
and DeepSpeed all reuse an existing group. A rank that stops answering then makes the others fail
their next collective after `collective_timeout_s` (gloo) or be aborted by NCCL's watchdog, so a
hung rank ends the scenario well inside its timeout, and the ranks' own files say who waited.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported where it is used: from_env() is read before the worker's imports
    import torch

from ..recipe.nodes import check_same
from .window import STOPS


@dataclass(frozen=True)
class Rank:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int

    @property
    def leader(self) -> bool:
        """Writes the node's result.json: local rank 0 (each node runs its own gpubench)."""
        return self.local_rank == 0


def from_env() -> Rank | None:
    """This process's place in a torchrun job; None when not started by torchrun."""
    if "WORLD_SIZE" not in os.environ or "RANK" not in os.environ:
        return None
    return Rank(
        rank=int(os.environ["RANK"]),
        world_size=int(os.environ["WORLD_SIZE"]),
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
        local_world_size=int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
    )


def collective_timeout_s(scenario_timeout_s: float) -> float:
    """How long a collective waits for a silent rank: half the scenario's timeout (at least 10 s), so
    the waiting ranks fail, and say so, before the parent's timeout kills the job."""
    return max(10.0, scenario_timeout_s / 2)


def init(rank: Rank, device: torch.device, timeout_s: float) -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    kwargs: dict[str, Any] = {}
    if device.type == "cuda":
        kwargs["device_id"] = device  # binds the communicator to this rank's GPU at once
    dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=timeout_s), **kwargs)


def check_same_settings(node_rank: int, settings: dict[str, Any]) -> None:
    """Every node runs the same scenario settings (bench/recipe/nodes.py): each rank gives its node's, all
    ranks compare them, and every rank of every node raises the same NodesDiffer if they differ."""
    import torch.distributed as dist

    everyone: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, (node_rank, settings))
    check_same(dict(everyone))


def barrier() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()


def window_agreement(timeout_s: float) -> Callable[[str | None], str | None]:
    """For window = "auto" with several ranks: a call that every rank makes at the same check point
    with its own verdict and that returns rank 0's, so all ranks close the window at the same step.
    It goes over a gloo (CPU) group, the default group on the CPU and a group of its own beside
    NCCL: reading an NCCL result on the host would wait for the GPU's queued work (a sync inside the
    window). Ranks that reach the check point before rank 0 wait for it on the host only; their GPU
    keeps running what was queued. Every rank must call this at the same point (it makes a group)."""
    import torch
    import torch.distributed as dist

    group = None
    if dist.get_backend() != "gloo":
        group = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=timeout_s))
    codes: tuple[str | None, ...] = (None, *STOPS)

    def agree(mine: str | None) -> str | None:
        decision = torch.tensor([codes.index(mine)], dtype=torch.int64)
        dist.broadcast(decision, src=0, group=group)
        return codes[int(decision.item())]

    return agree


def gather(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """Every rank's figures, in rank order, on every rank."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return [figures]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, figures)
    return out


def close() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def wrapper_name(model: Any) -> str:
    """What really wraps the trained model (DistributedDataParallel, FSDP, DeepSpeedEngine...): a
    row must not call DDP "FSDP" because an engine fell back without a word."""
    from torch.distributed.fsdp import FSDPModule

    if isinstance(model, FSDPModule):
        return "FSDP2"
    name = type(model).__name__
    if name == "FullyShardedDataParallel":
        return "FSDP1"
    return name
