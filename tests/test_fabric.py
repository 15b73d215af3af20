"""The Lightning Fabric engine (bench/worker/engines/fabric.py) and its precisions
(bench/recipe/precisions.py): Fabric and the Accelerate loop train the same recipe to the same losses at
a comparable rate; Fabric reads a torchrun job from its environment and wraps the model in DDP;
Fabric's precision strings are taken, stored and refused at plan time. That it trains the tiny
presets and stops with the window is the registry's contract (tests/test_engines.py)."""

from __future__ import annotations

import math
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.errors import BadInput
from bench.measure.mfu import precision_class
from bench.planner.rules import check, needs_cuda
from bench.recipe.engine_registry import ENGINE_PRECISIONS, ENGINES, precision_half_weights, precision_matmuls
from bench.recipe.precisions import PRECISIONS, TO_FABRIC
from bench.recipe.scenario import Scenario

pytest.importorskip("lightning_fabric")

RECIPE: dict[str, Any] = {"model": "llama-tiny", "seq_len": 16, "optimizer": "sgd", "batch_size": 2}


def train(tmp_path: Path, engine: str, **fields: Any) -> dict[str, Any]:
    from bench.worker import train_one as run_module  # torch and transformers: only for these tests

    sc = Scenario(name="s", engine=engine, **{**RECIPE, **fields})
    spec = {"scenario": sc.settings(), "device": "cpu", "model": sc.model, "launched_at": time.time()}
    result = run_module.run(spec, tmp_path)
    assert result["status"] == "ok", result["reason"]
    return dict(result["figures"])


def test_fabric_and_accelerate_train_the_same_recipe_alike(tmp_path: Path) -> None:
    """Both loops set up on the same recipe (seed, model, data order, accumulation 2) in this process
    and stepped in turn, a micro-batch each: the same losses micro-batch by micro-batch (the loss is
    scaled by 1/accumulation in both, the same learning-rate schedule), all finite. Their speeds are
    compared side by side in a benchmark, not here: a timed assertion fails on a loaded machine."""
    import torch

    from bench.worker import train_one as run_module
    from bench.worker.engines import accelerate, fabric

    loops = {}
    for engine, module in (("accelerate", accelerate), ("fabric", fabric)):
        sc = Scenario(name="s", engine=engine, **RECIPE, samples=64, grad_accum_steps=2, warmup_steps=1)
        inputs = run_module.build_inputs(sc, sc.model, torch.device("cpu"), tmp_path, {})
        loops[engine] = module.setup(inputs)  # type: ignore[attr-defined]
    batches = {engine: iter(loop.loader) for engine, loop in loops.items()}
    for _ in range(8):  # 4 optimizer steps
        for engine, loop in loops.items():
            loop.step(next(batches[engine]))
    losses = {engine: [float(v) for v in loop.inputs.losses.losses] for engine, loop in loops.items()}
    assert len(losses["fabric"]) == 8 and all(math.isfinite(v) for v in losses["fabric"] + losses["accelerate"])
    assert losses["fabric"] == pytest.approx(losses["accelerate"], rel=1e-5)
    assert losses["fabric"][-1] != pytest.approx(losses["fabric"][0], rel=1e-6)  # it trained


@pytest.mark.parametrize("accumulation", [1, 3])
def test_fabric_hands_backward_the_loss_itself_unless_it_accumulates(tmp_path: Path, accumulation: int) -> None:
    """As the talk's scripts: no division (one more kernel launch a step) without accumulation;
    with it, the loss scaled by 1/accumulation, as accelerate's backward scales it."""
    import torch

    from bench.worker import train_one as run_module
    from bench.worker.engines import fabric

    sc = Scenario(name="s", engine="fabric", **RECIPE, samples=16, grad_accum_steps=accumulation, warmup_steps=1)
    loop = fabric.setup(run_module.build_inputs(sc, sc.model, torch.device("cpu"), tmp_path, {}))
    handed: list[Any] = []
    backward = loop.fabric.backward
    loop.fabric.backward = lambda tensor, *a, **k: handed.append(tensor) or backward(tensor, *a, **k)
    loop.step(next(iter(loop.loader)))
    (tensor,) = handed
    grad_fn = type(tensor.grad_fn).__name__
    assert ("Div" in grad_fn) is (accumulation > 1), grad_fn
    assert float(tensor) * accumulation == pytest.approx(float(loop.inputs.losses.losses[-1]), rel=1e-6)


def test_fabric_reads_a_torchrun_job_from_its_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One rank of a torchrun job (its environment, gloo): Fabric's DDP strategy wraps the model in
    DistributedDataParallel and skips the all-reduce inside the accumulation (no_backward_sync)."""
    import torch.distributed as dist

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": "0"}
    for key, value in {**env, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}.items():
        monkeypatch.setenv(key, value)
    try:
        f = train(tmp_path, "fabric", strategy="ddp", samples=16, grad_accum_steps=2, warmup_steps=1, window=2)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    assert f["parallel_wrapper"] == "DistributedDataParallel"
    assert (f["window_steps"], f["window_samples"], f["loss_finite"]) == (2, 8, True)


# -- precisions, at plan time ---------------------------------------------------------------------
@pytest.mark.parametrize(("written", "stored"), [("32-true", "fp32"), ("16-mixed", "fp16"), ("bf16-mixed", "bf16")])
def test_fabrics_spelling_of_gpubenchs_precisions_is_stored_as_gpubenchs(written: str, stored: str) -> None:
    assert check(Scenario(name="s", engine="fabric", precision=written)).precision == stored
    assert TO_FABRIC[stored] == written  # and the loop hands Fabric its own spelling back
    assert check(Scenario(name="s", engine="fabric", precision=stored)).precision == stored


def test_fabrics_own_precisions_are_stored_as_written_and_known_downstream() -> None:
    sc = check(Scenario(name="s", engine="fabric", precision="bf16-true"))
    assert sc.precision == "bf16-true" and needs_cuda(sc) is None  # half weights train on the CPU
    assert (precision_matmuls("bf16-true"), precision_half_weights("bf16-true")) == ("bf16", True)
    assert (precision_class("16-true", False), precision_class("transformer-engine", False)) == ("fp16", "fp8")
    assert (precision_class("bf16", True), precision_half_weights("bf16")) == ("bf16", False)
    why = needs_cuda(check(Scenario(name="s", engine="fabric", precision="transformer-engine")))
    assert why is not None and why.startswith("transformer-engine's fp8 layers need an NVIDIA GPU")


def test_fabrics_strings_on_another_engine_are_refused_naming_the_engine() -> None:
    with pytest.raises(BadInput) as mixed:
        check(Scenario(name="s", engine="accelerate", precision="bf16-mixed"))
    assert str(mixed.value) == (
        "scenario 's': precision = 'bf16-mixed' is the Fabric loop's spelling (engine = \"fabric\"); "
        'the Accelerate loop\'s is "bf16"'
    )
    with pytest.raises(BadInput) as true:
        check(Scenario(name="s", engine="trainer", precision="16-true"))
    assert str(true.value) == (
        "scenario 's': precision = '16-true' is the Fabric loop's own precision (engine = \"fabric\"); "
        "the Trainer takes fp32, fp16, bf16"
    )


KNOWN = {*PRECISIONS, *(p.name for p in ENGINE_PRECISIONS)}


@settings(max_examples=30, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=12).filter(lambda s: s not in KNOWN))
def test_a_precision_no_engine_knows_is_one_line_naming_every_choice(value: str) -> None:
    """(A control character is refused before the choices: tests/test_terminal_text.py.)"""
    for engine in ENGINES:
        with pytest.raises(BadInput) as error:
            check(Scenario(name="s", engine=engine, precision=value))
        message = str(error.value)
        assert "\n" not in message.replace(value, "")
        assert message.startswith(f"scenario 's': precision = {value!r} is not one of fp32, fp16, bf16, nor 32-true")
        assert 'transformer-engine with engine = "fabric"' in message


def test_a_missing_transformer_engine_is_a_skip_naming_the_package() -> None:
    from bench.worker.skips import optional_packages

    sc = check(Scenario(name="s", engine="fabric", precision="transformer-engine"))
    assert ("transformer_engine", 'precision = "transformer-engine"', "transformer-engine") in optional_packages(sc)
    assert ("lightning_fabric", 'engine = "fabric"', "lightning-fabric") in optional_packages(sc)


def test_half_weights_are_not_predicted_but_said_so() -> None:
    from bench.predict.pred_columns import predicted_columns
    from bench.predict.predictions import prediction_of

    sc = check(Scenario(name="s", engine="fabric", precision="bf16-true", model="tiny"))
    with pytest.raises(BadInput, match="precision = 'bf16-true' keeps the parameters in half precision"):
        prediction_of(sc, "tiny")
    assert predicted_columns(sc, "tiny", {}) == {}
    assert predicted_columns(sc.replace(precision="bf16"), "tiny", {})["pred_peak_allocated_mb"] > 0


def test_the_fabric_vit_matrix_is_the_talks_table() -> None:
    from bench.planner.matrix import load_matrix

    rows = {sc.name: sc for sc in load_matrix("fabric-vit").scenarios}
    assert {n: (sc.engine, sc.precision, sc.compile, sc.strategy) for n, sc in rows.items()} == {
        "plain": ("torch", "fp32", False, "none"),
        "compile": ("torch", "fp32", True, "none"),
        "fabric-32": ("fabric", "fp32", False, "none"),
        "fabric-bf16": ("fabric", "bf16", False, "none"),
        "fabric-fp16": ("fabric", "fp16", False, "none"),
        "fabric-ddp": ("fabric", "bf16", False, "ddp"),
        "fabric-fsdp": ("fabric", "bf16", False, "fsdp"),
        "fabric-bf16-b64": ("fabric", "bf16", False, "none"),
        "accelerate-32": ("accelerate", "fp32", False, "none"),  # not the talk's: what accelerate adds
        "tv-plain": ("torch", "fp32", False, "none"),  # the talk's own model: torchvision's vit_b_16
        "tv-fabric-bf16": ("fabric", "bf16", False, "none"),
    }
    assert {(sc.model, sc.optimizer, sc.batch_size) for n, sc in rows.items() if n != "fabric-bf16-b64"} == {
        ("vit-b16", "adamw", 16),
        ("tv-vit-b16", "adamw", 16),
    }
    assert {n for n, sc in rows.items() if sc.model == "tv-vit-b16"} == {"tv-plain", "tv-fabric-bf16"}
    assert {sc.dataloader_workers for sc in rows.values()} == {4}  # the talk's loaders
    assert rows["fabric-bf16-b64"].batch_size == 64 and rows["fabric-ddp"].gpus == rows["fabric-fsdp"].gpus == "all"


def test_fabric_never_asks_torch_for_the_legacy_matmul_precision(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a CUDA device Fabric's accelerator set-up calls `_check_cuda_matmul_precision`, which asks
    torch.get_float32_matmul_precision(): torch 2.11 raises there after gpubench set TF32 per backend
    (every H200 Fabric row failed). The engine turns the hint off; the set-up path finds it by name."""
    import inspect

    import torch
    from lightning_fabric.accelerators import cuda

    from bench.worker.engines import fabric

    def raises() -> str:
        raise RuntimeError("PyTorch is checking the matmul precision without a specific backend name")

    monkeypatch.setattr(torch, "get_float32_matmul_precision", raises)
    shipped = getattr(cuda, "gpubench_shipped_hint", cuda._check_cuda_matmul_precision)  # another test set Fabric up
    monkeypatch.setattr(cuda, "_check_cuda_matmul_precision", shipped)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(cuda, "_is_ampere_or_later", lambda device=None: True)
    with pytest.raises(RuntimeError, match="without a specific backend"):
        shipped.__wrapped__(torch.device("cuda", 0))  # the hint as Fabric ships it
    fabric.no_precision_hint()
    cuda._check_cuda_matmul_precision(torch.device("cuda", 0))  # what CUDAAccelerator.setup_device calls
    assert "_check_cuda_matmul_precision(device)" in inspect.getsource(cuda.CUDAAccelerator.setup_device)
