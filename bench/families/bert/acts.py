"""What a BERT classifier saves for backward, tensor by tensor: pure arithmetic, no torch.

Korthikanti et al. 2022 for activations (34·s·b·h + 5·a·s²·b bytes per layer in 16-bit), re-derived
per saved tensor here so that fp32 (4 B) and autocast (half-precision matmul inputs, fp32 LayerNorm)
both come out right (docs/memory.md).
"""

from __future__ import annotations

from ...memory.tensors import ParamTensor
from ...memory.terms import alloc
from .dims import BertDims


def _attention_probs(d: BertDims, b: int, s: int, half: bool) -> int:
    """Eager attention's saved a·s²·b tensors: softmax output (fp32, also under autocast), the
    dropout mask (1 B) and the dropout output fed to the second matmul (fp32, or its half copy)."""
    return d.heads * s * s * b * (4 + 1 + (2 if half else 4))


def layer_activations(d: BertDims, b: int, s: int, half: bool, eager: bool, half_params: bool = False) -> int:
    """Tensors one encoder layer saves for backward (Korthikanti et al. 2022, Table 2, per tensor).

    e = bytes of a matmul input/output (4 in fp32, 2 under autocast); LayerNorm inputs stay fp32
    under autocast (the residual add promotes to fp32), and each of the Q, K, V Linear calls makes
    its own half copy of the fp32 layer input. Dropout masks are 1 B per element.

    `half_params`: the layer's parameters are themselves half (FSDP2's param_dtype, DeepSpeed's
    cast of the model): the layer input is already half and shared by Q, K, V, and the residual
    stream and LayerNorm inputs are half too. Measured on 2 H200s (bert-large, batch 32): FSDP2's
    and ZeRO's activations are 13,161 MB where autocast over fp32 parameters saves 16,232 MB, which
    is this count to the megabyte (results/README.md#multi-gpu).
    """
    e = 2 if half else 4
    ln = 2 if half and half_params else 4  # a LayerNorm input
    qkv_inputs = (e if half_params else 3 * e) if half else 4  # one tensor shared by Q, K, V; or three half copies
    per_sbh = (
        qkv_inputs
        + 3 * e  # Q, K, V (saved by the attention)
        + e  # attention output, input to the output projection
        + 1
        + ln  # dropout mask, LayerNorm 1 input
        + e  # LayerNorm 1 output (or its half copy), input to the FFN's first Linear
        + 1
        + ln
    )  # dropout mask, LayerNorm 2 input
    sbh, sbi = s * b * d.hidden, s * b * d.intermediate
    out = per_sbh * sbh + 2 * e * sbi  # GELU input and output
    if eager:
        out += _attention_probs(d, b, s, half)
    else:  # SDPA (flash / memory-efficient): the log-sum-exp per query instead of the a·s² probs
        out += d.heads * s * b * 4
    return out


def embedding_activations(d: BertDims, b: int, s: int) -> int:
    """Embeddings: the LayerNorm's fp32 input and the dropout mask (the output is layer 0's input)."""
    return 5 * s * b * d.hidden


def head_activations(d: BertDims, b: int, s: int, half: bool) -> int:
    """Pooler + classifier. In fp32 the pooler's Linear saves a view of the first token, which
    keeps the whole last hidden state (s·b·h fp32) alive; under autocast it saves a b·h half copy."""
    bh = b * d.hidden
    if half:
        return bh * (2 + 2 + 1 + 2)  # pooler input copy, tanh output, dropout mask, classifier input
    return s * bh * 4 + bh * (4 + 1 + 4)


def checkpoint_activations(d: BertDims, b: int, s: int, half: bool) -> int:
    """Gradient checkpointing (non-reentrant, per layer): each layer keeps only its fp32 input."""
    return d.layers * s * b * d.hidden * 4 + embedding_activations(d, b, s) + head_activations(d, b, s, half)


def backward_transient(tensors: list[ParamTensor], d: BertDims, b: int, s: int) -> int:
    """Early in the backward: the head's and the last layer's fp32 weight gradients appear while
    every activation is still alive, with two fp32 b·s·h gradient buffers in flight."""
    last = d.layers - 1
    weight_grads = sum(
        alloc(t.numel * 4)
        for t in tensors
        if t.layer == last or t.layer is None and not t.name.startswith("bert.embeddings")
    )
    return weight_grads + 2 * s * b * d.hidden * 4
