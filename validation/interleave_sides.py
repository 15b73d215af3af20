"""The two sides of benchmarks/interleaved.py, each with its own model, optimizer and data in one
process: gpubench's Accelerate engine (the worker's own `setup` and `step`), variants of it (SIDES:
its trackers replaced by stand-ins that do nothing, the trackers as they were, accelerate's
per-step code taken out), and the reference loop (reference_loop.py)."""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench.errors import BadInput
from bench.matrix import load_matrix, select
from bench.models import resolve_model
from bench.worker.tracking import LossTracker

MATRIX = "fidelity"
WARMUP_STEPS = 12  # per side, untimed: past the engine's own warm-up (10 steps, 4 at batch 32)


def scenario_names(option: str | None) -> list[str]:
    """The fidelity matrix's scenarios named in a comma-separated option (all for None); BadInput
    for a name it does not have."""
    only = option.split(",") if option else None
    return [s.name for s in select(load_matrix(MATRIX).scenarios, only, MATRIX)]


def scenario(name: str) -> Any:
    """The fidelity matrix's scenario `name`; BadInput if it has none."""
    return select(load_matrix(MATRIX).scenarios, [name], MATRIX)[0]


def loop_args(sc: Any, model: str, device: str) -> argparse.Namespace:
    """reference_loop.py's arguments for the scenario: the engine's data path (blocking copy)."""
    from reference_loop import parser

    args = ["--model", model, "--batch-size", str(sc.batch_size), "--precision", sc.precision]
    args += ["--optimizer", sc.optimizer, "--attn-implementation", sc.attn_implementation]
    args += ["--samples", str(sc.samples), "--seq-len", str(sc.seq_len), "--seed", str(sc.seed)]
    args += ["--blocking-copy", "--device", device, "--out", os.devnull, *(["--tf32"] if sc.tf32 else [])]
    return parser().parse_args(args)


SIDES = {
    "engine": "the Accelerate engine",
    "bare-engine": "the Accelerate engine without gpubench's clock, loss tracking and memory marks",
    "loop": "the reference loop (blocking batch copy)",
    "old-trackers": "the Accelerate engine with gpubench's trackers as they were up to 70eb50d (a loss check "
    "of four kernels and a forward hook, every step)",
    "raw-accelerate": "the Accelerate engine's prepared model, optimizer and data, stepped without accelerate's "
    "per-step code (DataLoader, forward wrapper, optimizer wrapper, backward, accumulate), trackers kept",
}
KINDS = {  # side a, side b, and the NVML sampler in side a's blocks (None: as --sampler says)
    "engine": ("engine", "loop", None),
    "control": ("loop", "loop", False),  # A/A: what the method alone gives
    "sampler-cost": ("loop", "loop", True),  # the sampler's cost on a launch-bound step
    "bare-engine": ("bare-engine", "loop", False),  # accelerate's share of the engine's cost
    "trackers": ("engine", "bare-engine", False),  # gpubench's share
    "tracker-change": ("old-trackers", "engine", False),  # what the trackers that cost no kernel changed
    "accelerate-steps": ("engine", "raw-accelerate", False),  # accelerate's per-step code, in place
}


class _Nothing:
    """Stands in for the clock, loss tracker and memory marks of a bare engine: every call does nothing."""

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


class KernelLossTracker(LossTracker):
    """The loss tracker up to 70eb50d, kept to measure the change: a non-finite count of four
    kernels (isfinite, not, sum, add) every step."""

    def track(self, loss: Any) -> None:
        loss = loss.detach().float()
        bad = (~torch.isfinite(loss)).sum()
        self.last = loss
        self.nonfinite = bad if self.nonfinite is None else self.nonfinite + bad


def raw_accelerate_step(engine: Any) -> Callable[[], None]:
    """One step of the engine's own prepared model, optimizer and data (so the same memory, the same
    trackers), with each piece of accelerate's per-step code replaced by what the reference loop
    does: the batch sliced from the data set and copied (blocking, as accelerate's default), the
    model's own forward under torch.autocast (not accelerate's wrapper, which also converts the
    outputs to fp32), `loss.backward()` (through the GradScaler for fp16), the bare optimizer, no
    `accumulate`."""
    inputs, model, accelerator = engine.inputs, engine.model, engine.accelerator
    # accelerate keeps the model's own forward when it wraps it in autocast; it does not wrap for
    # fp32, nor for fp16 on the CPU, so autocast here only where it did
    wrapped = hasattr(model, "_original_forward")
    forward = model._original_forward if wrapped else model.forward
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(accelerator.mixed_precision) if wrapped else None
    optimizer = engine.optimizer.optimizer  # inside AcceleratedOptimizer
    scaler = accelerator.scaler  # fp16 on the GPU only
    sc, device, phases = inputs.sc, inputs.device, inputs.phases
    steps = iter(range(10**9))

    def step() -> None:
        i = next(steps)
        batch = {k: v.to(device) for k, v in inputs.dataset[i * sc.batch_size : (i + 1) * sc.batch_size].items()}
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = forward(**batch).loss
        phases.mark("after_forward")
        (loss if scaler is None else scaler.scale(loss)).backward()
        phases.mark("after_backward")
        if scaler is None:
            optimizer.step()
        else:
            scaler.step(optimizer)
            scaler.update()
        phases.mark_optimizer_step(optimizer)
        optimizer.zero_grad(set_to_none=True)
        inputs.losses.track(loss)
        inputs.clock.step_end()

    return step


def make_side(side: str, sc: Any, model: str, device: Any, scratch: Path) -> Callable[[], None]:
    """One training step of `side` (SIDES) per call, each side with its own model and data."""
    from reference_loop import ReferenceLoop

    from bench.worker import accelerate_engine
    from bench.worker.data import make_dataset
    from bench.worker.inputs import EngineInputs
    from bench.worker.model import build_model
    from bench.worker.precision import set_tf32
    from bench.worker.run import build_inputs

    if side == "loop":
        loop = ReferenceLoop(loop_args(sc, model, device.type))
        steps = iter(range(10**9))
        return lambda: loop.step(next(steps))
    if side in ("engine", "old-trackers", "raw-accelerate"):
        inputs = build_inputs(sc, model, device, scratch, {})
        if side == "old-trackers":  # the loss check every step, and the forward hook left on
            inputs = dataclasses.replace(inputs, losses=KernelLossTracker())
            inputs.model.register_forward_hook(lambda *_: inputs.phases.mark("after_forward"))
        engine = accelerate_engine.setup(inputs)
        inputs.clock.train_begin()
        if side == "raw-accelerate":
            return raw_accelerate_step(engine)
    else:
        set_tf32(sc.tf32)
        torch.manual_seed(sc.seed)
        bare_model = build_model(model, device, sc.attn_implementation)
        dataset = make_dataset(sc.samples, sc.seq_len, bare_model.config.vocab_size, sc.seed, sc.data_source)
        nothing: Any = _Nothing()
        engine = accelerate_engine.setup(
            EngineInputs(sc, bare_model, dataset, device, nothing, nothing, nothing, scratch)
        )
    batches = iter(engine.loader)
    return lambda: engine.step(next(batches))


def build_sides(
    name: str, kind: str, steps: int, device: Any, scratch: Path, first: str = "b"
) -> tuple[Any, str, dict[str, Any]]:
    """The scenario (with data for `steps` steps a side), its model, and the two sides' step
    functions, side `first` built first (the order can matter: see --build-first)."""
    base = scenario(name)
    if base.grad_accum_steps != 1 or base.engine != "accelerate":
        raise BadInput(f"scenario {name}: interleaving needs the accelerate engine and no gradient accumulation")
    model = resolve_model(base.model, device.type)
    sc = dataclasses.replace(base, samples=steps * base.batch_size, warmup_steps=min(base.warmup_steps, WARMUP_STEPS))
    named = dict(zip("ab", KINDS[kind][:2], strict=True))
    order = (first, "b" if first == "a" else "a")
    return sc, model, {side: make_side(named[side], sc, model, device, scratch) for side in order}
