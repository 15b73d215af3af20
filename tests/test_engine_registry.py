"""The engine registry's contract (bench/recipe/engine_registry.py), walked row by row: every row names a module
with `train`, its rules refuse what the tables below say (and every rule has a case here), a missing
package is a skip that names it, and its rank rule combines the per-rank figure as it says. That
every engine trains the tiny BERT and Llama presets is tests/test_engines.py, parametrized from the
same registry."""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
import sys
from typing import Any

import pytest

from bench.errors import BadInput
from bench.planner.rules import check, needs_cuda
from bench.recipe import engine_registry as engines
from bench.recipe.engine_registry import ENGINES, RANK_RULES, Engine
from bench.recipe.scenario import Scenario

ROWS = list(ENGINES.values())
FSDP = {"strategy": "fsdp", "gpus": 2}

# (engine, settings, the scenario field its rules refuse, or None: the scenario is valid)
REFUSALS: list[tuple[str, dict[str, Any], str | None]] = [
    ("trainer", {**FSDP, "model": "llama-tiny", "optimizer": "adam8bit_manual"}, "optimizer"),
    ("trainer", {**FSDP, "optimizer": "adamw_foreach"}, "optimizer"),
    ("trainer", {**FSDP, "optimizer": "adamw"}, None),  # an optimizer the Trainer builds
    ("trainer", {"strategy": "ddp", "gpus": 2, "optimizer": "adamw_foreach"}, None),
    ("trainer", {"optimizer": "adamw_foreach"}, None),
    ("trainer", {**FSDP, "model": "llama-tiny", "optimizer": "adamw", "tp": 2}, "tp"),  # a device mesh
    ("accelerate", {**FSDP, "model": "llama-tiny", "tp": 2}, None),
    ("accelerate", {**FSDP, "model": "llama-tiny", "optimizer": "adam8bit_manual"}, None),
    ("accelerate", {**FSDP, "optimizer": "adamw_foreach"}, None),
    ("fabric", {"strategy": "deepspeed", "zero_stage": 2, "gpus": 2, "grad_accum_steps": 2}, "grad_accum_steps"),
    ("fabric", {"strategy": "deepspeed", "zero_stage": 2, "gpus": 2}, None),
    ("fabric", {"strategy": "ddp", "gpus": 2, "grad_accum_steps": 2}, None),  # no_backward_sync
    ("torch", FSDP, "strategy"),
    ("torch", {"strategy": "deepspeed", "zero_stage": 2, "gpus": 2}, "strategy"),
    ("torch", {**FSDP, "model": "llama-tiny", "tp": 2}, "strategy"),  # a device mesh is FSDP2's
    ("torch", {"strategy": "ddp", "gpus": 2, "grad_accum_steps": 2}, None),  # DDP's no_sync
]
# (engine, settings, the start of needs_cuda's reason, or None: it runs on the CPU)
CUDA_ONLY: list[tuple[str, dict[str, Any], str | None]] = [
    ("trainer", FSDP, "the Trainer runs FSDP only on accelerators"),
    ("trainer", {**FSDP, "offload": "params"}, "the Trainer runs FSDP only on accelerators"),  # before offload's
    ("trainer", {"strategy": "ddp", "gpus": 2}, None),
    ("accelerate", FSDP, None),
    ("accelerate", {**FSDP, "offload": "params"}, "offloading to the CPU"),  # not an engine rule
    ("fabric", FSDP, "Lightning Fabric runs FSDP only on GPUs"),
    ("fabric", {"precision": "16-mixed"}, "Lightning Fabric trains 16-mixed as bf16-mixed on the CPU"),
    ("fabric", {"precision": "transformer-engine"}, "transformer-engine's fp8 layers need an NVIDIA GPU"),
    ("fabric", {"strategy": "ddp", "gpus": 2, "precision": "bf16-true"}, None),
    ("accelerate", {"precision": "fp16"}, None),
    ("torch", {"precision": "fp16"}, None),  # CPU autocast and GradScaler
]


def scenario(engine: str, settings: dict[str, Any]) -> Scenario:
    return check(Scenario(name="s", engine=engine, **settings))


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_every_row_names_an_implementation_with_train(row: Engine) -> None:
    assert ENGINES[row.name] is row and engines.engine(row.name) is row
    assert callable(row.implementation().train)
    assert row.rank_rule in RANK_RULES
    for module in row.preload:  # found, not imported (the Trainer's import alone takes seconds)
        assert importlib.util.find_spec(module) is not None, module
    for rule in row.rules:
        assert rule.key in Scenario.__dataclass_fields__, rule.key


def test_an_unknown_engine_is_named_with_the_closest() -> None:
    with pytest.raises(ValueError, match="unknown engine 'trainr'.*did you mean 'trainer'"):
        engines.engine("trainr")
    with pytest.raises(BadInput, match=f"engine = 'trainr' is not one of {', '.join(ENGINES)}; did you mean"):
        check(Scenario(name="s", engine="trainr"))


@pytest.mark.parametrize(("engine", "settings", "refused"), REFUSALS)
def test_an_engines_rules_refuse_what_it_cannot_run(engine: str, settings: dict[str, Any], refused: str) -> None:
    if refused is None:
        sc = scenario(engine, settings)
        assert ENGINES[engine].refusal(sc) is None
        return
    with pytest.raises(BadInput) as error:
        scenario(engine, settings)
    value = settings[refused]
    rule = next(r for r in ENGINES[engine].rules if r.key == refused and not r.cuda_only)
    assert str(error.value) == f"scenario 's': {refused} = {value!r} {rule.why}"


@pytest.mark.parametrize(("engine", "settings", "reason"), CUDA_ONLY)
def test_an_engines_cuda_rules_are_skips_on_the_cpu(engine: str, settings: dict[str, Any], reason: str) -> None:
    why = needs_cuda(scenario(engine, settings))
    assert why is None if reason is None else why is not None and why.startswith(reason)


def _fired() -> set[tuple[str, str]]:
    """(engine, rule.why) of every rule that a case of the tables trips, read from what it says."""
    out = set()
    for engine, settings, refused in REFUSALS:
        if refused is not None:
            with pytest.raises(BadInput) as error:
                scenario(engine, settings)
            out |= {(engine, r.why) for r in ENGINES[engine].rules if str(error.value).endswith(r.why)}
    for engine, settings, _ in CUDA_ONLY:
        why = needs_cuda(scenario(engine, settings))
        out |= {(engine, r.why) for r in ENGINES[engine].rules if r.cuda_only and r.why == why}
    return out


def test_every_rule_of_every_engine_has_a_case_in_the_tables() -> None:
    """A new rule (or engine) comes with a row in REFUSALS or CUDA_ONLY."""
    every = {(row.name, rule.why) for row in ROWS for rule in row.rules}
    assert every - _fired() == set()


def test_a_missing_engine_package_is_a_skip_that_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from bench.worker.skips import Skip, check_runnable

    row = dataclasses.replace(ENGINES["accelerate"], package="no-such-engine-pkg")
    monkeypatch.setitem(ENGINES, "accelerate", row)
    with pytest.raises(Skip, match='engine = "accelerate" needs the no-such-engine-pkg package .*pip install no-such'):
        check_runnable(Scenario(name="s", engine="accelerate"), torch.device("cpu"))


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_the_rank_rule_combines_the_engines_own_throughput(row: Engine) -> None:
    from bench.worker.ranks import combine_ranks

    rank = {"window_s": 1.0, "window_samples": 8, "samples_per_s": 8.0, "trainer_samples_per_s": 10.0}
    row_figures = combine_ranks([dict(rank), dict(rank)], row.name)
    assert row_figures["trainer_samples_per_s"] == {"global": 10.0, "sum": 20.0}[row.rank_rule]


def test_the_registry_and_the_scenario_import_no_torch() -> None:
    """The parent validates engine names without torch (STYLE.md)."""
    code = "import sys, bench.recipe.engine_registry, bench.recipe.scenario; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False"
