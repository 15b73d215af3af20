"""Matrix files: expansion of base + scenarios, and every kind of bad input named precisely."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import BASE, write_matrix

from bench.errors import BadInput
from bench.planner.matrix import (
    apply_overrides,
    available_matrices,
    diff_from,
    expand,
    load_matrix,
    resolve_matrix_path,
    select,
)
from bench.recipe.scenario import Scenario


def load_error(path: Path) -> str:
    with pytest.raises(BadInput) as info:
        load_matrix(str(path))
    return str(info.value)


def test_expand_puts_each_scenario_over_the_base_in_file_order(tmp_path: Path) -> None:
    path = write_matrix(
        tmp_path / "m.toml",
        {"zeta": {"description": "first"}, "alpha": {"batch_size": 2, "precision": "bf16"}},
        description="two scenarios",
    )
    m = load_matrix(str(path))
    assert m.name == "m" and m.description == "two scenarios" and m.path == path
    assert m.names() == ["zeta", "alpha"]  # file order, not sorted
    zeta, alpha = m.scenarios
    assert (zeta.batch_size, zeta.precision, zeta.samples, zeta.model) == (4, "fp32", 16, "tiny")
    assert (alpha.batch_size, alpha.precision, alpha.samples) == (2, "bf16", 16)
    assert zeta.description == "first" and alpha.description == ""


def test_fp16_and_bf16_flags_are_accepted_as_the_guide_writes_them(tmp_path: Path) -> None:
    path = write_matrix(tmp_path / "m.toml", {"a": {"fp16": True}, "b": {"bf16": True}, "c": {"fp16": False}})
    assert [s.precision for s in load_matrix(str(path)).scenarios] == ["fp16", "bf16", "fp32"]


SHIPPED = ["full", "quick", "throughput", "nightly", "multi-gpu", "precision", "llm", "fabric-vit", "parity"]


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_matrices_load(name: str) -> None:
    m = load_matrix(name)
    assert m.scenarios and m.description
    assert len(set(m.names())) == len(m.names())


def test_the_parity_matrix_judges_every_row_on_a_learnable_task() -> None:
    """Every row of `parity` trains the same steps on the same learnable samples as its reference."""
    m = load_matrix("parity")
    assert (m.parity_reference, m.parity_seeds) == ("baseline", 3)
    assert {(s.data, s.window, s.samples, s.batch_size, s.learning_rate) for s in m.scenarios} == {
        ("lm-synthetic", "epoch", 1200, 8, 3e-4)
    }


def test_full_matrix_is_the_guides_table() -> None:
    assert load_matrix("full").names() == [
        "baseline",
        "grad-accum",
        "grad-ckpt",
        "fp16",
        "bf16",
        "tf32",
        "adafactor",
        "adam-8bit",
        "workers",
        "compile",
        "combo-fp16",
        "combo-adafactor",
        "combo-8bit",
    ]


def test_unknown_key_in_a_scenario_names_file_scenario_key_and_the_closest_key(tmp_path: Path) -> None:
    path = write_matrix(tmp_path / "m.toml", {"ok": {}, "typo": {"batchsize": 8}})
    assert load_error(path) == (f"{path}: [scenarios.typo]: unknown key 'batchsize' (did you mean 'batch_size'?)")


def test_unknown_key_in_base_and_at_top_level(tmp_path: Path) -> None:
    path = write_matrix(tmp_path / "base.toml", {"a": {}}, base={**BASE, "optimiser": "adamw"})
    assert load_error(path) == f"{path}: [base]: unknown key 'optimiser' (did you mean 'optimizer'?)"
    top = tmp_path / "top.toml"
    top.write_text("[scenario.a]\nbatch_size = 2\n")
    assert load_error(top) == f"{top}: unknown top-level key 'scenario' (did you mean 'scenarios'?)"
    meta = tmp_path / "meta.toml"
    meta.write_text('[matrix]\ntitle = "x"\n[scenarios.a]\n')
    assert load_error(meta).startswith(f"{meta}: [matrix]: unknown key 'title'")


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"batch_size": 0}, "scenario 'bad': batch_size = 0 must be a whole number of at least 1"),
        ({"batch_size": True}, "scenario 'bad': batch_size = True must be a whole number of at least 1"),
        ({"samples": 1.5}, "scenario 'bad': samples = 1.5 must be a whole number of at least 1"),
        ({"dataloader_workers": -1}, "dataloader_workers = -1 must be a whole number of at least 0"),
        (
            {"precision": "bfloat16"},
            "precision = 'bfloat16' is not one of fp32, fp16, bf16, nor 32-true, 16-mixed, bf16-mixed, 16-true, "
            "bf16-true, transformer-engine with engine = \"fabric\"; did you mean 'bf16'?",
        ),
        (
            {"optimizer": "adam"},
            "optimizer = 'adam' is not one of adamw, adamw_fused, adamw_foreach, adafactor, adamw_8bit, "
            "paged_adamw_8bit, adam8bit_manual, sgd; did you mean 'adamw'?",
        ),
        ({"engine": "deepspeed"}, "engine = 'deepspeed' is not one of trainer, accelerate"),
        ({"tf32": "yes"}, "tf32 = 'yes' must be true or false"),
        ({"timeout_s": 0}, "timeout_s = 0 must be a positive number of seconds"),
        ({"inject_fault": "segv"}, "inject_fault = 'segv' is not one of none, hang, sigkill"),
        (
            {"compile_scope": "layer", "compile": True},
            "compile_scope = 'layer' is not one of model, layers; did you mean 'layers'?",
        ),
        ({"compile_scope": "layers"}, "compile_scope = 'layers' needs compile = true"),
        ({"window": "adaptive"}, 'window = \'adaptive\' must be "epoch", "auto" or a whole number of optimizer'),
        ({"window": 0}, 'window = 0 must be "epoch", "auto" or a whole number of optimizer steps (1 or more)'),
        ({"window": True}, "window = True must be"),
        ({"window": 2.5}, "window = 2.5 must be"),
        (
            {"window": 4},
            "window = 4 does not fit in the epoch: 1 warm-up + 4 timed steps, but 16 samples at batch 4 x "
            "accumulation 1 make only 4 optimizer steps; raise samples or lower window",
        ),
    ],
)
def test_bad_values_name_file_scenario_key_and_value(tmp_path: Path, settings: dict, expected: str) -> None:
    path = write_matrix(tmp_path / "m.toml", {"good": {}, "bad": settings})
    message = load_error(path)
    assert message.startswith(f"{path}: scenario 'bad': ")
    assert expected in message


def test_fp16_with_bf16_is_a_contradiction(tmp_path: Path) -> None:
    path = write_matrix(tmp_path / "m.toml", {"both": {"fp16": True, "bf16": True}})
    assert load_error(path) == (
        f"{path}: [scenarios.both]: fp16 and bf16 are both true; they contradict each other "
        '(use precision = "fp16" or "bf16")'
    )
    path = write_matrix(tmp_path / "m2.toml", {"mixed": {"fp16": True, "precision": "bf16"}})
    assert load_error(path) == f'{path}: [scenarios.mixed]: fp16 = true contradicts precision = "bf16"'
    path = write_matrix(tmp_path / "m3.toml", {"a": {}}, base={**BASE, "fp16": True, "bf16": True})
    assert "[base]: fp16 and bf16 are both true" in load_error(path)


def test_toml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text('[base]\nmodel = "tiny"\nbatch_size = \n[scenarios.a]\n')
    message = load_error(path)
    assert message.startswith(f"{path}: not valid TOML: ")
    assert "line 3" in message


def test_warmup_that_leaves_no_timed_steps(tmp_path: Path) -> None:
    # 16 samples at batch 2 x accumulation 2 = 4 optimizer steps; 4 warm-up steps leave none.
    path = write_matrix(tmp_path / "m.toml", {"a": {"batch_size": 2, "grad_accum_steps": 2, "warmup_steps": 4}})
    assert load_error(path) == (
        f"{path}: scenario 'a': warmup_steps = 4 leaves no timed steps: 16 samples at batch 2 x "
        "accumulation 2 make only 4 optimizer steps; raise samples or lower warmup_steps"
    )
    write_matrix(path, {"a": {"batch_size": 2, "grad_accum_steps": 2, "warmup_steps": 3}})
    assert load_matrix(str(path)).scenarios[0].optimizer_steps == 4


def test_no_scenarios_and_wrong_table_types(tmp_path: Path) -> None:
    path = write_matrix(tmp_path / "empty.toml", {})
    assert load_error(path) == f"{path}: no scenarios (add at least one [scenarios.NAME] table)"
    path = tmp_path / "flat.toml"
    path.write_text('scenarios = "baseline"\n')
    assert load_error(path) == f"{path}: [scenarios] must be a table, not str"


def test_scenario_names_are_safe_for_file_names(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text('[scenarios."../escape"]\n')
    assert "scenario '../escape': name = '../escape' must be letters, digits" in load_error(path)


def test_unknown_matrix_name_suggests_the_closest(tmp_path: Path) -> None:
    with pytest.raises(BadInput) as info:
        resolve_matrix_path("quik")
    assert str(info.value) == "unknown matrix 'quik' (did you mean 'quick'?)"
    with pytest.raises(BadInput) as info:
        resolve_matrix_path("zzzzzz")
    assert "choose one of " + ", ".join(available_matrices()) in str(info.value)
    with pytest.raises(BadInput, match="matrix file .*missing.toml does not exist"):
        resolve_matrix_path(str(tmp_path / "missing.toml"))


def test_command_line_overrides_apply_to_every_scenario_and_are_validated(tmp_path: Path) -> None:
    m = load_matrix(str(write_matrix(tmp_path / "m.toml", {"a": {}, "b": {"batch_size": 2}})))
    out = apply_overrides(m.scenarios, {"samples": 32, "seq_len": None, "model": None})
    assert [(s.samples, s.seq_len, s.model) for s in out] == [(32, 32, "tiny"), (32, 32, "tiny")]
    assert apply_overrides(m.scenarios, {"samples": None}) == m.scenarios
    with pytest.raises(BadInput, match=r"unknown setting 'sample' \(did you mean 'samples'\?\)"):
        apply_overrides(m.scenarios, {"sample": 8})
    # an override is validated like a matrix value, naming the scenario
    with pytest.raises(BadInput, match=r"scenario 'a': samples = 0 must be a whole number of at least 1"):
        apply_overrides(m.scenarios, {"samples": 0})
    with pytest.raises(BadInput, match=r"scenario 'a': warmup_steps = 9 leaves no timed steps"):
        apply_overrides(m.scenarios, {"warmup_steps": 9})


def test_select_keeps_matrix_order_and_rejects_unknown_names(tmp_path: Path) -> None:
    m = load_matrix(str(write_matrix(tmp_path / "m.toml", {"baseline": {}, "fp16": {"fp16": True}, "c": {}})))
    assert [s.name for s in select(m.scenarios, ["c", "baseline"], "m.toml")] == ["baseline", "c"]
    assert select(m.scenarios, None, "m.toml") == m.scenarios
    with pytest.raises(BadInput) as info:
        select(m.scenarios, ["baselin"], "m.toml")
    assert str(info.value) == "--only: no scenario 'baselin' in m.toml (did you mean 'baseline'?)"
    with pytest.raises(BadInput, match=r"its scenarios are baseline, fp16, c"):
        select(m.scenarios, ["zzzz"], "m.toml")


def test_diff_from_names_only_the_changed_settings() -> None:
    base = Scenario(name="baseline", samples=16, seq_len=32, warmup_steps=1)
    other = base.replace(name="x", description="other", batch_size=1, grad_accum_steps=4)
    assert diff_from(other, base) == {"batch_size": 1, "grad_accum_steps": 4}
    assert diff_from(base, base) == {}


def test_expand_is_pure_data_in_data_out() -> None:
    data = {"base": {**BASE}, "scenarios": {"a": {"seed": 7}}}
    m = expand(data, origin="inline")
    assert m.scenarios[0].seed == 7 and m.scenarios[0].origin == "inline"
    assert data == {"base": {**BASE}, "scenarios": {"a": {"seed": 7}}}  # input untouched


def test_a_window_is_the_epoch_by_default_auto_or_a_number_of_steps(tmp_path: Path) -> None:
    path = write_matrix(tmp_path / "m.toml", {"a": {}, "b": {"window": "auto"}, "c": {"window": 3}})
    assert [s.window for s in load_matrix(str(path)).scenarios] == ["epoch", "auto", 3]


# -- --window on the command line: parsed, then applied to every scenario like any override ------------
def test_the_window_option_is_auto_epoch_or_a_whole_number() -> None:
    from bench.cli.run_cmd import _window

    assert [_window(t) for t in (None, "auto", "epoch", "50")] == [None, "auto", "epoch", 50]
    for text in ("soon", "-1", "2.5", "\u00b2", ""):
        with pytest.raises(BadInput, match=r"--window .* must be auto, epoch or a whole number of optimizer steps"):
            _window(text)


def test_a_window_override_reaches_every_scenario_multi_process_ones_too(tmp_path: Path) -> None:
    m = load_matrix(str(write_matrix(tmp_path / "m.toml", {"a": {}, "ddp": {"strategy": "ddp", "gpus": 2}})))
    assert [s.window for s in apply_overrides(m.scenarios, {"window": "auto"})] == ["auto", "auto"]
    with pytest.raises(BadInput, match=r"scenario 'a': window = 9 does not fit in the epoch"):
        apply_overrides(m.scenarios, {"window": 9})


# -- [matrix] extends: nightly is full with another window ---------------------------------------------
def test_nightly_is_full_with_an_auto_window_and_room_for_it() -> None:
    full, nightly = load_matrix("full"), load_matrix("nightly")
    assert nightly.names() == full.names()
    for a, b in zip(nightly.scenarios, full.scenarios, strict=True):
        assert diff_from(a, b) == {"window": "auto", "samples": 2048}, a.name
        assert a.description == b.description
    assert {s.window for s in full.scenarios} == {"epoch"}  # full keeps the guide's whole epoch


def test_extends_puts_this_files_base_and_scenarios_over_the_other_matrix(tmp_path: Path) -> None:
    parent = write_matrix(tmp_path / "parent.toml", {"a": {}, "b": {"batch_size": 2, "fp16": True}}, description="p")
    child = tmp_path / "child.toml"
    child.write_text(
        '[matrix]\nextends = "parent.toml"\n[base]\nwindow = "auto"\nsamples = 64\n'
        "[scenarios.b]\nbf16 = true\n[scenarios.c]\nseed = 7\n"
    )
    m = load_matrix(str(child))
    assert m.names() == ["a", "b", "c"] and m.description == "p" and m.name == "child"
    a, b, c = m.scenarios
    assert (a.window, a.samples, a.batch_size, a.precision) == ("auto", 64, 4, "fp32")
    assert (b.batch_size, b.precision) == (2, "bf16")  # its own fp16 = true replaced, not contradicted
    assert (c.seed, c.window, c.model) == (7, "auto", "tiny")
    assert load_matrix(str(parent)).names() == ["a", "b"]  # the other file is unchanged


@pytest.mark.parametrize(
    ("extends", "expected"),
    [
        ('"child.toml"', "[matrix]: extends = 'child.toml' names this file itself"),
        ("3", "[matrix]: extends = 3 must be a matrix name or a .toml file"),
        ('"ful"', "[matrix]: extends = 'ful' is not a shipped matrix (did you mean 'full'?)"),
        ('"missing.toml"', "[matrix]: extends = 'missing.toml': {tmp}/missing.toml does not exist"),
        ('"middle.toml"', "middle.toml, which extends another matrix: one level only"),
    ],
)
def test_what_extends_refuses(tmp_path: Path, extends: str, expected: str) -> None:
    (tmp_path / "middle.toml").write_text('[matrix]\nextends = "full"\n')
    child = tmp_path / "child.toml"
    child.write_text(f"[matrix]\nextends = {extends}\n")
    message = load_error(child)
    assert message.startswith(f"{child}: ") and expected.format(tmp=tmp_path) in message
