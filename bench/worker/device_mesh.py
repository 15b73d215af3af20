"""A scenario's device mesh (bench/recipe/mesh.py) applied through torch's own APIs, in torchtitan's order:
`init_device_mesh` over (dp_replicate, dp_shard, cp, tp); tensor parallelism with
`parallelize_module` and the plan transformers publishes for the model (its config's
`base_model_tp_plan`: q/k/v, gate and up projections column-wise, o and down projections
row-wise); FSDP2's `fully_shard` per transformer block and at the root over the data-parallel
dimensions (a 2-D (dp_replicate, dp_shard x cp) mesh: HSDP when dp_replicate > 1); context
parallelism with `context_parallel`, around each forward and backward (CUDA SDPA only).

The Accelerate loop trains the result (engines/accelerate.py): accelerate would wrap a model of
DTensor parameters in DDP, so the model is not handed to `accelerator.prepare`; the optimizer is,
and the loader is sharded by data-parallel rank with accelerate's `prepare_data_loader` (the cp
and tp ranks of one replica train the same batches).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ..recipe.mesh import Mesh, resolve
from ..recipe.scenario import Scenario
from .compiling import repeated_blocks
from .dist import Rank

STYLES = ("colwise", "rowwise")  # the plan entries a Llama-shaped decoder's config names


def of(sc: Scenario, world: int) -> Mesh:
    return resolve(vars(sc), world)


def device_mesh(m: Mesh, device: torch.device) -> Any:
    """torch's DeviceMesh of `m`, with the flattened dimension FSDP2 shards over (dp_shard_cp)."""
    from torch.distributed.device_mesh import init_device_mesh

    full = init_device_mesh(device.type, m.shape, mesh_dim_names=("dp_replicate", "dp_shard", "cp", "tp"))
    full["dp_shard", "cp"]._flatten("dp_shard_cp")
    return full


def tp_plan(model: torch.nn.Module) -> dict[str, Any]:
    """The model's own tensor-parallel plan (transformers' base_model_tp_plan) as torch's styles."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    plan = getattr(model.config, "base_model_tp_plan", None) or {}
    other = sorted({style for style in plan.values() if style not in STYLES})
    if not plan or other:
        why = f"names {', '.join(other)}" if other else "has none"
        raise ValueError(
            f"{type(model).__name__}: tensor parallelism takes the config's base_model_tp_plan of "
            f"{' and '.join(STYLES)} entries; this model's {why}"
        )
    return {key: ColwiseParallel() if style == "colwise" else RowwiseParallel() for key, style in plan.items()}


def parallelize(model: torch.nn.Module, sc: Scenario, m: Mesh, mesh: Any) -> str:
    """Shard `model` in place over `mesh`; what wraps it now (Mesh.label)."""
    if m.tp > 1:
        from torch.distributed.tensor.parallel import parallelize_module

        base = getattr(model, str(model.base_model_prefix))  # the plan's keys start at the base model (layers.*)
        parallelize_module(base, mesh["tp"], tp_plan(model))
    if m.dp_replicate * m.fsdp_shards > 1:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        dp_mesh = mesh["dp_replicate", "dp_shard_cp"]
        half = {"bf16": torch.bfloat16}.get(sc.precision)
        kwargs: dict[str, Any] = {
            "mesh": dp_mesh,
            "reshard_after_forward": sc.fsdp_sharding == "full",
            "mp_policy": MixedPrecisionPolicy(param_dtype=half, reduce_dtype=torch.float32),
        }
        for block in repeated_blocks(model):
            fully_shard(block, **kwargs)
        fully_shard(model, **kwargs)
    return m.label()


def cp_context(m: Mesh, mesh: Any) -> Callable[[dict[str, torch.Tensor]], contextlib.AbstractContextManager[Any]]:
    """A context for one forward and backward: without cp, nothing; with it, torch's
    context_parallel over the batch's input_ids, labels and position_ids (sharded in place along
    the sequence, load-balanced); the attention mask is dropped, so SDPA runs causal."""
    if m.cp == 1:
        return lambda batch: contextlib.nullcontext()

    from torch.distributed.tensor.experimental import context_parallel

    @contextlib.contextmanager
    def sharded(batch: dict[str, torch.Tensor]) -> Iterator[None]:
        ids = batch["input_ids"]
        batch.pop("attention_mask", None)
        batch["position_ids"] = torch.arange(ids.shape[1], device=ids.device).expand_as(ids).contiguous()
        buffers = [batch[k] for k in ("input_ids", "labels", "position_ids") if k in batch]
        with context_parallel(mesh["cp"], buffers=buffers, buffer_seq_dims=[1] * len(buffers)):
            yield

    return sharded


def data_rank(m: Mesh, rank: Rank) -> tuple[int, int]:
    """(data-parallel rank, data-parallel size) for the loader's shard."""
    return m.dp_rank(rank.rank), m.dp
