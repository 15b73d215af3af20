"""The two sides of validation/interleaved.py, each with its own model, optimizer and data in one
process: gpubench's engine (the worker's own `setup` and `step`: Accelerate, or Fabric), the bare
engine (its clock, loss tracking and memory marks replaced by stand-ins that do nothing), and the
hand-written loop: for the fidelity matrix validation/reference_loop.py (bert-large, the guide's
recipe), for any other matrix validation/model_loop.py (the talk's Fabric loop for a Fabric row)."""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.errors import BadInput
from bench.families.resolve import resolve_model
from bench.planner.matrix import load_matrix, select

MATRIX = "fidelity"
WARMUP_STEPS = 12  # per side, untimed: past the engine's own warm-up (10 steps, 4 at batch 32)


INTERLEAVED_ENGINES = ("accelerate", "fabric", "torch")  # engines whose `setup` returns a loader and a `step(batch)`


def scenario_names(option: str | None, matrix: str = MATRIX) -> list[str]:
    """The matrix's scenarios named in a comma-separated option (all for None); BadInput for a
    name it does not have."""
    only = option.split(",") if option else None
    return [s.name for s in select(load_matrix(matrix).scenarios, only, matrix)]


def scenario(name: str, matrix: str = MATRIX) -> Any:
    """The matrix's scenario `name`; BadInput if it has none."""
    return select(load_matrix(matrix).scenarios, [name], matrix)[0]


def loop_args(sc: Any, model: str, device: str) -> argparse.Namespace:
    """reference_loop.py's arguments for the scenario: the engine's data path (blocking copy)."""
    from validation.reference_loop import parser  # transformers: only in the process that trains

    args = ["--model", model, "--batch-size", str(sc.batch_size), "--precision", sc.precision]
    args += ["--optimizer", sc.optimizer, "--attn-implementation", sc.attn_implementation]
    args += ["--samples", str(sc.samples), "--seq-len", str(sc.seq_len), "--seed", str(sc.seed)]
    args += ["--blocking-copy", "--device", device, "--out", os.devnull, *(["--tf32"] if sc.tf32 else [])]
    return parser().parse_args(args)


SIDES = {
    "engine": "the Accelerate engine",
    "bare-engine": "the Accelerate engine without gpubench's clock, loss tracking and memory marks",
    "loop": "the reference loop (blocking batch copy)",
}


def side_label(side: str, sc: Any, matrix: str = MATRIX) -> str:
    """What a side is, for the result: SIDES's words, or for a matrix other than fidelity the
    scenario's engine and validation/model_loop.py's loop."""
    if matrix == MATRIX or side not in ("engine", "loop", "bare-engine"):
        return SIDES[side]
    if side == "engine":
        return f"gpubench's {sc.engine} engine"
    if side == "bare-engine":
        return f"gpubench's {sc.engine} engine without its clock, loss tracking and memory marks"
    return "validation/model_loop.py's loop" + (" (Fabric's, as the talk's scripts)" if sc.engine == "fabric" else "")


KINDS = {  # side a, side b, and the NVML sampler in side a's blocks (None: as --sampler says)
    "engine": ("engine", "loop", None),
    "control": ("loop", "loop", False),  # A/A: what the method alone gives
    "sampler-cost": ("loop", "loop", True),  # the sampler's cost on a launch-bound step
    "bare-engine": ("bare-engine", "loop", False),  # the engine's library's share (accelerate's, Fabric's)
    "trackers": ("engine", "bare-engine", False),  # gpubench's share
}


class _Nothing:
    """Stands in for the clock, loss tracker and memory marks of a bare engine: every call does nothing."""

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


def make_side(
    side: str, sc: Any, model: str, device: Any, scratch: Path, matrix: str = MATRIX, feed: str = "loader"
) -> Callable[[], None]:
    """One training step of `side` (SIDES) per call, each side with its own model and data."""
    from bench.recipe.engine_registry import ENGINES
    from bench.worker.train_one import build_inputs
    from validation.reference_loop import ReferenceLoop

    steps = iter(range(10**9))
    if side == "loop" and matrix != MATRIX:  # any model family: the loop of validation/model_loop.py
        from validation.model_loop import loop_for, make_step

        step = make_step(sc, model, device, scratch / "loop", loop_for(sc), feed)
        return lambda: step(next(steps))
    if side == "loop":
        loop = ReferenceLoop(loop_args(sc, model, device.type))
        return lambda: loop.step(next(steps))
    inputs = build_inputs(sc, model, device, scratch, {})  # model and data as a worker builds them
    setup = ENGINES[sc.engine].implementation().setup
    if side == "engine":
        engine = setup(inputs)
        inputs.clock.train_begin()
    else:  # the same engine, its clock, loss tracking and memory marks doing nothing
        nothing: Any = _Nothing()
        engine = setup(dataclasses.replace(inputs, clock=nothing, losses=nothing, phases=nothing))
    batches = iter(engine.loader)
    return lambda: engine.step(next(batches))


def check_interleavable(name: str, kind: str, matrix: str = MATRIX) -> Any:
    """The matrix's scenario `name` if `kind` can interleave it (one process, an engine whose
    `setup` gives a loader and a step, no gradient accumulation); BadInput saying why not."""
    base = scenario(name, matrix)
    engines = INTERLEAVED_ENGINES if matrix != MATRIX else ("accelerate",)
    if base.grad_accum_steps != 1 or base.engine not in engines or base.distributed:
        raise BadInput(
            f"scenario {name}: interleaving needs one process, the {' or '.join(engines)} engine "
            "and no gradient accumulation"
        )
    return base


def build_sides(
    name: str,
    kind: str,
    steps: int,
    device: Any,
    scratch: Path,
    first: str = "b",
    matrix: str = MATRIX,
    feed: str = "loader",
) -> tuple[Any, str, dict[str, Any]]:
    """The scenario (with data for `steps` steps a side), its model, and the two sides' step
    functions, side `first` built first (the order can matter: see --build-first)."""
    base = check_interleavable(name, kind, matrix)
    model = resolve_model(base.model, device.type)
    # the blocks time themselves: the scenario's own window (fabric-vit's 100 steps) is not used here
    sc = dataclasses.replace(
        base,
        samples=steps * base.batch_size,
        warmup_steps=min(base.warmup_steps, WARMUP_STEPS),
        window="epoch",
        profile_steps=0,
        profile_memory=False,
    )
    named = dict(zip("ab", KINDS[kind][:2], strict=True))
    order = (first, "b" if first == "a" else "a")
    return sc, model, {side: make_side(named[side], sc, model, device, scratch, matrix, feed) for side in order}
