"""A decoder's model states as the worker builds it: which tensors train, in which dtype, and
what the frozen or quantized base weighs. Pure arithmetic, no torch.

Full fine-tuning: fp32 parameters (master weights) under fp16/bf16 autocast, every one trained.
LoRA (peft, "all-linear" = every nn.Linear of the decoder layers, never lm_head): the frozen
base in the half dtype under fp16/bf16 (fp32 otherwise); adapters A (r x in) and B (out x r) in
fp32 with their gradients and optimizer states.
QLoRA (quantize_base, through BitsAndBytesConfig and peft's prepare_model_for_kbit_training): the
decoder layers' Linears quantized; every other parameter (embeddings, norms, an untied lm_head)
cast to fp32 (peft 0.21 utils/other.py: every fp16/bf16 parameter that is not Params4bit).
The dtypes are the named constants below: change one line if the worker builds it otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...memory.tensors import ParamTensor
from ...memory.terms import alloc
from ...recipe.scenario import Scenario
from .dims import LAYER_LINEARS, DecoderDims, is_layer_linear, module_name, param_tensors

MASTER_BYTES = 4  # full fine-tuning: fp32 parameters (the Trainer's bf16=True is autocast)
ADAPTER_BYTES = 4  # peft keeps LoRA A/B in fp32 (autocast_adapter_dtype=True)
HALF_BASE_BYTES = 2  # LoRA with precision fp16/bf16: the frozen base in that dtype
KBIT_OTHER_BYTES = 4  # prepare_model_for_kbit_training casts non-quantized parameters to fp32
NF4_BLOCK = 64  # bitsandbytes Params4bit: blocksize 64 (nn/modules.py)
NF4_DOUBLE_QUANT = True  # QLoRA's recipe: bnb_4bit_use_double_quant=True (transformers' default is False)
NF4_NESTED_BLOCK = 256  # functional.quantize_4bit: quantize_blockwise(absmax - offset, blocksize=256)
NF4_CODE_ENTRIES = 16  # the NF4 code book (fp32), one per quantized tensor
DYNAMIC_CODE_ENTRIES = 256  # the nested state's dynamic map (fp32)


@dataclass(frozen=True)
class DecoderStates:
    """Bytes of the model states, and the tensors that train (for gradients and optimizer states)."""

    weights: int  # every parameter as stored (base, quantized base, adapters) + buffers
    trainable: tuple[ParamTensor, ...]  # fp32 tensors with gradients and optimizer states
    quantized: int  # of `weights`: the bitsandbytes base weights and their statistics
    head_bytes: int  # bytes per element of the lm_head weight as stored (tied: the embedding's)


def lora_targets(sc: Scenario) -> tuple[str, ...]:
    """The Linear names LoRA wraps in each decoder layer."""
    if sc.lora_targets == "all-linear":
        return LAYER_LINEARS
    names = {n.rsplit(".", 1)[-1] for n in sc.lora_targets.split(",")}
    return tuple(m for m in LAYER_LINEARS if m in names)


def adapter_tensors(d: DecoderDims, sc: Scenario) -> list[ParamTensor]:
    """LoRA's A (r x in) and B (out x r) for every targeted Linear of every layer."""
    r, out = sc.lora_rank, []
    targets = lora_targets(sc)
    for t in param_tensors(d):
        if is_layer_linear(t) and module_name(t) in targets:
            rows, cols = t.shape
            base = t.name.removesuffix(".weight")
            out += [
                ParamTensor(f"{base}.lora_A.default.weight", (r, cols), t.layer),
                ParamTensor(f"{base}.lora_B.default.weight", (rows, r), t.layer),
            ]
    return out


def quantized_bytes(shape: tuple[int, ...], scheme: str) -> int:
    """One Linear weight through bitsandbytes: nf4 (Params4bit, QuantState) or int8 (LLM.int8())."""
    rows, cols = shape
    n = rows * cols
    if scheme == "int8":  # Int8Params: int8 weight (CB) + one fp32 scale per row (SCB)
        return alloc(n) + alloc(rows * 4)
    if scheme != "nf4":
        raise ValueError(f"unknown quantization {scheme!r}")
    blocks = -(-n // NF4_BLOCK)
    packed = alloc(-(-n // 2)) + alloc(NF4_CODE_ENTRIES * 4)  # two 4-bit values per byte
    if not NF4_DOUBLE_QUANT:
        return packed + alloc(blocks * 4)  # one fp32 absmax per block
    nested = -(-blocks // NF4_NESTED_BLOCK)
    # uint8 absmax per block, fp32 absmax per 256 blocks, the dynamic map, the fp32 offset
    return packed + alloc(blocks) + alloc(nested * 4) + alloc(DYNAMIC_CODE_ENTRIES * 4) + alloc(4)


def weight_bytes(shape: tuple[int, ...], stored: str) -> int:
    """A Linear weight's bytes when stored as fp32, bf16, int8 or nf4 (the tests compare them)."""
    if stored in ("int8", "nf4"):
        return quantized_bytes(shape, stored)
    size = {"fp32": 4, "bf16": 2, "fp16": 2}[stored]
    return alloc(shape[0] * shape[1] * size)


def decoder_states(d: DecoderDims, sc: Scenario, buffers: int) -> DecoderStates:
    base = param_tensors(d)
    if sc.peft == "none":
        return DecoderStates(
            weights=sum(alloc(t.numel * MASTER_BYTES) for t in base) + buffers,
            trainable=tuple(base),
            quantized=0,
            head_bytes=MASTER_BYTES,
        )
    adapters = adapter_tensors(d, sc)
    adapter_bytes = sum(alloc(t.numel * ADAPTER_BYTES) for t in adapters)
    if sc.quantize_base != "none":
        quantized = sum(quantized_bytes(t.shape, sc.quantize_base) for t in base if is_layer_linear(t))
        other = sum(alloc(t.numel * KBIT_OTHER_BYTES) for t in base if not is_layer_linear(t))
        return DecoderStates(quantized + other + adapter_bytes + buffers, tuple(adapters), quantized, KBIT_OTHER_BYTES)
    size = HALF_BASE_BYTES if sc.precision in ("fp16", "bf16") else 4
    frozen = sum(alloc(t.numel * size) for t in base)
    return DecoderStates(frozen + adapter_bytes + buffers, tuple(adapters), 0, size)


def head_tensor(d: DecoderDims) -> ParamTensor:
    """The lm_head's weight (the embedding when tied: one tensor, two matmuls)."""
    return next(t for t in reversed(param_tensors(d)) if t.name in ("lm_head.weight", "model.embed_tokens.weight"))
