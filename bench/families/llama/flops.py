"""A Llama-style decoder's analytic FLOPs per sample (forward + backward), in the convention of
bench/measure/mfu.py:

  causal   6 x P_matmul x seq + 6 x layers x seq^2 x (heads x head_dim): P_matmul = the decoder
           layers' Linears + the LM head (counted once even when tied to the input embedding: the
           head's matmul is real; the table lookup is not). A causal mask needs only the lower half
           of the score matrix, so attention counts half of the bidirectional 12 x ... - the
           convention of the FlashAttention-2 paper (Dao 2023, section 4: causal FLOPs are half)
           and Megatron-LM's MFU accounting for causal masks.
  LoRA     4 x P_base x seq + 6 x P_adapters x seq (+ attention as above): the frozen base computes
           its forward (2) and the input gradients the adapters below it need (2), never weight
           gradients; the adapters train fully (6). The LoRA paper (Hu et al. 2021, section 4.2:
           no gradients for most parameters) and the usual PEFT accounting.
  QLoRA    FLOPs as LoRA (the base is dequantized; its matmuls run in the compute dtype).
"""

from __future__ import annotations

from typing import Any

from ...recipe.scenario import Scenario
from .dims import DecoderDims, decoder_dims_from_config, is_layer_linear, param_tensors
from .weights import adapter_tensors


def decoder_matmul_params(d: DecoderDims) -> int:
    """The decoder layers' Linears + the LM head (V x h, once, tied or not)."""
    return sum(t.numel for t in param_tensors(d) if is_layer_linear(t)) + d.vocab * d.hidden


def adapter_params(d: DecoderDims, sc: Scenario) -> int:
    return sum(t.numel for t in adapter_tensors(d, sc))


def decoder_flops_per_sample(d: DecoderDims, sc: Scenario) -> float:
    s = sc.seq_len
    attention = 6.0 * d.layers * s * s * d.q_width  # causal: half of 12 x L x s^2 x (heads x head_dim)
    base = decoder_matmul_params(d)
    if sc.peft == "lora":
        return 4.0 * base * s + 6.0 * adapter_params(d, sc) * s + attention
    return 6.0 * base * s + attention


def flops_per_sample(sc: Scenario, cfg: dict[str, Any], origin: str, total_params: int | None) -> float | None:
    """The family's count (Family.flops), from the config alone; BadInput naming `origin` when its
    dimensions are unusable."""
    return decoder_flops_per_sample(decoder_dims_from_config(cfg, origin), sc)
