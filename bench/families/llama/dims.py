"""A Llama-style causal LM's dimensions and its parameter tensors, from a preset or a config.json.

The tensor list mirrors transformers' LlamaForCausalLM name for name (embed_tokens, L decoder
layers of q/k/v/o, gate/up/down and two RMSNorms, the final norm, lm_head unless tied), so counts
are exact and per-tensor rules (which Linears LoRA targets or bitsandbytes quantizes, 8-bit
optimizer states) apply tensor by tensor. No torch import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ...errors import BadInput
from ...memory.tensors import ParamTensor

# The nn.Linear layers of one decoder layer (LoRA's "all-linear" and bitsandbytes' quantized set)
ATTENTION_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_LINEARS = ("gate_proj", "up_proj", "down_proj")
LAYER_LINEARS = ATTENTION_LINEARS + MLP_LINEARS


@dataclass(frozen=True)
class DecoderDims:
    model_type: ClassVar[str] = "llama"  # config.json's, by which bench/families/memory_model.py finds the family
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool

    def __post_init__(self) -> None:
        for key, value in vars(self).items():
            if key == "tied":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise BadInput(f"model config: {key} = {value!r} must be a whole number of at least 1")
        if self.heads % self.kv_heads:
            raise BadInput(
                f"model config: {self.heads} attention heads are not a multiple of {self.kv_heads} key/value heads"
            )

    @property
    def q_width(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.kv_heads * self.head_dim

    def linear_shape(self, name: str) -> tuple[int, int]:
        """(out_features, in_features) of one of the layer's Linears."""
        h, i, q, kv = self.hidden, self.intermediate, self.q_width, self.kv_width
        return {
            "q_proj": (q, h),
            "k_proj": (kv, h),
            "v_proj": (kv, h),
            "o_proj": (h, q),
            "gate_proj": (i, h),
            "up_proj": (i, h),
            "down_proj": (h, i),
        }[name]


def decoder_dims_from_config(cfg: dict[str, Any], origin: str) -> DecoderDims:
    keys = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
    missing = [key for key in keys if key not in cfg]
    if missing:
        raise BadInput(f"{origin}: the config has no {', '.join(missing)}")
    heads = cfg["num_attention_heads"]
    hidden = cfg["hidden_size"]
    head_dim = cfg.get("head_dim") or (hidden // heads if isinstance(hidden, int) and isinstance(heads, int) else 0)
    try:
        return DecoderDims(
            hidden=hidden,
            layers=cfg["num_hidden_layers"],
            heads=heads,
            kv_heads=cfg.get("num_key_value_heads") or heads,
            head_dim=head_dim,
            intermediate=cfg["intermediate_size"],
            vocab=cfg["vocab_size"],
            tied=bool(cfg.get("tie_word_embeddings", False)),
        )
    except BadInput as exc:
        raise BadInput(f"{origin}: {exc.message}") from None


def param_tensors(d: DecoderDims) -> list[ParamTensor]:
    """Every parameter of LlamaForCausalLM, in named_parameters() order (tied: one tensor)."""
    h = d.hidden
    out = [ParamTensor("model.embed_tokens.weight", (d.vocab, h), None)]
    for n in range(d.layers):
        prefix = f"model.layers.{n}"
        out += [ParamTensor(f"{prefix}.self_attn.{m}.weight", d.linear_shape(m), n) for m in ATTENTION_LINEARS]
        out += [ParamTensor(f"{prefix}.mlp.{m}.weight", d.linear_shape(m), n) for m in MLP_LINEARS]
        out += [
            ParamTensor(f"{prefix}.input_layernorm.weight", (h,), n),
            ParamTensor(f"{prefix}.post_attention_layernorm.weight", (h,), n),
        ]
    out.append(ParamTensor("model.norm.weight", (h,), None))
    if not d.tied:
        out.append(ParamTensor("lm_head.weight", (d.vocab, h), None))
    return out


def param_count(d: DecoderDims) -> int:
    return sum(t.numel for t in param_tensors(d))


def is_layer_linear(t: ParamTensor) -> bool:
    """A decoder layer's nn.Linear weight: what LoRA's all-linear targets and bitsandbytes quantizes."""
    return t.layer is not None and len(t.shape) == 2


def module_name(t: ParamTensor) -> str:
    """'q_proj' for model.layers.3.self_attn.q_proj.weight."""
    return t.name.rsplit(".", 2)[-2]


def buffer_bytes(d: DecoderDims) -> int:
    """LlamaRotaryEmbedding's inv_freq and original_inv_freq: head_dim / 2 fp32 each (512-B blocks)."""
    return 2 * max(512, -(-(d.head_dim // 2 * 4) // 512) * 512)
