"""Every engine of the registry (bench/recipe/engine_registry.py) trains the tiny BERT and Llama presets and ends
its epoch when the clock's window closes (bench/worker/engines/): in this process, a few seconds
each. This is the registry's training contract (tests/test_engine_registry.py holds the rest)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from bench.recipe.engine_registry import ENGINES
from bench.recipe.scenario import Scenario
from bench.worker import window

TINY_MODELS = ("tiny", "llama-tiny")  # one preset of each family


def train(tmp_path: Path, engine: str, model: str = "tiny", **settings: Any) -> dict[str, Any]:
    from bench.worker import train_one as run_module  # torch and transformers: only for these tests

    # SGD: the tiny model's 30522-token embedding makes AdamW's step the slowest part on a busy CPU
    sc = Scenario(name="s", model=model, engine=engine, seq_len=16, optimizer="sgd", **settings)
    spec = {"scenario": sc.settings(), "device": "cpu", "model": model, "launched_at": time.time()}
    result = run_module.run(spec, tmp_path)
    assert result["status"] == "ok", result["reason"]
    return dict(result["figures"])


@pytest.mark.parametrize("model", TINY_MODELS)
@pytest.mark.parametrize("engine", ENGINES)
def test_a_window_of_n_steps_ends_the_epoch_there(tmp_path: Path, engine: str, model: str) -> None:
    """64 steps in the epoch; 2 warm-up + 5 timed steps run, and the whole-loop figure counts what
    ran (7 steps of 2 samples), not the epoch."""
    f = train(tmp_path, engine, model, batch_size=2, samples=128, warmup_steps=2, window=5)
    assert (f["window_stop"], f["window_steps"], f["window_samples"]) == ("steps", 5, 10)
    assert f["samples_per_s"] == pytest.approx(10 / f["window_s"])
    assert f["trainer_samples_per_s"] * f["trainer_runtime_s"] == pytest.approx(14)


def test_auto_ends_the_epoch_at_a_check_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no time allowed (MAX_S = 0) "auto" stops at its first check point, whatever the CPU's
    noise does to the interval: MIN_STEPS (10) timed steps of the 63 (the engines stop alike: above)."""
    monkeypatch.setattr(window, "MAX_S", 0.0)
    f = train(tmp_path, "accelerate", batch_size=1, samples=64, warmup_steps=1, window="auto")
    assert f["window_stop"] in ("ci", "max_time") and f["window_steps"] == window.MIN_STEPS
    assert f["window_samples"] == window.MIN_STEPS and f["window_ci_pct"] is not None
    assert f["trainer_samples_per_s"] * f["trainer_runtime_s"] == pytest.approx(1 + window.MIN_STEPS)
