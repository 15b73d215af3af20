"""A BERT sequence classifier's dimensions and its parameter tensors, from a config.json's keys.

The tensor list mirrors transformers' BertForSequenceClassification (embeddings, L encoder layers,
pooler, classifier) name for name, so counts are exact and per-tensor rules (8-bit states for
tensors of 4096+ elements, Adafactor's factored states for 2-D tensors, the Trainer's weight-decay
groups) can be applied tensor by tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ...errors import BadInput
from ...memory.tensors import ParamTensor


@dataclass(frozen=True)
class BertDims:
    model_type: ClassVar[str] = "bert"  # config.json's, by which bench/families/memory_model.py finds the family
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int
    max_positions: int
    type_vocab: int
    labels: int

    def __post_init__(self) -> None:
        for key, value in vars(self).items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise BadInput(f"model config: {key} = {value!r} must be a whole number of at least 1")
        if self.hidden % self.heads:
            raise BadInput(f"model config: hidden_size {self.hidden} is not a multiple of {self.heads} heads")


_KEYS = {  # our name -> config.json key
    "hidden": "hidden_size",
    "layers": "num_hidden_layers",
    "heads": "num_attention_heads",
    "intermediate": "intermediate_size",
    "vocab": "vocab_size",
    "max_positions": "max_position_embeddings",
    "type_vocab": "type_vocab_size",
}


def bert_dims_from_config(cfg: dict[str, Any], origin: str) -> BertDims:
    missing = [key for key in _KEYS.values() if key not in cfg]
    if missing:
        raise BadInput(f"{origin}: the config has no {', '.join(missing)}")
    labels = cfg.get("num_labels") or len(cfg.get("id2label") or {}) or 2
    values = {ours: cfg[theirs] for ours, theirs in _KEYS.items()}
    try:
        return BertDims(**values, labels=labels)
    except BadInput as exc:
        raise BadInput(f"{origin}: {exc.message}") from None


def param_tensors(d: BertDims) -> list[ParamTensor]:
    """Every parameter of BertForSequenceClassification, in the model's own order."""
    h, i = d.hidden, d.intermediate
    out = [
        ParamTensor("bert.embeddings.word_embeddings.weight", (d.vocab, h), None),
        ParamTensor("bert.embeddings.position_embeddings.weight", (d.max_positions, h), None),
        ParamTensor("bert.embeddings.token_type_embeddings.weight", (d.type_vocab, h), None),
        ParamTensor("bert.embeddings.LayerNorm.weight", (h,), None),
        ParamTensor("bert.embeddings.LayerNorm.bias", (h,), None),
    ]
    per_layer = [
        ("attention.self.query", (h, h)),
        ("attention.self.key", (h, h)),
        ("attention.self.value", (h, h)),
        ("attention.output.dense", (h, h)),
        ("attention.output.LayerNorm", None),
        ("intermediate.dense", (i, h)),
        ("output.dense", (h, i)),
        ("output.LayerNorm", None),
    ]
    for n in range(d.layers):
        for module, shape in per_layer:
            prefix = f"bert.encoder.layer.{n}.{module}"
            if shape is None:  # LayerNorm: weight and bias of the hidden size
                out += [ParamTensor(f"{prefix}.weight", (h,), n), ParamTensor(f"{prefix}.bias", (h,), n)]
            else:
                out += [ParamTensor(f"{prefix}.weight", shape, n), ParamTensor(f"{prefix}.bias", (shape[0],), n)]
    out += [
        ParamTensor("bert.pooler.dense.weight", (h, h), None),
        ParamTensor("bert.pooler.dense.bias", (h,), None),
        ParamTensor("classifier.weight", (d.labels, h), None),
        ParamTensor("classifier.bias", (d.labels,), None),
    ]
    return out


def param_count(d: BertDims) -> int:
    return sum(t.numel for t in param_tensors(d))


def buffer_bytes(d: BertDims) -> int:
    """The model's buffers: position_ids and token_type_ids, each [1, max_positions] int64."""
    return 2 * d.max_positions * 8
