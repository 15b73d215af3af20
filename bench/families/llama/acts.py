"""What a Llama decoder saves for backward, tensor by tensor (Korthikanti et al. 2022 style), and
the head's logits. Pure arithmetic, no torch; bytes per token unless a name says otherwise.

How the dtypes flow (the `Flow` of one scenario):
  stream  the residual stream: fp32 with fp32 parameters (full fine-tuning, QLoRA's prepared
          model), the half dtype with LoRA's half base (embeddings give half, adds stay half)
  mm      matmul inputs/outputs: 2 B under fp16/bf16 autocast, 4 B in fp32
RMSNorm (transformers' LlamaRMSNorm) upcasts its input to fp32 (the same tensor when already
fp32) and saves it for pow/mul, plus the rstd per token; the normalized tensor is saved by
`weight * x` only when the weight trains. A Linear saves its input only when its weight needs a
gradient (autograd saves mat1 for mat2's gradient only) - or bitsandbytes' int8 matmul, which
saves its input itself; nf4 saves none. Under autocast each Linear call with an fp32 input makes
its own half copy (full fine-tuning: three for q/k/v, two for gate/up). SDPA (flash, cuDNN or
memory-efficient; transformers passes enable_gqa, so k/v stay kv_heads wide) saves q, k, v, its
output (which o_proj's input shares: the kernel's output is laid out (b, s, heads, d)) and an
fp32 log-sum-exp per head. SwiGLU saves gate (for SiLU), SiLU's output and up (for the product);
down_proj the product when it trains. peft's LoRA casts each targeted Linear's input to the
adapter's fp32 and autocast casts it back: one saved half copy per target, plus A's r-wide output.
Liger: RMSNorm saves only its input and rstd; SiLUMul saves gate and up and recomputes SiLU;
RoPE rotates in place; fused linear cross-entropy never builds b x s x vocab logits.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...recipe.scenario import Scenario
from .dims import DecoderDims
from .weights import lora_targets

LIGER_CHUNK_MEM_CONST = 1  # liger_kernel ops/fused_linear_cross_entropy.py _CHUNK_MEM_CONST


@dataclass(frozen=True)
class Flow:
    stream: int  # bytes of the residual stream
    mm: int  # bytes of matmul inputs/outputs
    full: bool  # every parameter trains (full fine-tuning)
    copies_per_call: bool  # autocast (or torchao's Float8Linear) copies each Linear's fp32 input
    base_saves_input: bool  # the base Linears save their input (trainable, or bitsandbytes int8)
    ffn: int  # bytes of the gate/up outputs (bitsandbytes returns the input's fp32)
    lora_copy: int  # bytes of the half copy peft+autocast make of each LoRA target's input
    targets: tuple[str, ...]
    rank: int
    liger: bool
    eager: bool


def flow(sc: Scenario) -> Flow:
    half = sc.precision in ("fp16", "bf16")
    mm = 2 if half else 4
    full = sc.peft == "none"
    kbit = sc.quantize_base != "none"
    stream = 2 if (not full and half and not kbit) else 4
    return Flow(
        stream=stream,
        mm=mm,
        full=full,
        copies_per_call=full and half,
        base_saves_input=full or sc.quantize_base == "int8",
        ffn=4 if kbit else mm,
        lora_copy=mm if (half and not full) else 0,
        targets=() if full else lora_targets(sc),
        rank=sc.lora_rank,
        liger=sc.liger,
        eager=sc.attn_implementation == "eager",
    )


def norm_saved(f: Flow) -> int:
    """One RMSNorm, per token per hidden unit (+ 4 B of rstd per token, in `layer`)."""
    if f.liger:
        return f.stream  # LigerRMSNormFunction saves X (and W, RSTD)
    return 4 + (4 if f.full else 0)  # the fp32 input (upcast), and the normalized x if w trains


def _group_inputs(f: Flow, calls: int) -> int:
    """The saved inputs of `calls` base Linears reading one normalized tensor (per hidden unit)."""
    if not f.base_saves_input:
        return 0
    if f.copies_per_call:
        return calls * 2
    return f.stream  # one shared tensor (fp32 full fine-tuning, int8's saved input)


def layer(d: DecoderDims, f: Flow, seq: int) -> int:
    """Bytes one decoder layer saves per token (the attention's s^2 term per token: x seq)."""
    h, i = d.hidden, d.intermediate
    out = 2 * norm_saved(f) * h + 2 * 4  # two RMSNorms and their rstd
    out += (_group_inputs(f, 3) + _group_inputs(f, 2)) * h
    kv = d.heads * d.head_dim if f.eager else d.kv_width  # eager: repeat_kv copies of k and v
    out += f.mm * (2 * d.q_width + 2 * kv)  # q, k, v and the attention output
    if f.eager:  # softmax's fp32 output and its half copy for the second matmul (no dropout)
        out += d.heads * seq * (4 + (f.mm if f.mm == 2 else 0))
    else:
        out += 4 * d.heads  # log-sum-exp
    out += (2 if f.liger else 3) * f.ffn * i
    if f.base_saves_input:
        out += f.ffn * i  # down_proj's input (the product; already half under autocast)
    for name in f.targets:
        rows, cols = d.linear_shape(name)
        out += f.lora_copy * cols + f.mm * f.rank
    return out


def layers(d: DecoderDims, f: Flow, tokens: int, seq: int) -> int:
    return d.layers * layer(d, f, seq) * tokens


def checkpointed(d: DecoderDims, f: Flow, tokens: int) -> int:
    """Non-reentrant checkpointing of each decoder layer: only its input stays."""
    return d.layers * f.stream * d.hidden * tokens


@dataclass(frozen=True)
class Head:
    """The final norm, lm_head and loss, for one micro-batch (bytes)."""

    saved: int  # the final norm and lm_head's saved inputs (not the logits)
    logits_saved: int  # log-softmax output (or Liger's gradient buffers), alive into the backward
    forward_extra: int  # on top of logits_saved at the forward's peak, inside the loss
    backward_extra: int  # on top of logits_saved at the start of the backward


def liger_chunk(d: DecoderDims, tokens: int) -> int:
    """Liger's token chunk: next_pow2(ceil(BT / ceil(V / (C x H)))), at most BT."""
    inc = -(-d.vocab // (LIGER_CHUNK_MEM_CONST * d.hidden))
    want = -(-tokens // inc)
    return min(1 << (want - 1).bit_length(), tokens)


def head(d: DecoderDims, f: Flow, tokens: int, head_trains: bool, head_bytes: int) -> Head:
    h, v = d.hidden, d.vocab
    saved = (norm_saved(f) * h + 4) * tokens
    if head_trains:  # lm_head's input: a half copy under autocast, else the fp32 norm output
        saved += (2 if f.copies_per_call else f.stream) * h * tokens
    if f.liger:
        # the forward computes the gradients: grad_input (the norm output's dtype) and, when the
        # head trains, grad_weight (the weight's dtype) stay saved for the backward
        grads = f.stream * h * tokens + (head_bytes * v * h if head_trains else 0)
        chunk = liger_chunk(d, tokens)
        # a chunk's logits (matmul dtype) and the fp32 work on them; the weight's half copy
        weight_copy = 2 * v * h if f.mm == 2 and head_bytes == 4 else 0
        return Head(saved, grads + 4 * tokens, chunk * v * (f.mm + 4) + weight_copy, chunk * v * 4)
    # transformers' ForCausalLMLoss: logits.float() then cross_entropy = log_softmax + nll_loss;
    # accelerate's convert_outputs_to_fp32 makes one more fp32 copy of the half logits
    upcast = 4 if f.mm == 2 else 0
    return Head(
        saved=saved,
        logits_saved=4 * v * tokens,  # log_softmax's output, saved for its backward and nll's
        forward_extra=(f.mm + upcast) * v * tokens,  # the matmul's logits + the fp32 upcast
        backward_extra=8 * v * tokens,  # nll_loss's gradient + log_softmax's gradient (fp32)
    )
