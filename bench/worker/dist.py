"""A worker as one rank of a torchrun job: the process group, the barriers that align the timed
window on every rank, and the gather that turns the ranks' figures into one row.

The group is created here, before the engine, with a timeout of its own: accelerate, the Trainer
and DeepSpeed all reuse an existing group. A rank that stops answering then makes the others fail
their next collective after `collective_timeout_s` (gloo) or be aborted by NCCL's watchdog, so a
hung rank ends the scenario well inside its timeout, and the ranks' own files say who waited.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from typing import Any

import torch


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


def barrier() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()


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
