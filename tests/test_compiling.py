"""Per-layer torch.compile: which blocks are compiled (the compiled run itself is a GPU test)."""

from __future__ import annotations

import pytest
import torch

from bench.worker.compiling import compile_layers, repeated_blocks
from bench.worker.model import build_model


def test_the_repeated_blocks_of_bert_are_its_encoder_layers() -> None:
    model = build_model("tiny", torch.device("cpu"), "sdpa")
    blocks = repeated_blocks(model)
    assert blocks == list(model.bert.encoder.layer)
    assert len(blocks) == 2


def test_compile_layers_compiles_each_block_in_place_and_nothing_else() -> None:
    model = build_model("tiny", torch.device("cpu"), "sdpa")
    assert compile_layers(model) == 2
    assert all(layer._compiled_call_impl is not None for layer in model.bert.encoder.layer)
    assert model._compiled_call_impl is None and model.bert.embeddings._compiled_call_impl is None


def test_a_model_without_repeated_blocks_is_a_clear_error() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.ReLU()]))
    with pytest.raises(ValueError, match="no list of repeated blocks to compile; use compile_scope = 'model'"):
        compile_layers(model)
