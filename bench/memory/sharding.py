"""Per-GPU memory under data parallelism: the single-GPU terms, divided or added to by strategy.

Model states per GPU, for Ψ parameters over N processes (the ZeRO paper, Rajbhandari et al. 2020,
section 3: mixed-precision Adam keeps 2Ψ half weights, 2Ψ half gradients and 12Ψ fp32 master
weights and moments):

  ddp            every term whole, plus the reducer's buckets: one gradient-sized copy alive from
                 the first backward on, and one more while a bucket is all-reduced
                 (gradient_as_bucket_view=False, the engines' default)
  fsdp           weights, gradients and optimizer states / N (FSDP2 keeps fp32 shards; its
                 mixed-precision policy all-gathers half weights, so autocast caches no copies)
  fsdp + offload parameters, gradients and the optimizer step on the CPU: no model states on the GPU
  fsdp on a mesh weights, gradients and optimizer states / (dp_shard x cp x tp): one copy of the
                 model per data-parallel replica (dp_replicate), split over the rest (bench/recipe/mesh.py;
                 tensor parallelism splits the decoder layers' matmuls, and the embeddings, norms and
                 head, a few percent of a Llama's parameters, are counted as split too)
  deepspeed      half precision: ZeRO-1 2Ψ + 2Ψ + 12Ψ/N, ZeRO-2 2Ψ + (2Ψ + 12Ψ)/N, ZeRO-3
                 (2Ψ + 2Ψ + 4Ψ + 12Ψ)/N (its fp32 gradient partition) plus its prefetch bucket;
                 every stage also keeps its gradient reduction bucket (5e8 elements);
                 DeepSpeed casts the model to the half type, so autocast caches no copies.
                 With offload the GPU holds DeepSpeed's own buffers, which are not predicted.

Activations are those of one GPU's micro-batch (on a mesh, a layer's over tp x cp: tensor
parallelism splits the heads and the MLP, context parallelism the sequence; the head's over
cp); under FSDP2 and DeepSpeed in half precision the parameters themselves are half, so the
residual stream is too (bench/families/bert/acts.py layer_activations).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..recipe import mesh
from ..recipe.scenario import Scenario

ZERO3_PREFETCH_BYTES = 50_000_000 * 2  # stage3_prefetch_bucket_size (5e7 elements) in half precision
# DeepSpeed's gradient reduction bucket (contiguous_gradients, on by default): reduce_bucket_size
# (5e8 elements) in the model's dtype, allocated at the first backward by stages 1 and 2
# (stage_1_and_2.py setup_buckets) and at start by stage 3, and kept (DeepSpeed 0.19.8). Measured
# on 2 H200s: ZeRO-1/2 rows held about 1,000 MB that the model states and activations do not explain.
ZERO_REDUCE_BUCKET_ELEMENTS = 500_000_000


@dataclass(frozen=True)
class States:
    """Bytes per GPU of the terms a strategy changes."""

    weights: int
    grads: int
    optimizer: int
    resident_extra: int = 0  # alive through forward and backward (DDP buckets, ZeRO-3 buffers)
    backward_extra: int = 0  # alive only while gradients are reduced
    autocast_cached: bool = True  # False where the weights are already half (FSDP, DeepSpeed)
    predicted: bool = True  # False: the GPU holds buffers this model does not know


def world(sc: Scenario, assumed_gpus: int = 2) -> int:
    """Processes in the job; gpus = "all" (not resolved before a run) counts as `assumed_gpus`."""
    gpus = sc.gpus if isinstance(sc.gpus, int) else assumed_gpus
    return gpus * sc.nnodes


def model_shards(sc: Scenario, n: int) -> int:
    """The processes one copy of the model states is split over under FSDP: all `n`, or on a mesh
    n / dp_replicate (dp_shard x cp x tp; HSDP keeps one copy per replica)."""
    return max(1, n // sc.dp_replicate) if mesh.asked(vars(sc)) else n


def activation_split(sc: Scenario) -> tuple[int, int]:
    """(a decoder layer's activations, the head's) are divided by these on a mesh: tp x cp, cp."""
    return sc.tp * sc.cp, sc.cp


def shard(sc: Scenario, weights: int, grads: int, optimizer: int, n: int) -> States:
    """The per-GPU terms of `sc` over `n` processes, from the single-GPU ones."""
    half = sc.precision in ("fp16", "bf16")
    n = model_shards(sc, n) if sc.strategy == "fsdp" else n
    if sc.strategy == "ddp":
        return States(weights, grads, optimizer, resident_extra=grads, backward_extra=grads)
    if sc.strategy == "fsdp":
        if sc.offload == "params":
            return States(0, 0, 0, autocast_cached=False)
        return States(weights // n, grads // n, optimizer // n, autocast_cached=not half)
    if sc.strategy == "deepspeed":
        if sc.offload != "none":
            return States(0, 0, 0, autocast_cached=False, predicted=False)
        psi4 = weights  # fp32 weights: 4 bytes per parameter
        bucket = ZERO_REDUCE_BUCKET_ELEMENTS * (2 if half else 4)
        if not half:  # fp32: no master copy; weights 4Ψ, gradients 4Ψ, Adam 8Ψ
            w, g = (psi4 // n if sc.zero_stage == 3 else psi4), (grads // n if sc.zero_stage >= 2 else grads)
            return States(w, g, optimizer // n, resident_extra=bucket)
        half_w = psi4 // 2
        master_and_moments = (psi4 + optimizer) // n
        if sc.zero_stage == 1:
            return States(half_w, half_w, master_and_moments, resident_extra=bucket, autocast_cached=False)
        if sc.zero_stage == 2:
            return States(half_w, half_w // n, master_and_moments, resident_extra=bucket, autocast_cached=False)
        fp32_grads = psi4 // n
        return States(
            half_w // n,
            half_w // n + fp32_grads,
            master_and_moments,
            resident_extra=ZERO3_PREFETCH_BYTES + bucket,
            autocast_cached=False,
        )
    return States(weights, grads, optimizer)
