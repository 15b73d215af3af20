"""The family-free memory arithmetic: any list of parameter tensors -> parameters, gradients and
optimizer states, tensor by tensor (states.py, tensors.py), and a Prediction that says its
activations are not predicted. Property-based where a rule holds for every tensor list."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.families.bert import dims as bert
from bench.families.llama import dims as decoder
from bench.families.llama.weights import adapter_tensors, decoder_states
from bench.families.memory_model import load_dims, predict
from bench.memory import states as model_states_mod
from bench.memory import terms
from bench.memory.prediction import ACTIVATIONS_NOT_PREDICTED, Prediction
from bench.memory.tensors import ParamTensor, from_named_parameters, layer_index
from bench.recipe.scenario import Scenario

OPTIMIZERS = ("adamw", "adamw_fused", "adamw_foreach", "adafactor", "adamw_8bit", "paged_adamw_8bit", "sgd")
OPTIMIZERS += ("adam8bit_manual",)
ENGINES = ("trainer", "accelerate")
SUFFIXES = ("weight", "bias", "norm.weight", "LayerNorm.weight", "embed_tokens.weight", "word_embeddings.weight")

shapes = st.lists(st.integers(1, 600), min_size=1, max_size=3).map(tuple)


@st.composite
def tensor_lists(draw: Any) -> list[ParamTensor]:
    """Distinct names; 1- to 3-D shapes up to 600 x 600 x 600 elements (the 8-bit and paged sizes)."""
    n = draw(st.integers(1, 8))
    out = []
    for i in range(n):
        suffix = draw(st.sampled_from(SUFFIXES))
        out.append(ParamTensor(f"model.layers.{i}.{suffix}", draw(shapes), i))
    return out


@st.composite
def frozen_split(draw: Any) -> tuple[list[ParamTensor], set[str]]:
    tensors = draw(tensor_lists())
    frozen = draw(st.sets(st.sampled_from([t.name for t in tensors])))
    return tensors, frozen


def states(tensors: list[ParamTensor], optimizer: str, engine: str, **kw: Any) -> model_states_mod.ModelStates:
    return model_states_mod.model_states(tensors, optimizer, engine, **kw)


# -- model states --------------------------------------------------------------------------------
@given(frozen_split(), st.sampled_from(OPTIMIZERS), st.sampled_from(ENGINES), st.integers(0, 10_000))
def test_the_sum_over_tensors_is_the_total(split: Any, optimizer: str, engine: str, buffers: int) -> None:
    tensors, frozen = split
    s = states(tensors, optimizer, engine, frozen=frozen, buffers=buffers)
    assert [t.name for t in s.tensors] == [t.name for t in tensors]
    assert s.weights == sum(t.weights for t in s.tensors) + buffers
    assert s.grads == sum(t.grads for t in s.tensors)
    assert s.optimizer == sum(t.optimizer for t in s.tensors) + s.shared_optimizer
    assert s.total == sum(t.total for t in s.tensors) + buffers + s.shared_optimizer
    assert s.total == s.weights + s.grads + s.optimizer


@given(frozen_split(), st.sampled_from(OPTIMIZERS), st.sampled_from(ENGINES), st.sampled_from([1, 2, 4]))
def test_frozen_tensors_get_no_gradient_nor_optimizer_state(
    split: Any, optimizer: str, engine: str, frozen_bytes: int
) -> None:
    tensors, frozen = split
    s = states(tensors, optimizer, engine, frozen=frozen, frozen_bytes=frozen_bytes)
    by_name = {t.name: t for t in tensors}
    for t in s.tensors:
        assert t.trainable == (t.name not in frozen)
        if t.name in frozen:
            assert (t.grads, t.optimizer, t.paged) == (0, 0, 0)
            assert t.weights == terms.alloc(by_name[t.name].numel * frozen_bytes)
    # a trained tensor's states do not depend on which others are frozen
    alone = states(tensors, optimizer, engine)
    for with_frozen, without in zip(s.tensors, alone.tensors, strict=True):
        if with_frozen.trainable:
            assert with_frozen == without


@given(tensor_lists(), st.sampled_from(OPTIMIZERS), st.sampled_from(ENGINES), st.integers(0, 10_000))
def test_every_tensor_trained_is_what_the_scenario_terms_give(
    tensors: list[ParamTensor], optimizer: str, engine: str, buffers: int
) -> None:
    """The same rules as the BERT and decoder paths: terms.py's sums, tensor by tensor."""
    s = states(tensors, optimizer, engine, buffers=buffers)
    assert s.weights == terms.weights(tensors, buffers)
    assert s.grads == terms.grads(tensors)
    assert (s.optimizer, s.paged) == terms.optimizer_split(tensors, optimizer, engine)
    assert s.step_temporaries == terms.optimizer_temporaries(*terms.as_built(tensors, optimizer, engine))
    assert list(s.notes) == terms.optimizer_notes(optimizer, engine, s.paged)


@given(st.integers(1, 20_000), st.sampled_from(ENGINES))
def test_8bit_states_from_4096_elements(numel: int, engine: str) -> None:
    (t,) = states([ParamTensor("mlp.up.weight", (numel,), 0)], "adamw_8bit", engine).tensors
    if numel < terms.BNB_MIN_8BIT_SIZE:  # two fp32 states
        assert t.optimizer == 2 * terms.alloc(4 * numel)
    else:  # two uint8 states + one fp32 absmax per 256-element block each
        assert t.optimizer == 2 * terms.alloc(numel) + 2 * terms.alloc(4 * -(-numel // 256))
    (emb,) = states([ParamTensor("embed_tokens.weight", (numel,), None)], "adamw_8bit", engine).tensors
    if engine == "trainer":  # the Trainer keeps nn.Embedding states 32-bit at any size
        assert emb.optimizer == 2 * terms.alloc(4 * numel)
    else:
        assert emb.optimizer == t.optimizer


@given(st.integers(1, 3000), st.integers(1, 3000))
def test_adafactor_factors_2d_tensors_only(rows: int, cols: int) -> None:
    matrix, vector = states(
        [ParamTensor("w.weight", (rows, cols), 0), ParamTensor("w.bias", (rows,), 0)], "adafactor", "trainer"
    ).tensors
    rms = terms.alloc(4)
    assert matrix.optimizer == terms.alloc(4 * rows) + terms.alloc(4 * cols) + rms  # row and column means
    assert vector.optimizer == terms.alloc(4 * rows) + rms


@given(tensor_lists(), st.sampled_from(ENGINES))
def test_adamw_keeps_two_fp32_moments_and_sgd_none(tensors: list[ParamTensor], engine: str) -> None:
    for t in states(tensors, "adamw", engine).tensors:
        assert t.optimizer == 2 * t.grads == 2 * t.weights  # fp32 master weights, gradients, moments
    assert states(tensors, "sgd", engine).optimizer == 0


def test_paged_states_leave_the_allocator() -> None:
    big = ParamTensor("mlp.up.weight", (1000, 1000), 0)
    paged = states([big], "paged_adamw_8bit", "accelerate")
    plain = states([big], "adamw_8bit", "accelerate")
    assert paged.paged == 2 * terms.alloc(1000 * 1000)
    assert paged.optimizer + paged.paged == plain.optimizer
    assert any("unified memory" in note for note in paged.notes)


def test_bad_arguments_are_named() -> None:
    tensors = [ParamTensor("a.weight", (4, 4), 0)]
    with pytest.raises(ValueError, match="frozen names no tensor of the model: b.weight"):
        model_states_mod.model_states(tensors, "adamw", frozen={"b.weight"})
    with pytest.raises(ValueError, match="unknown optimizer 'lion'"):
        model_states_mod.model_states(tensors, "lion")
    with pytest.raises(ValueError, match="frozen_bytes 0"):
        model_states_mod.model_states(tensors, "adamw", frozen_bytes=0)


def test_lora_states_are_the_decoder_paths() -> None:
    """A frozen half base with fp32 adapters, as bench/families/llama/weights.py counts it."""
    sc = Scenario(name="t", model="llama-tiny", peft="lora", precision="bf16", samples=32, warmup_steps=1)
    d = load_dims("llama-tiny")
    assert isinstance(d, decoder.DecoderDims)
    base, adapters = decoder.param_tensors(d), adapter_tensors(d, sc)
    buffers = decoder.buffer_bytes(d)
    s = model_states_mod.model_states(
        base + adapters, sc.optimizer, sc.engine, frozen={t.name for t in base}, frozen_bytes=2, buffers=buffers
    )
    want = decoder_states(d, sc, buffers)
    assert s.weights == want.weights
    assert s.grads == terms.grads(list(want.trainable))
    assert s.optimizer == terms.optimizer_states(list(want.trainable), sc.optimizer, sc.engine)


# -- tensors from a built model ------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["tiny", "bert-base", "llama-tiny", "llama-1b"])
def test_named_parameters_become_the_familys_tensors(preset: str) -> None:
    """(name, shape) pairs as named_parameters() gives them: the same tensors, layers read from names
    (the BERT and Llama tests check these names against transformers' models on the meta device)."""
    d = load_dims(preset)
    own = bert.param_tensors(d) if isinstance(d, bert.BertDims) else decoder.param_tensors(d)
    assert from_named_parameters((t.name, list(t.shape)) for t in own) == own


def test_layer_index_reads_the_first_number() -> None:
    assert layer_index("model.layers.12.mlp.up_proj.lora_A.default.weight") == 12
    assert layer_index("bert.encoder.layer.0.output.dense.bias") == 0
    assert layer_index("transformer.h.3.attn.c_attn.weight") == 3
    assert layer_index("lm_head.weight") is None
    with pytest.raises(ValueError, match="negative"):
        from_named_parameters([("a.weight", (2, -1))])


# -- a prediction without activations ------------------------------------------------------------
def sc(**settings: Any) -> Scenario:
    return Scenario(name="t", **{"samples": 64, "warmup_steps": 1, "model": "bert-base", **settings})


SCENARIOS = [
    {},
    {"precision": "bf16", "optimizer": "adamw_8bit"},
    {"optimizer": "adafactor", "grad_accum_steps": 2},
    {"strategy": "ddp", "gpus": 2},
    {"strategy": "fsdp", "gpus": 4, "precision": "bf16"},
    {"strategy": "deepspeed", "zero_stage": 3, "gpus": 2, "precision": "bf16"},
]


@pytest.mark.parametrize("settings", SCENARIOS)
def test_states_only_says_activations_are_not_predicted(settings: dict[str, Any]) -> None:
    s = sc(**settings)
    d = load_dims("bert-base")
    assert isinstance(d, bert.BertDims)
    p = model_states_mod.predict_states_only(s, bert.param_tensors(d), buffers=bert.buffer_bytes(d))
    full = predict(s, d)
    assert not p.activations_predicted and ACTIVATIONS_NOT_PREDICTED in p.notes
    assert p.term("activations") is None and p.term("autocast_copies") is None
    assert p.activations == p.autocast_copies == 0
    assert all("activations" not in terms for terms in p.phase_terms.values())
    # the model states, their sharding and the step are BERT's own; only the saved tensors are missing
    assert (p.params, p.weights, p.grads, p.optimizer, p.optimizer_temp) == (
        full.params,
        full.weights,
        full.grads,
        full.optimizer,
        full.optimizer_temp,
    )
    assert p.phases["optimizer_step"] == full.phases["optimizer_step"]
    assert (
        p.phases["forward"]
        == full.phases["forward"] - full.activations - full.phase_terms["forward"]["half weight copies"]
    )
    assert p.peak <= full.peak


def test_a_prediction_cannot_count_activations_it_says_it_does_not_predict() -> None:
    base: dict[str, Any] = dict(
        scenario="t", params=1, weights=1, autocast_copies=0, grads=1, optimizer=1, optimizer_temp=0, workspace=1
    )
    phases = {"forward": {"weights": 1}, "backward": {"weights": 1}, "optimizer_step": {"weights": 1}}
    note = (ACTIVATIONS_NOT_PREDICTED,)
    with pytest.raises(ValueError, match="counts some"):
        Prediction(**base, activations=5, phases={}, notes=note, activations_predicted=False)
    with pytest.raises(ValueError, match="counts some"):
        bad = {**phases, "backward": {"weights": 1, "logits": 3}}
        Prediction(**base, activations=0, phases={}, notes=note, phase_terms=bad, activations_predicted=False)
    with pytest.raises(ValueError, match="no note says so"):
        Prediction(**base, activations=0, phases={}, phase_terms=phases, activations_predicted=False)
    ok = Prediction(
        **base, activations=0, phases={"forward": 1}, notes=note, phase_terms=phases, activations_predicted=False
    )
    assert ok.term("weights") == 1 and ok.term("activations") is None
