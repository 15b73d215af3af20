"""One planning function for `run`, `list`, `predict` and `fit` (issue 58, item 4): a model a worker
could not build or train as its scenario asks is refused by all four alike, exit 2 with one line,
before any worker starts. Before, `list` took every case below, `predict` crashed on most
(`internal error`, exit 1) and `run` started workers that failed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness import SHORT, error_lines, gpubench_in_process, write_matrix
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def _config(cls: str, drop: tuple[str, ...] = (), **kwargs: Any) -> dict[str, Any]:
    """A tiny config written by transformers' own config class, as a config.json holds it."""
    import transformers

    cfg = getattr(transformers, cls)(**kwargs).to_dict()
    for key in drop:
        cfg.pop(key, None)
    return cfg


LM = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64, "vocab_size": 128}
# case -> (the config, the scenario's own settings, words the refusal says)
CASES: dict[str, tuple[Any, dict[str, Any], str]] = {
    "seq2seq": (
        lambda: _config(
            "T5Config",
            d_model=32,
            d_ff=64,
            num_layers=1,
            num_heads=2,
            vocab_size=128,
            architectures=["T5ForConditionalGeneration"],
        ),
        {},
        "is no task gpubench trains",
    ),
    "does-not-build": (
        lambda: _config("GPT2Config", n_embd=30, n_layer=1, n_head=4, vocab_size=128, n_positions=64),
        {},
        "transformers cannot build GPT2Config",
    ),
    "image-without-size": (
        lambda: _config(
            "ResNetConfig",
            embedding_size=8,
            hidden_sizes=[8, 16],
            depths=[1, 1],
            architectures=["ResNetForImageClassification"],
        ),
        {},
        "needs image_size",
    ),
    "lora-without-linear": (
        lambda: _config(
            "ResNetConfig",
            embedding_size=8,
            hidden_sizes=[8, 16],
            depths=[1, 1],
            image_size=32,
            architectures=["ResNetForImageClassification"],
        ),
        {"peft": "lora"},
        "has no layer to adapt",
    ),
    "task-without-class": (
        lambda: _config("ModernBertConfig", **LM),
        {"task": "causal-lm"},
        "no causal-lm class for model_type modernbert",
    ),
    "pad-outside-vocab": (
        lambda: _config("SmolLM3Config", drop=("pad_token_id",), num_key_value_heads=1, **LM),
        {},
        "pad_token_id 128004 lies outside its vocabulary",
    ),
}
COMMANDS = ("list", "predict", "run", "fit")
GIVEN_AS = ("file", "directory", "model-table")


@pytest.fixture(scope="module")
def configs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return {case: make() for case, (make, _, _) in CASES.items()}


def _matrix(folder: Path, cfg: dict[str, Any], own: dict[str, Any], given_as: str) -> tuple[Path, list[str]]:
    """A matrix of the case's one scenario, its model given as a config file, a directory holding
    config.json, or the matrix's [model] table; (its path, the --model flags)."""
    folder.mkdir(parents=True, exist_ok=True)
    scenarios = {"case": own}
    if given_as == "model-table":
        path = write_matrix(folder / "m.toml", scenarios, base={k: v for k, v in SHORT.items() if k != "model"})
        table = "\n[model]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in cfg.items() if _tomlable(v))
        path.write_text(path.read_text(encoding="utf-8") + table, encoding="utf-8")
        return path, []
    if given_as == "directory":
        (folder / "model").mkdir(exist_ok=True)
        (folder / "model" / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
        model = folder / "model"
    else:
        model = folder / "config.json"
        model.write_text(json.dumps(cfg), encoding="utf-8")
    return write_matrix(folder / "m.toml", scenarios), ["--model", str(model)]


def _tomlable(value: Any) -> bool:
    """What a TOML table holds as JSON writes it (no nulls, lists of one type)."""
    if value is None:
        return False
    if isinstance(value, list):
        return all(isinstance(v, type(value[0])) for v in value) if value else False
    return not isinstance(value, dict)


def _argv(command: str, matrix: Path, model: list[str], out: Path) -> list[str | Path]:
    tail: dict[str, list[str | Path]] = {
        "list": [],
        "predict": [],
        "run": ["--device", "cpu", "--out", out],
        "fit": ["--device", "cpu", "--gpu-memory", "1GB", "--out", out],
    }
    return [command, "--matrix", matrix, *model, *tail[command]]


@pytest.mark.parametrize("case", CASES)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(COMMANDS), given_as=st.sampled_from(GIVEN_AS))
def test_every_command_refuses_the_case_with_one_line_before_any_worker(
    case: str, command: str, given_as: str, configs: dict[str, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    _, own, says = CASES[case]
    folder = tmp_path_factory.mktemp(case)
    matrix, model = _matrix(folder, configs[case], own, given_as)
    done = gpubench_in_process(*_argv(command, matrix, model, folder / "out"))
    assert done.code == 2, (command, done.err)
    lines = error_lines(done.err)
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in done.err, (command, done.err)
    assert not (folder / "out").exists()  # no result directory: nothing started


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_refuses_each_case_alike(command: str, configs: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    """Every case through every command (the property above samples them): the same line from each."""
    for case, (_, own, says) in CASES.items():
        matrix, model = _matrix(tmp_path / case, configs[case], own, "file")
        done = gpubench_in_process(*_argv(command, matrix, model, tmp_path / case / "out"))
        lines = error_lines(done.err)
        assert done.code == 2 and len(lines) == 1 and says in lines[0], (case, done.err)


def test_a_model_that_builds_and_has_its_targets_is_listed_and_predicted(tmp_path: Path) -> None:
    """The checks refuse only what cannot run: GPT-2 with LoRA (Conv1D targets) and a ResNet with its
    image size pass `list` and `predict`."""
    gpt2 = _config("GPT2Config", n_embd=32, n_layer=1, n_head=2, vocab_size=128, n_positions=64)
    matrix, model = _matrix(tmp_path / "gpt2", gpt2, {"peft": "lora"}, "file")
    for command in ("list", "predict"):
        done = gpubench_in_process(command, "--matrix", matrix, *model)
        assert done.code == 0, done.err
    resnet = CASES["lora-without-linear"][0]()
    matrix, model = _matrix(tmp_path / "resnet", resnet, {}, "file")
    done = gpubench_in_process("list", "--matrix", matrix, *model)
    assert done.code == 0, done.err


def test_a_lora_target_name_no_layer_has_is_refused(tmp_path: Path) -> None:
    gpt2 = _config("GPT2Config", n_embd=32, n_layer=1, n_head=2, vocab_size=128, n_positions=64)
    matrix, model = _matrix(tmp_path, gpt2, {"peft": "lora", "lora_targets": "c_attn,q_proj"}, "file")
    done = gpubench_in_process("list", "--matrix", matrix, *model)
    assert done.code == 2 and "lora_targets names q_proj" in done.err and "c_attn, c_fc, c_proj" in done.err
