"""BERT sequence classifiers: the guide's model. Its own FLOP count (flops.py) and memory model
(dims.py: dimensions and tensors, acts.py: saved tensors, phases.py: the phases), written for
BertForSequenceClassification."""

from __future__ import annotations

from typing import Any

from ..base import Family

_COMMON: dict[str, Any] = {
    "model_type": "bert",
    "vocab_size": 30522,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "num_labels": 2,
}
# Dimensions of bert-base-uncased / bert-large-uncased; `tiny` is for CPU smoke tests.
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 512, **_COMMON},
    "bert-base": {
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        **_COMMON,
    },
    "bert-large": {
        "hidden_size": 1024,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "intermediate_size": 4096,
        **_COMMON,
    },
}

FAMILY = Family(
    name="bert",
    model_types=("bert",),
    tasks=("sequence-classification",),
    default_task="sequence-classification",
    description="BERT sequence classifiers (the guide's model); exact FLOPs and memory",
    flops="bench.families.bert.flops:flops_per_sample",
    memory="bench.families.bert.phases:MODEL",
    presets=PRESETS,
    preload=("transformers.models.bert.modeling_bert",),
    flop_check_mask=False,
)
