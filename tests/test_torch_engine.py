"""The plain PyTorch engine (bench/worker/engines/plain.py): the same recipe as the Accelerate loop
to the same losses, micro-batch by micro-batch, with accumulation and in each mixed precision; its
fp16 steps go through a GradScaler. That it trains the tiny presets and stops with the window is
the registry's contract (tests/test_engines.py); DDP over two gloo ranks is tests/test_multigpu.py."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from bench.recipe.scenario import Scenario

RECIPE: dict[str, Any] = {"model": "llama-tiny", "seq_len": 16, "optimizer": "adamw", "batch_size": 2}


@pytest.fixture(autouse=True)
def fresh_accelerator_state() -> Any:
    """accelerate keeps one mixed precision per process: each test sets up its own."""
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


def loops(tmp_path: Path, **fields: Any) -> dict[str, Any]:
    import torch

    from bench.worker import train_one as run_module
    from bench.worker.engines import accelerate, plain

    out = {}
    for engine, module in (("accelerate", accelerate), ("torch", plain)):
        sc = Scenario(name="s", engine=engine, **{**RECIPE, **fields}, samples=64, warmup_steps=1)
        inputs = run_module.build_inputs(sc, sc.model, torch.device("cpu"), tmp_path / engine, {})
        out[engine] = module.setup(inputs)  # type: ignore[attr-defined]
    return out


@pytest.mark.parametrize(("precision", "accumulation"), [("fp32", 2), ("bf16", 1), ("fp16", 1)])
def test_torch_and_accelerate_train_the_same_recipe_alike(tmp_path: Path, precision: str, accumulation: int) -> None:
    """Both loops set up on the same recipe (seed, model, data order) in this process and stepped in
    turn: the same losses micro-batch by micro-batch, all finite, and the model trained. Speeds are
    compared side by side in a benchmark (validation/interleaved.py), not here."""
    built = loops(tmp_path, precision=precision, grad_accum_steps=accumulation)
    batches = {engine: iter(loop.loader) for engine, loop in built.items()}
    for _ in range(8):
        for engine, loop in built.items():
            loop.step(next(batches[engine]))
    losses = {engine: [float(v) for v in loop.inputs.losses.losses] for engine, loop in built.items()}
    assert len(losses["torch"]) == 8 and all(math.isfinite(v) for v in losses["torch"] + losses["accelerate"])
    assert losses["torch"] == pytest.approx(losses["accelerate"], rel=1e-4)
    assert losses["torch"][-1] != pytest.approx(losses["torch"][0], rel=1e-6)  # it trained
    assert (built["torch"].scaler is not None) == (precision == "fp16")


def test_the_plain_loop_has_no_library_between_the_model_and_the_loop(tmp_path: Path) -> None:
    """What the row claims: the model itself (no accelerate or Fabric wrapper), torch's optimizer
    and DataLoader, the loss handed to backward undivided without accumulation."""
    import torch

    loop = loops(tmp_path)["torch"]
    assert isinstance(loop.model, torch.nn.Module) and type(loop.model).__module__.startswith("transformers.")
    assert type(loop.optimizer).__module__.startswith("torch.optim")
    assert type(loop.loader) is torch.utils.data.DataLoader
    seen = []
    loop.inputs.losses.track = lambda loss: seen.append(loss.grad_fn)  # type: ignore[method-assign]
    loop.step(next(iter(loop.loader)))
    assert seen and "Div" not in type(seen[0]).__name__
