"""A multi-dimensional device mesh, as data (torch-free): how a scenario's processes split into
data-parallel replicas (`dp_replicate`), FSDP2 shards (`dp_shard`), context-parallel ranks (`cp`)
and tensor-parallel ranks (`tp`), in torch's and torchtitan's order (dp_replicate, dp_shard, cp,
tp: tp innermost, so a tensor-parallel group is the GPUs of one node). The worker builds it with
torch's `init_device_mesh` (bench/worker/device_mesh.py); the parent validates it here before any work.

A rank's place follows from its rank alone (row-major over the shape), so the parent and the
ranks agree on which ranks count a data-parallel replica's samples once (cp and tp ranks of one
replica train the same samples).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DIMS = ("dp_replicate", "dp_shard", "cp", "tp")
AUTO = "auto"


@dataclass(frozen=True)
class Mesh:
    dp_replicate: int = 1
    dp_shard: int = 1
    cp: int = 1
    tp: int = 1

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.dp_replicate, self.dp_shard, self.cp, self.tp)

    @property
    def size(self) -> int:
        return self.dp_replicate * self.dp_shard * self.cp * self.tp

    @property
    def dp(self) -> int:
        """Data-parallel replicas of the batch: each trains its own samples."""
        return self.dp_replicate * self.dp_shard

    @property
    def fsdp_shards(self) -> int:
        """The ranks over which FSDP2 shards the model states: dp_shard and cp together (the cp
        ranks of one replica need their gradients reduced too, as torchtitan's dp_shard_cp)."""
        return self.dp_shard * self.cp

    def coords(self, rank: int) -> dict[str, int]:
        """This rank's index along each dimension."""
        out: dict[str, int] = {}
        for name, size in reversed(tuple(zip(DIMS, self.shape, strict=True))):
            out[name] = rank % size
            rank //= size
        return dict(reversed(out.items()))

    def dp_rank(self, rank: int) -> int:
        c = self.coords(rank)
        return c["dp_replicate"] * self.dp_shard + c["dp_shard"]

    def counts_samples(self, rank: int) -> bool:
        """One rank per data-parallel replica counts its samples and tokens (cp = tp = 0)."""
        c = self.coords(rank)
        return c["cp"] == 0 and c["tp"] == 0

    def label(self) -> str:
        """What wraps the model: 'TP 2', 'HSDP 2x1', 'FSDP2 4 + TP 2', 'FSDP2 2 + CP 2'."""
        parts = []
        if self.dp_replicate > 1:
            parts.append(f"HSDP {self.dp_replicate}x{self.fsdp_shards}")
        elif self.fsdp_shards > 1:
            parts.append(f"FSDP2 {self.fsdp_shards}")
        parts += [f"{n.upper()} {s}" for n, s in (("cp", self.cp), ("tp", self.tp)) if s > 1]
        return " + ".join(parts) or "none"


def asked(fields: Mapping[str, Any]) -> bool:
    """Does a scenario's fields ask for more than FSDP's own one-dimensional sharding?"""
    return any(fields.get(k, 1) != 1 for k in ("tp", "cp", "dp_replicate"))


def resolve(fields: Mapping[str, Any], world: int) -> Mesh:
    """The mesh of `world` processes; dp_shard = "auto" takes what tp x cp x dp_replicate leave.
    ValueError with one clear sentence when the sizes do not multiply to the world size."""
    tp, cp, rep = (int(fields.get(k, 1)) for k in ("tp", "cp", "dp_replicate"))
    rest = tp * cp * rep
    shard = fields.get("dp_shard", AUTO)
    if shard == AUTO:
        if world % rest:
            raise ValueError(
                f"dp_replicate x cp x tp = {rep} x {cp} x {tp} = {rest} does not divide the world size "
                f"(gpus x nnodes = {world})"
            )
        shard = world // rest
    mesh = Mesh(rep, int(shard), cp, tp)
    if mesh.size != world:
        raise ValueError(
            f"dp_replicate x dp_shard x cp x tp = {rep} x {shard} x {cp} x {tp} = {mesh.size}, but the world "
            f"size (gpus x nnodes) is {world}; the product must equal it"
        )
    return mesh


TP_DIVIDES = ("num_attention_heads", "num_key_value_heads", "intermediate_size")


def tp_refusal(cfg: Mapping[str, Any], tp: int) -> str | None:
    """Why a model's config cannot be split `tp` ways (each rank takes whole attention heads, whole
    key/value heads and an equal part of the MLP), or None."""
    if tp == 1:
        return None
    sizes = {k: cfg.get(k) for k in TP_DIVIDES}
    missing = [k for k, v in sizes.items() if not isinstance(v, int)]
    if missing:
        return f"needs a decoder whose config gives {', '.join(missing)} (a Llama-shaped model)"
    bad = [f"{k} = {v}" for k, v in sizes.items() if isinstance(v, int) and v % tp]
    if bad:
        return f"must divide the model's {' and '.join(bad)} (each rank takes whole heads and an equal MLP part)"
    return None
