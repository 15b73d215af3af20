"""Bytes per memory term from a list of parameter tensors on a CUDA GPU: pure arithmetic, no torch,
no model family (a family's activations are its own: bench/families/*/acts.py).

Sources (docs/memory.md says more): the HF guide "Model training anatomy" (4 B/param fp32 weights,
4 B grads, 8 B AdamW, ~2 B 8-bit AdamW), the ZeRO paper (16 B/param for mixed-precision Adam),
bitsandbytes' optimizer code (block-wise 8-bit states, blocksize 256, 32-bit states under 4096
elements), transformers' Adafactor (factored second moment, no first moment when beta1 is None),
torch's foreach AdamW (one temporary the size of a parameter group).
"""

from __future__ import annotations

import math

from ..recipe.engine_registry import ENGINES, MemoryTraits
from .tensors import ParamTensor

MB = 1024 * 1024  # the project's MB: 2**20 bytes, like torch.cuda.memory_allocated() / 2**20
BLOCK = 512  # the CUDA caching allocator rounds every allocation up to a multiple of 512 bytes
# cuBLAS workspace per (handle, stream): 32 MiB on Hopper (cuBLAS docs, cublasSetWorkspace; PyTorch
# #120925), allocated through the caching allocator, so it is in memory_allocated(). The forward
# runs on the main thread and the backward on autograd's thread: two handles, two workspaces.
WORKSPACE_PER_THREAD = 32 * MB
WORKSPACE_THREADS = 2
BNB_BLOCKSIZE = 256  # bitsandbytes Optimizer2State.init_state: block-wise 8-bit, one fp32 absmax per block
BNB_MIN_8BIT_SIZE = 4096  # bitsandbytes: tensors with fewer elements keep 32-bit states
# bitsandbytes Optimizer8bit.get_state_buffer: a paged optimizer puts state1/state2 of tensors with
# 1e5 elements or more in CUDA unified memory (F.get_paged -> cget_managed_ptr = cudaMallocManaged),
# outside torch's caching allocator; absmax (torch.zeros) and smaller tensors' states stay inside.
BNB_PAGED_MIN_SIZE = 100_000
HALF = ("fp16", "bf16")
# the optimizers tensor_optimizer_state knows; as_built() gives gpubench's others as one of these
STATE_RULES = ("adamw", "adamw_fused", "adafactor", "adamw_8bit", "sgd")


def alloc(nbytes: int) -> int:
    """What the caching allocator counts for one tensor of `nbytes` bytes."""
    return -(-nbytes // BLOCK) * BLOCK


def weights(tensors: list[ParamTensor], buffers: int) -> int:
    """fp32 master weights (the Trainer keeps them fp32 under fp16/bf16 autocast) plus buffers."""
    return sum(alloc(t.numel * 4) for t in tensors) + buffers


def grads(tensors: list[ParamTensor]) -> int:
    """One fp32 gradient per parameter (gradients take the parameters' dtype)."""
    return sum(alloc(t.numel * 4) for t in tensors)


def autocast_copies(tensors: list[ParamTensor], include_biases: bool = False) -> int:
    """Half-precision copies of nn.Linear weights that autocast makes for the matmuls.

    Autograd saves the weight copy (the matmul's backward needs it), so the copies live until each
    layer's backward; autocast's cache also holds the bias copies until the autocast region ends.
    """
    out = sum(alloc(t.numel * 2) for t in tensors if t.is_linear_weight)
    if include_biases:
        linear = {t.name.rsplit(".", 1)[0] for t in tensors if t.is_linear_weight}
        out += sum(
            alloc(t.numel * 2) for t in tensors if t.name.endswith(".bias") and t.name.rsplit(".", 1)[0] in linear
        )
    return out


def traits(engine: str | None) -> MemoryTraits:
    """How `engine` builds its optimizers (bench/recipe/engine_registry.py); None: built by gpubench,
    no engine's traits."""
    return ENGINES[engine].memory if engine is not None else MemoryTraits()


def optimizer_states(tensors: list[ParamTensor], optimizer: str, engine: str | None) -> int:
    """Persistent optimizer state created at the first step."""
    return shared_optimizer_state(optimizer) + sum(tensor_optimizer_state(t, optimizer, engine) for t in tensors)


def shared_optimizer_state(optimizer: str) -> int:
    """Optimizer state that belongs to no one tensor: bitsandbytes' two dynamic quantization maps."""
    if optimizer not in STATE_RULES:
        raise ValueError(f"unknown optimizer {optimizer!r}")
    return 2 * alloc(256 * 4) if optimizer == "adamw_8bit" else 0  # signed and unsigned, shared


def tensor_optimizer_state(t: ParamTensor, optimizer: str, engine: str | None) -> int:
    """One trained tensor's persistent optimizer state (`optimizer` as as_built() gives it)."""
    if optimizer in ("adamw", "adamw_fused"):  # exp_avg + exp_avg_sq; fused keeps `step` on the GPU
        step = alloc(4) if optimizer == "adamw_fused" else 0
        return 2 * alloc(t.numel * 4) + step
    if optimizer == "adafactor":  # beta1=None: no first moment; RMS kept as a 0-dim tensor
        if len(t.shape) >= 2:  # factored: row and column means of the squared gradient
            rows, cols = math.prod(t.shape[:-1]), math.prod(t.shape[:-2]) * t.shape[-1]
            return alloc(rows * 4) + alloc(cols * 4) + alloc(4)
        return alloc(t.numel * 4) + alloc(4)
    if optimizer == "adamw_8bit":
        # The Trainer registers every nn.Embedding for 32-bit states (GlobalOptimManager override).
        if t.numel < BNB_MIN_8BIT_SIZE or (traits(engine).embedding_32bit_states and t.is_embedding):
            return 2 * alloc(t.numel * 4)
        blocks = -(-t.numel // BNB_BLOCKSIZE)
        return 2 * alloc(t.numel) + 2 * alloc(blocks * 4)
    if optimizer == "sgd":  # momentum 0: no state
        return 0
    raise ValueError(f"unknown optimizer {optimizer!r}")


def as_built(
    tensors: list[ParamTensor], optimizer: str, engine: str | None
) -> tuple[list[ParamTensor], str, str | None]:
    """gpubench's own optimizers as the equivalent Trainer choice: foreach AdamW is torch's AdamW
    in one group, the guide's manual Adam8bit is bitsandbytes' 8-bit Adam with no embedding
    override (the Trainer's override comes from its own create_optimizer only); built by gpubench,
    they take no engine's traits (engine None)."""
    if optimizer == "adamw_foreach":
        return tensors, "adamw", None
    if optimizer == "adam8bit_manual":
        return tensors, "adamw_8bit", None
    if optimizer == "paged_adamw_8bit":
        return tensors, "adamw_8bit", engine
    return tensors, optimizer, engine


def optimizer_split(tensors: list[ParamTensor], optimizer: str, engine: str | None) -> tuple[int, int]:
    """(bytes in torch's allocator, bytes in CUDA unified memory) of the optimizer states."""
    total = optimizer_states(*as_built(tensors, optimizer, engine))
    paged = sum(tensor_paged_state(t, optimizer, engine) for t in tensors)
    return total - paged, paged


def tensor_paged_state(t: ParamTensor, optimizer: str, engine: str | None) -> int:
    """Of one tensor's optimizer state, the bytes a paged optimizer keeps in CUDA unified memory."""
    if optimizer != "paged_adamw_8bit" or t.numel < BNB_PAGED_MIN_SIZE:
        return 0
    # (both 8-bit and the Trainer's 32-bit embedding states)
    per_state = t.numel * 4 if traits(engine).embedding_32bit_states and t.is_embedding else t.numel
    return 2 * alloc(per_state)


def optimizer_notes(optimizer: str, engine: str, paged: int) -> list[str]:
    out = []
    if optimizer in ("adamw_8bit", "paged_adamw_8bit") and traits(engine).embedding_32bit_states:
        out.append(f"{ENGINES[engine].label} keeps 32-bit states for nn.Embedding weights")
    if paged:
        out.append(
            f"paged 8-bit states: {paged / MB:,.0f} MB in CUDA unified memory (cudaMallocManaged), outside "
            "torch's allocator: not in the predicted peak nor in max_memory_allocated, but in NVML's figure "
            "while resident on the GPU"
        )
    return out


def optimizer_temporaries(tensors: list[ParamTensor], optimizer: str, engine: str | None) -> int:
    """Extra memory inside optimizer.step(), freed when it returns."""
    if optimizer == "adamw":
        # torch's foreach AdamW: _foreach_sqrt(exp_avg_sqs) is one new tensor per parameter of the
        # group being updated; the Trainer makes two groups (with and without weight decay).
        groups = [[t for t in tensors if not t.no_decay], [t for t in tensors if t.no_decay]]
        if not traits(engine).decay_groups:
            groups = [tensors]
        return max(sum(alloc(t.numel * 4) for t in g) for g in groups)
    if optimizer == "adafactor":
        # per parameter: update = grad**2 + eps, then the factored update and its negation
        return 2 * max(alloc(t.numel * 4) for t in tensors)
    return 0  # fused AdamW, bitsandbytes and plain SGD update in place


def workspace() -> int:
    return WORKSPACE_THREADS * WORKSPACE_PER_THREAD


def every_k_layers(layers: int, k: int, one_layer: int, one_input: int) -> tuple[int, int, int, int]:
    """Checkpointing every k-th of `layers` layers (0, k, 2k, ...; bench/worker/checkpointing.py), for
    any family: (the body's saved activations, the layers checkpointed, the highest checkpointed layer,
    the recompute beyond the saved body). A checkpointed layer keeps only its input (`one_input`), the
    others what a layer saves (`one_layer`). The backward frees each layer as it passes it, so the
    recompute of the highest checkpointed layer adds to the layers below it only."""
    checkpointed = -(-layers // k)
    body = (layers - checkpointed) * one_layer + checkpointed * one_input
    top = (layers - 1) // k * k
    below = (top - top // k) * one_layer + (top // k + 1) * one_input
    return body, checkpointed, top, max(0, below + one_layer - body)
