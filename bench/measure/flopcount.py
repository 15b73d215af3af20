"""FLOPs of any model transformers builds, from the built module (the worker calls this; torch).

The generic count, for families without an analytic one (bench/families): 2 FLOPs per multiply-add
of every matmul weight per token forward, 2 more for the input gradients, and 2 more for the weight
gradients where the weight trains (6 for a trained weight, 4 for a frozen one: LoRA's base), over
nn.Linear layers and a mixture-of-experts layer's expert tensors scaled to the experts a token is
routed to (num_experts_per_tok of them); a ViT's patch projection (a convolution) once per patch and
its classifier once per image; embedding tables are lookups, not matmuls. Attention's score and
value matmuls add 12 x layers x tokens^2 x (heads x head_dim) per sample, half that under a causal
mask (bench/measure/mfu.py says why).

The cross-check: torch.utils.flop_counter.FlopCounterMode over one dense training step (batch 1)
of the same model built on the meta device, with eager attention (its SDPA formula refuses
grouped-query shapes) and, for MoE, transformers' batched_mm experts (the grouped_mm kernel has no fp32 meta
implementation and the eager loop needs data-dependent shapes). It counts the masked half of causal
attention too, so it is compared with the generic count on its own convention (full attention).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import torch

from ..families import moe
from ..fsio import atomic_write_json


def _numel(p: torch.Tensor) -> int:
    quant_state = getattr(p, "quant_state", None)  # bitsandbytes' Params4bit: the unpacked shape
    shape = getattr(quant_state, "shape", None)
    return int(torch.Size(shape).numel()) if shape is not None else p.numel()


def expert_share(config: Any) -> float:
    """The share of a MoE layer's experts one token runs through (1 for a dense model)."""
    counts = moe.experts(config.to_dict() if hasattr(config, "to_dict") else dict(config))
    return counts[1] / counts[0] if counts else 1.0


Weights = dict[str, float]  # {"trained" | "frozen": weights} of one kind of layer


ADAPTER_MODULES = (".lora_A.", ".lora_B.")  # peft's LoRA layers: not in the plain model
# an image classifier's head: transformers' `classifier`, torchvision's ViT's `heads`
HEAD_MODULES = frozenset({"classifier", "heads"})


def matmul_weights(model: Any, share: float, adapters: bool = True) -> dict[str, Weights]:
    """Matmul weights a token runs through, by kind: "linear" (nn.Linear, expert tensors, i.e. 3-D
    parameters of a module named *experts, times `share`), "conv" (a vision model's patch
    projection: once per patch) and "head" (an image classifier's `classifier` or `heads`: once per
    image). nn.MultiheadAttention's packed input projection counts as linear weights."""
    kinds: dict[str, Weights] = {k: {"trained": 0.0, "frozen": 0.0} for k in ("linear", "conv", "head")}
    for fqn, module in model.named_modules():
        leaf = fqn.rsplit(".", 1)[-1]
        if not adapters and any(a in f"{fqn}." for a in ADAPTER_MODULES):
            continue
        if ".original_module" in f"{fqn}.":  # peft's frozen copy of a head it trains: not run
            continue
        head = bool(HEAD_MODULES & set(fqn.split(".")))
        if isinstance(module, torch.nn.Linear) or type(module).__name__ == "Conv1D":  # transformers' GPT-2 linear
            params, scale, kind = [module.weight], 1.0, "head" if head else "linear"
        elif isinstance(module, torch.nn.MultiheadAttention):  # torchvision's ViT: q, k, v in one parameter
            # (its out_proj is an nn.Linear, counted as one)
            packed = module.in_proj_weight is not None
            names = ("in_proj_weight",) if packed else ("q_proj_weight", "k_proj_weight", "v_proj_weight")
            params, scale, kind = [getattr(module, n) for n in names], 1.0, "linear"
        elif isinstance(module, torch.nn.Conv1d | torch.nn.Conv2d | torch.nn.Conv3d):
            params, scale, kind = [module.weight], 1.0, "conv"
        elif leaf == "experts" or type(module).__name__.endswith("Experts"):
            params, scale, kind = [p for p in module.parameters(recurse=False) if p.dim() == 3], share, "linear"
        else:
            continue
        for p in params:  # a tied LM head is a Linear over the embedding: its matmul is real, counted
            kinds[kind]["trained" if p.requires_grad else "frozen"] += _numel(p) * scale
    return kinds


def _matmul_flops(kinds: dict[str, Weights], tokens: int, vision: bool, dense: bool) -> float:
    """6 per trained weight, 4 per frozen one (6 for all when `dense`), times the tokens it sees.
    A vision model's patch projection is its first layer: the pixels need no gradient, so it costs
    2 less (4 trained, 2 frozen)."""
    seen = (
        {"linear": tokens, "conv": tokens - 1, "head": 1}
        if vision
        else dict.fromkeys(("linear", "conv", "head"), tokens)
    )
    total = 0.0
    for kind, weights in kinds.items():
        trained, frozen = (6.0, 6.0 if dense else 4.0) if kind != "conv" or not vision else (4.0, 4.0 if dense else 2.0)
        total += (trained * weights["trained"] + frozen * weights["frozen"]) * seen[kind]
    return total


def attention_dims(config: Any) -> tuple[int, int]:
    """(layers, heads x head_dim) of a transformers config (its attribute map covers GPT-2's names)."""
    cfg = getattr(config, "text_config", None) or config
    layers = int(cfg.num_hidden_layers)
    heads = int(cfg.num_attention_heads)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    return layers, heads * int(head_dim)


def generic_flops_per_sample(model: Any, tokens: int, causal: bool, vision: bool = False) -> float:
    """FLOPs of one training sample of `tokens` tokens (the generic count above)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    layers, width = attention_dims(base.config)
    attention = (6.0 if causal else 12.0) * layers * tokens * tokens * width
    return _matmul_flops(matmul_weights(model, expert_share(base.config)), tokens, vision, dense=False) + attention


def dense_flops_full_attention(model: Any, tokens: int, vision: bool = False) -> float:
    """The generic count of a dense training step (every weight of the plain model trained, LoRA's
    adapters left out), full attention: what the meta-device counter should see."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    layers, width = attention_dims(base.config)
    kinds = matmul_weights(base, expert_share(base.config), adapters=False)
    matmuls = _matmul_flops(kinds, tokens, vision, dense=True)
    return matmuls + 12.0 * layers * tokens * tokens * width


def counted_flops_per_sample(build_meta: Any, inputs: dict[str, torch.Tensor], cache: Path | None = None) -> float:
    """FlopCounterMode's count of one forward and backward of the meta-built model on `inputs`.
    `cache`: the file that holds it for this model, task and sequence, shared by a run's workers
    (bert-large's count took 0.83-1.00 s a row on a CPU as fast as an H100 host's, where a row's
    whole teardown was about 0.7 s): read when there, else counted and written."""
    if cache is not None:
        try:
            return float(json.loads(cache.read_text(encoding="utf-8"))["flops_check_per_sample"])
        except (OSError, ValueError, KeyError, TypeError):
            pass  # not counted yet in this run (or a torn file): count it
    from torch.utils.flop_counter import FlopCounterMode

    model = build_meta()
    counter = FlopCounterMode(display=False)
    with counter:
        out = model(**inputs)
        out.loss.backward()
    counted = float(counter.get_total_flops())
    if cache is not None:
        with contextlib.suppress(OSError):  # a cache: the next worker counts again
            atomic_write_json(cache, {"flops_check_per_sample": counted})
    return counted


NO_TOKENS_NOTE = "a model without tokens (a CNN): its FLOPs are FlopCounterMode's count of one training step"


def figures(
    model: Any,
    task: str,
    tokens: int | None,
    build_meta: Any,
    inputs: dict[str, Any],
    no_check: str | None = None,
    cache: Path | None = None,
) -> dict[str, Any]:
    """The worker's FLOP columns: the generic count (families without an analytic one use it), the
    counter's cross-check of the dense step, and their gap. `tokens`: per sample (None: a model
    without tokens, a CNN, has no generic count; the counter's figure is its count). `no_check`: why
    the meta model must not be run (the cross-check is left out, with that reason as its note).
    `cache`: where the run's workers keep the cross-check (counted_flops_per_sample)."""
    out: dict[str, Any] = {
        "flops_generic_per_sample": None,
        "flops_check_per_sample": None,
        "flops_check_gap_pct": None,
    }
    vision = task == "image-classification"
    expected = None
    if tokens is not None:
        try:
            out["flops_generic_per_sample"] = generic_flops_per_sample(model, tokens, task == "causal-lm", vision)
            expected = dense_flops_full_attention(model, tokens, vision)
        except (AttributeError, TypeError, ValueError) as exc:
            out["flops_check_note"] = f"generic FLOP count not possible: {exc}"
            return out
    if no_check:
        out["flops_check_note"] = f"FlopCounterMode cross-check not run: {no_check}"
        return out
    try:
        counted = counted_flops_per_sample(build_meta, inputs, cache)
    except Exception as exc:  # the counter is a cross-check: its failure is a note, never a failed row
        out["flops_check_note"] = f"FlopCounterMode failed on the meta model: {type(exc).__name__}: {str(exc)[:160]}"
        return out
    out["flops_check_per_sample"] = counted
    if tokens is None:
        out["flops_check_note"] = NO_TOKENS_NOTE
    elif expected:
        out["flops_check_gap_pct"] = 100.0 * (counted - expected) / expected
    return out
