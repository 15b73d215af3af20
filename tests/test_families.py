"""Model families: the registry's contract (every family's presets resolve, count FLOPs and predict
memory), any architecture as its own task through `gpubench run --model DIR` (real workers on the
CPU), config-only directories, the local hub cache, and bad models refused before any work."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import error_lines, gpubench, gpubench_in_process, write_matrix
from hypothesis import given, settings
from hypothesis import strategies as st
from tvstub import torchvision_in_process

from bench import families
from bench.errors import BadInput
from bench.families.base import TECHNIQUES
from bench.families.resolve import hub_cache_snapshot, resolve_model
from bench.planner.rules import check
from bench.recipe.scenario import Scenario
from bench.results import read_results

PRESETS = sorted(families.PRESETS)


@pytest.fixture
def torchvision_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """torchvision importable here: the real one, else a plain-torch stub (tests/tvstub.py)."""
    yield from torchvision_in_process(tmp_path, monkeypatch)


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_builds_counts_flops_and_predicts(name: str, request: pytest.FixtureRequest) -> None:
    """The registry's contract, walked from the registry: each preset's family takes its model_type,
    its task is one of its family's, its meta-built model gives FLOPs > 0, and predict gives a peak.
    A family whose package the parent never imports (torchvision) builds with it (the stub where it
    is not installed) and is not predicted, saying so."""
    import torch

    from bench.families.build import build_on_meta, task_of
    from bench.measure.flopcount import generic_flops_per_sample
    from bench.predict.predictions import prediction_of
    from bench.worker import what_ran

    fam = families.family_of(name)
    assert name in fam.presets
    task = task_of(name)
    assert task in fam.tasks
    if fam.package is not None:
        request.getfixturevalue("torchvision_here")
    model = build_on_meta(name)
    assert all(p.device == torch.device("meta") for p in model.parameters())
    tokens = what_ran.tokens(model, task, 128)[1]
    assert tokens is not None  # every preset is a transformer: text tokens or patches
    assert generic_flops_per_sample(model, tokens, task == "causal-lm", task == "image-classification") > 0
    if fam.package is not None:
        with pytest.raises(BadInput, match=f"tensors come from {fam.package}.*memory is not predicted"):
            prediction_of(Scenario(name="s", model=name, seq_len=128, samples=64), name)
        return
    p = prediction_of(Scenario(name="s", model=name, seq_len=128, samples=64), name)
    assert p.peak > 0 and p.params == sum(t.numel() for t in model.parameters())
    assert p.activations_predicted == fam.activations


def test_every_family_is_reachable_and_each_technique_has_a_family() -> None:
    names = [f.name for f in families.FAMILIES]
    assert len(names) == len(set(names)) and families.FAMILIES[-1] is families.GENERIC
    types = [t for f in families.FAMILIES for t in f.model_types]
    assert len(types) == len(set(types)), "a model_type in two families"
    for technique in TECHNIQUES:
        assert any(f.takes(technique) for f in families.FAMILIES), technique


@settings(max_examples=40, deadline=None)
@given(
    preset=st.sampled_from(PRESETS),
    asked=st.sampled_from(
        [
            {"peft": "lora"},
            {"peft": "lora", "quantize_base": "nf4"},
            {"liger": True},
            {"experts_implementation": "grouped_mm"},
        ]
    ),
)
def test_a_technique_is_refused_by_a_family_that_does_not_take_it(preset: str, asked: dict) -> None:
    """Either the scenario builds, or it is refused naming the field and the model's family."""
    fam = families.family_of(preset)
    technique = families.techniques_asked(asked)[0][0]
    try:
        check(Scenario(name="s", model=preset, **asked))
    except BadInput as exc:
        field = next(iter(asked)) if technique != "qlora" else "quantize_base"
        assert f"{field} = " in exc.message
        assert fam.name in exc.message or "causal" in exc.message or "Liger patch" in exc.message
    else:
        assert fam.takes(technique)


def test_task_from_architectures_and_refusals(tmp_path: Path) -> None:
    decoder = families.by_name("decoder")
    assert families.resolve_task("auto", {"architectures": ["Qwen2ForSequenceClassification"]}, decoder, "x") == (
        "sequence-classification"
    )
    assert families.resolve_task("auto", {}, decoder, "x") == "causal-lm"
    with pytest.raises(BadInput, match="does not train task 'image-classification'"):
        families.resolve_task("image-classification", {}, decoder, "x")
    with pytest.raises(BadInput, match="T5ForConditionalGeneration is no task"):
        families.resolve_task("auto", {"architectures": ["T5ForConditionalGeneration"]}, families.GENERIC, "x")
    with pytest.raises(BadInput, match="not an architecture transformers knows"):
        families.for_config({"model_type": "no-such-arch"}, "x")


def _tiny(model_type: str, **extra: object) -> dict:
    dims = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128}
    return {"model_type": model_type, **dims, **extra}


def write_checkpoint(folder: Path, cfg: dict, task: str) -> Path:
    """A tiny random checkpoint in Hugging Face's format (config.json + model.safetensors)."""
    import transformers

    config = transformers.AutoConfig.for_model(**cfg)
    model = getattr(transformers, families.TASK_CLASSES[task]).from_config(config)
    model.save_pretrained(folder)
    return folder


def write_config(folder: Path, cfg: dict) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def test_models_gpubench_has_no_code_for_train_as_their_own_task(tmp_path: Path) -> None:
    """A Qwen2 checkpoint (weights), a Mixtral and a ViT given only as config.json: each trains `ok`
    as its own task, FLOPs near 6 x active parameters x tokens, a memory prediction, LoRA applied."""
    qwen = write_checkpoint(
        tmp_path / "qwen2",
        _tiny("qwen2", num_key_value_heads=2, vocab_size=512, architectures=["Qwen2ForCausalLM"]),
        "causal-lm",
    )
    moe = write_config(
        tmp_path / "mixtral", _tiny("mixtral", num_key_value_heads=2, vocab_size=512, num_local_experts=4)
    )
    vit = write_config(
        tmp_path / "vit",
        _tiny("vit", image_size=32, patch_size=8, num_labels=3, architectures=["ViTForImageClassification"]),
    )
    base = {"samples": 8, "seq_len": 32, "warmup_steps": 1, "batch_size": 4}
    matrix = write_matrix(
        tmp_path / "m.toml",
        {
            "qwen": {"model": str(qwen)},
            "qwen-lora": {"model": str(qwen), "peft": "lora"},
            "moe": {"model": str(moe)},
            "vit": {"model": str(vit)},
        },
        base=base,
    )
    out = tmp_path / "out"
    done = gpubench("run", "--no-report", "--matrix", matrix, "--out", out, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = read_results(out).set_index("scenario")
    assert (rows["status"] == "ok").all(), rows[["status", "error"]]
    for name, row in rows.iterrows():
        assert row["flops_source"].startswith("generic"), name
        assert row["pred_weights_mb"] > 0, name  # a memory prediction, activations not predicted
        assert abs(row["flops_check_gap_pct"]) < 5, name
    # 6 x parameters x tokens, give or take attention, embeddings and the routed share
    qwen_row = rows.loc["qwen"]
    ratio = qwen_row["flops_per_sample"] / (6 * qwen_row["model_params"] * 32)
    assert 0.5 < ratio < 1.5, ratio
    moe_row = rows.loc["moe"]  # 4 experts, 2 a token (Mixtral's default): about half the expert weights
    assert moe_row["flops_per_sample"] < 6 * moe_row["model_params"] * 32 * 0.8
    lora = rows.loc["qwen-lora"]
    assert lora["trainable_params"] < lora["model_params"] / 5  # LoRA really applied
    assert lora["flops_per_sample"] < qwen_row["flops_per_sample"]


def test_bad_models_are_refused_before_any_work(tmp_path: Path) -> None:
    matrix = write_matrix(tmp_path / "m.toml", {"baseline": {}})
    unknown = write_config(tmp_path / "odd", _tiny("no-such-arch"))
    out = tmp_path / "out"
    done = gpubench_in_process("run", "--matrix", matrix, "--model", unknown, "--out", out)
    assert done.code == 2 and len(error_lines(done.err)) == 1, done.err
    assert "model_type 'no-such-arch' is not an architecture transformers knows" in done.err
    assert not out.exists()
    done = gpubench_in_process("run", "--matrix", matrix, "--model", "vit-tiny", "--peft", "lora", "--liger")
    assert done.code in (2,), done.err


def test_a_config_file_and_the_local_hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg_file = tmp_path / "qwen.json"
    cfg_file.write_text(json.dumps(_tiny("qwen2", vocab_size=512)))
    assert resolve_model(str(cfg_file), "cpu") == str(cfg_file.resolve())
    assert families.family_of(str(cfg_file)).name == "decoder"
    cache = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    with pytest.raises(BadInput, match="never downloads") as exc:
        resolve_model("Qwen/Qwen2-0.5B", "cpu")
    assert "hf download Qwen/Qwen2-0.5B config.json" in (exc.value.hint or "")
    snap = cache / "models--Qwen--Qwen2-0.5B" / "snapshots" / "abc123"
    write_config(snap, _tiny("qwen2", vocab_size=512))
    (cache / "models--Qwen--Qwen2-0.5B" / "refs").mkdir()
    (cache / "models--Qwen--Qwen2-0.5B" / "refs" / "main").write_text("abc123")
    assert hub_cache_snapshot("Qwen/Qwen2-0.5B") == snap.resolve()
    assert resolve_model("Qwen/Qwen2-0.5B", "cpu") == str(snap.resolve())


def test_overrides_apply_before_the_matrix_is_validated(tmp_path: Path) -> None:
    """A LoRA row is valid with --model llama-tiny, and an override's refusal names the option."""
    from bench.planner import matrix as matrix_mod

    path = write_matrix(tmp_path / "m.toml", {"lora": {"peft": "lora"}}, base={"model": "tiny"})
    with pytest.raises(BadInput, match="does not apply to 'tiny'"):
        matrix_mod.load_matrix(str(path))
    m = matrix_mod.load_matrix(str(path), overrides={"model": "llama-tiny"})
    assert m.scenarios[0].model == "llama-tiny"
    with pytest.raises(BadInput, match="with --model vit-tiny"):
        matrix_mod.load_matrix(str(path), overrides={"model": "vit-tiny", "liger": True})


@pytest.mark.parametrize(
    "cfg",
    [
        {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 512},  # Conv1D layers
        _tiny("qwen3", num_key_value_heads=2, head_dim=32, vocab_size=512),  # grouped-query, q/k norms
        _tiny("qwen2_moe", num_key_value_heads=2, vocab_size=512, num_experts=4, moe_intermediate_size=32),
    ],
    ids=["gpt2", "qwen3", "qwen2_moe"],
)
def test_the_generic_count_agrees_with_the_flop_counter(tmp_path: Path, cfg: dict) -> None:
    """The generic count of a dense step against FlopCounterMode on the meta device, for layers the
    count must recognise (GPT-2's Conv1D, grouped-query attention, a shared expert beside routed ones)."""
    import torch

    from bench.families.build import build_on_meta
    from bench.measure.flopcount import counted_flops_per_sample, dense_flops_full_attention

    model = str(write_config(tmp_path / "m", cfg))
    extra = {
        "attn_implementation": "eager",
        **({"experts_implementation": "batched_mm"} if "moe" in cfg["model_type"] else {}),
    }
    ids = torch.zeros((1, 32), dtype=torch.long, device="meta")
    inputs = {"input_ids": ids, "labels": ids, "attention_mask": torch.ones_like(ids)}
    counted = counted_flops_per_sample(lambda: build_on_meta(model, **extra), inputs)
    expected = dense_flops_full_attention(build_on_meta(model, **extra), 32)
    assert abs(counted - expected) / expected < 0.05


def test_a_model_table_in_the_matrix_trains_with_random_weights(tmp_path: Path) -> None:
    """[model] (a model_type and its dimensions) is every scenario's model unless one names its own;
    an unknown model_type in it is refused naming the table."""
    from bench.planner import matrix as matrix_mod

    table = "\n".join(
        [
            "[model]",
            'model_type = "qwen2"',
            "hidden_size = 64",
            "num_hidden_layers = 2",
            "num_attention_heads = 4",
            "num_key_value_heads = 2",
            "intermediate_size = 128",
            "vocab_size = 512",
            "",
        ]
    )
    path = tmp_path / "m.toml"
    write_matrix(
        path, {"baseline": {}, "other": {"model": "tiny"}}, base={"samples": 8, "seq_len": 16, "warmup_steps": 1}
    )
    path.write_text(table + path.read_text())
    m = matrix_mod.load_matrix(str(path))
    inline, other = m.scenarios
    assert families.family_of(resolve_model(inline.model, "cpu")).name == "decoder" and other.model == "tiny"
    out = tmp_path / "out"
    done = gpubench("run", "--no-report", "--matrix", path, "--only", "baseline", "--out", out, timeout=300)
    assert done.returncode == 0, done.stderr
    row = read_results(out).iloc[0]
    assert row["status"] == "ok" and row["flops_source"].startswith("generic")
    path.write_text(path.read_text().replace('"qwen2"', '"qwen9"'))
    with pytest.raises(BadInput, match=r"\[model\]: model_type 'qwen9'"):
        matrix_mod.load_matrix(str(path))


def test_a_liger_row_never_runs_the_meta_cross_check() -> None:
    """Liger patches the transformers classes, so a meta copy would launch Triton kernels on null
    pointers (an illegal memory access on the H200 after the window): the cross-check is left out,
    with its reason, and the generic count still stands."""
    import torch

    from bench.families.build import build_on_meta
    from bench.measure.flopcount import figures

    def never() -> None:
        raise AssertionError("the meta model was built")

    model = build_on_meta("llama-tiny")
    ids = torch.zeros((1, 32), dtype=torch.long, device="meta")
    out = figures(model, "causal-lm", 32, never, {"input_ids": ids}, no_check="Liger")
    assert out["flops_generic_per_sample"] > 0 and out["flops_check_per_sample"] is None
    assert out["flops_check_note"] == "FlopCounterMode cross-check not run: Liger"


def test_the_cross_check_is_counted_once_a_run_and_read_by_its_next_rows(tmp_path: Path) -> None:
    """A run's workers keep the meta cross-check in its shared folder (bert-large's took 0.83-1.00 s
    of every row's teardown): the second row of the model reads it (no meta build), the same figure;
    a torn file is counted again."""
    import torch

    from bench.families.build import build_on_meta
    from bench.measure.flopcount import counted_flops_per_sample

    built: list[int] = []

    def build() -> object:
        built.append(1)
        return build_on_meta("llama-tiny", attn_implementation="eager")

    ids = torch.zeros((1, 32), dtype=torch.long, device="meta")
    inputs = {"input_ids": ids, "labels": ids, "attention_mask": torch.ones_like(ids)}
    cache = tmp_path / "shared" / "flops" / "k.json"
    first = counted_flops_per_sample(build, inputs, cache)
    assert cache.is_file() and counted_flops_per_sample(build, inputs, cache) == first and len(built) == 1
    cache.write_text('{"flops_check_per')
    assert counted_flops_per_sample(build, inputs, cache) == first and len(built) == 2


def test_every_row_of_a_run_carries_the_cross_check_a_fresh_count_gives(tmp_path: Path) -> None:
    """Through the worker: two scenarios of one model (another optimizer) share the kept count, and
    it is the figure a count of its own gives; each row times its teardown's steps."""
    from bench.families.build import build_on_meta
    from bench.worker.train_one import count_flops

    path = tmp_path / "m.toml"
    base = {"model": "llama-tiny", "samples": 8, "seq_len": 32, "warmup_steps": 1, "batch_size": 4}
    write_matrix(path, {"a": {}, "b": {"optimizer": "adafactor"}}, base=base)
    done = gpubench("run", "--no-report", "--matrix", path, "--out", tmp_path / "out", timeout=300)
    assert done.returncode == 0, done.stderr
    rows = read_results(tmp_path / "out").set_index("scenario")["flops_check_per_sample"]
    sc = Scenario(name="b", model="llama-tiny", seq_len=32)
    fresh = count_flops(sc, "llama-tiny", build_on_meta("llama-tiny"), 32)["flops_check_per_sample"]
    assert rows["a"] == rows["b"] == fresh > 0
    for tail in read_results(tmp_path / "out")["teardown_breakdown"]:  # each step of the worker's tail, timed
        steps = json.loads(tail)
        assert list(steps) == ["engine_end", "flop_count", "memory", "held_out"] and min(steps.values()) >= 0


# the one-draw CPU build is the QLoRA base's (transformers' models): not a family with its own builder
SMALL = [name for name in PRESETS if "tiny" in name and families.family_of(name).builder is None]


@pytest.mark.parametrize("name", SMALL)
def test_every_familys_random_cpu_build_draws_its_weights_once(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """build_random_on_cpu (the QLoRA base's random checkpoint): one build (no fallback to the
    usual one for any shipped family), the same parameters as build_model, none left as the
    constructors' NaN fill, deterministic in the seed, and torch's init functions given back."""
    import torch

    from bench.worker import model as model_mod
    from bench.worker.model import build_model, build_random_on_cpu

    real = {n: getattr(torch.nn.init, n) for n in ("normal_", "uniform_", "kaiming_uniform_", "ones_", "zeros_")}
    builds: list[str] = []
    monkeypatch.setattr(model_mod, "build_model", lambda *a, **k: builds.append(a[0]) or build_model(*a, **k))
    torch.manual_seed(3)
    fast = build_random_on_cpu(name, torch.float32)
    assert builds == [name]
    monkeypatch.undo()
    assert {n: getattr(torch.nn.init, n) for n in real} == real
    torch.manual_seed(3)
    again = build_random_on_cpu(name, torch.float32).state_dict()
    usual = build_model(name, torch.device("cpu"), "default").state_dict()
    state = fast.state_dict()
    assert {k: v.shape for k, v in state.items()} == {k: v.shape for k, v in usual.items()}
    assert all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point())
    assert all(torch.equal(state[k], again[k]) for k in state)


def test_a_weight_only_its_constructor_draws_makes_the_random_cpu_build_draw_as_usual(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A family whose _init_weights leaves a module to its constructor (here the embeddings): the
    one-draw build finds the NaN fill left there and builds again the usual way."""
    import torch
    from transformers.models.llama import modeling_llama

    from bench.worker import model as model_mod

    real_init = modeling_llama.LlamaPreTrainedModel._init_weights

    def skips_embeddings(self: object, module: torch.nn.Module) -> None:
        if not isinstance(module, torch.nn.Embedding):
            real_init(self, module)

    monkeypatch.setattr(modeling_llama.LlamaPreTrainedModel, "_init_weights", skips_embeddings)
    builds: list[str] = []
    real_build = model_mod.build_model
    monkeypatch.setattr(model_mod, "build_model", lambda *a, **k: builds.append(a[0]) or real_build(*a, **k))
    built = model_mod.build_random_on_cpu("llama-tiny", torch.float32)
    assert builds == ["llama-tiny", "llama-tiny"]  # the one-draw build, then the usual one
    assert all(torch.isfinite(p).all() for p in built.parameters())
    assert float(built.get_input_embeddings().weight.detach().std()) > 0.5  # nn.Embedding's own N(0, 1)


def test_a_module_imported_during_the_random_cpu_build_keeps_torchs_real_init_functions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module imported while the constructors' draws are a NaN fill, binding an init function by
    name (`from torch.nn.init import normal_`), holds the real one once the build is done."""
    import sys

    import torch

    from bench.worker import model as model_mod

    (tmp_path / "late_import.py").write_text("from torch.nn.init import normal_, zeros_\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "late_import", raising=False)
    real_normal = torch.nn.init.normal_
    with model_mod._constructor_inits_fill_nan():
        import late_import  # type: ignore[import-not-found]

        assert late_import.normal_ is not real_normal  # the filler, while the build runs
        assert torch.isnan(late_import.zeros_(torch.empty(2))).all()
    assert late_import.normal_ is torch.nn.init.normal_ and late_import.zeros_ is torch.nn.init.zeros_
    assert torch.nn.modules.linear.init.kaiming_uniform_ is torch.nn.init.kaiming_uniform_
