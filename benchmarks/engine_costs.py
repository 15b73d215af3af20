"""What each piece of the Accelerate engine's step costs the host, against the reference loop's.

On a launch-bound step (bert-large at batch 4 in fp16 or bf16 on a fast GPU) every microsecond
the host spends is a microsecond of the step, so the engine's extra host work per step, over what
the reference loop (reference_loop.py) does, is what it costs. This builds the worker's own
engine (bench/worker/accelerate_engine.setup) for one fidelity scenario and times, with the device
idle, each piece the loop does not have or does more cheaply, as a median over rounds that take
the pieces in turn (so a CPU that changes speed shifts them all alike):

    loader        next() of accelerate's DataLoaderShard: a batch drawn, collated and copied
                  (blocking), the next one drawn ahead
    loop batch    the loop's batch: two slices copied (blocking); subtracted from `loader`
    lomo check    accelerate's AcceleratedOptimizer.step asks is_lomo_available() twice a step,
                  which searches sys.path (importlib.util.find_spec) each time
    signature     AcceleratedOptimizer.zero_grad reads inspect.signature(optimizer.zero_grad)
    outputs fp32  the model's output converted to fp32 (accelerate's mixed-precision forward)
    accumulate    accelerator.accumulate(model) entered and left
    loss / steps  accelerator.backward divides the loss by the accumulation steps: one kernel
                  forward and one backward (each timed as one small kernel launch)
    loss tracker  gpubench's LossTracker.track
    step clock    gpubench's clock: one CUDA event recorded

Writes OUT/SCENARIO-costs.json (one process a scenario; finished ones are kept when run again)
and OUT/engine-costs.csv, and prints each table; `extra_us` sums accelerate's and gpubench's shares
per step (the loop's own batch taken off accelerate's).

    python benchmarks/engine_costs.py --out DIR --only fp16-b4
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from interleave_sides import scenario, scenario_names
from parts import TIME_LIMIT, each_scenario, expired

from bench.errors import BadInput
from bench.fsio import atomic_write_json, atomic_write_text
from bench.models import resolve_model

HERE = Path(__file__).resolve()
# (name, whose cost, calls of it per training step)
PIECES = [
    ("loader", "accelerate", 1),
    ("loop batch", "loop", -1),  # the loop pays this one: subtracted
    ("lomo check", "accelerate", 2),
    ("signature", "accelerate", 1),
    ("outputs fp32", "accelerate", 1),
    ("accumulate", "accelerate", 1),
    ("loss / steps", "accelerate", 2),
    ("loss tracker", "gpubench", 1),
    ("step clock", "gpubench", 1),
]


def pieces(sc: Any, model: str, device: Any, scratch: Path) -> dict[str, Callable[[], Any]]:
    """One call of each piece, on the engine the worker builds."""
    import torch
    from accelerate.utils.imports import is_lomo_available
    from accelerate.utils.operations import convert_to_fp32
    from transformers.modeling_outputs import SequenceClassifierOutput

    from bench.worker import accelerate_engine
    from bench.worker.run import build_inputs

    inputs = build_inputs(sc, model, device, scratch, {})
    engine = accelerate_engine.setup(inputs)
    loader = engine.loader
    state = {"it": iter(loader)}

    def next_batch() -> Any:
        try:
            return next(state["it"])
        except StopIteration:
            state["it"] = iter(loader)
            return next(state["it"])

    ids = torch.randint(100, 30000, (sc.samples, sc.seq_len))
    labels = torch.zeros(sc.samples, dtype=torch.long)
    rows = slice(0, sc.batch_size)
    half = torch.float16 if sc.precision == "fp16" else torch.bfloat16
    output = SequenceClassifierOutput(
        loss=torch.zeros((), device=device), logits=torch.zeros(sc.batch_size, 2, device=device, dtype=half)
    )
    scalar = torch.zeros((), device=device)
    inner_zero_grad = engine.optimizer.optimizer.zero_grad
    return {
        "loader": next_batch,
        "loop batch": lambda: (ids[rows].to(device), labels[rows].to(device)),
        "lomo check": is_lomo_available,
        "signature": lambda: "set_to_none" in inspect.signature(inner_zero_grad).parameters,
        "outputs fp32": lambda: convert_to_fp32(output),
        "accumulate": lambda: _enter_and_leave(engine.accelerator.accumulate(engine.model)),
        "loss / steps": lambda: scalar / 1,
        "loss tracker": lambda: inputs.losses.track(scalar),
        "step clock": lambda: torch.cuda.Event(enable_timing=True).record() if device.type == "cuda" else None,
    }


def _enter_and_leave(context: Any) -> None:
    with context:
        pass


def time_pieces(calls: dict[str, Callable[[], Any]], rounds: int, n: int, sync: Callable[[], None]) -> dict[str, Any]:
    """Median, p10 and p90 microseconds per call of each piece, over rounds that take them in turn."""
    per_call: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            sync()
            start = time.perf_counter()
            for _ in range(n):
                call()
            per_call[name].append((time.perf_counter() - start) / n * 1e6)
            sync()
    out = {}
    for name, values in per_call.items():
        values.sort()
        out[name] = {
            "median_us": statistics.median(values),
            "p10_us": values[len(values) // 10],
            "p90_us": values[(9 * len(values)) // 10],
        }
    return out


def measure(name: str, a: argparse.Namespace) -> dict[str, Any]:
    import torch

    device = torch.device("cuda:0" if a.device == "cuda" else "cpu")
    base = scenario(name)
    model = resolve_model(base.model, device.type)
    sc = dataclasses.replace(base, samples=64 * base.batch_size)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    with tempfile.TemporaryDirectory() as scratch:
        calls = pieces(sc, model, device, Path(scratch))
        for call in calls.values():  # warm up: first calls import, allocate, build caches
            for _ in range(5):
                call()
        timed = time_pieces(calls, a.rounds, a.calls, sync)
    shares = {"accelerate": 0.0, "gpubench": 0.0}
    for piece, whose, per_step in PIECES:
        if piece == "outputs fp32" and sc.precision == "fp32":
            per_step = 0  # accelerate converts outputs under mixed precision only
        timed[piece]["per_step"] = per_step
        cost = per_step * timed[piece]["median_us"]
        shares["accelerate" if whose == "loop" else whose] += cost  # the loop's batch offsets the loader
    return {
        "scenario": name,
        "model": model,
        "device": a.device,
        "rounds": a.rounds,
        "calls": a.calls,
        "pieces": timed,
        "extra_us": {**shares, "total": sum(shares.values())},
    }


def main() -> int:
    try:
        return _main()
    except BadInput as exc:  # a scenario the matrix does not have, no GPU: one line, exit 2
        print(f"engine_costs.py: error: {exc}", file=sys.stderr)
        return int(exc.exit_code)


def _main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--only", default="fp16-b4,bf16-b4", help="comma-separated scenarios of the fidelity matrix")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--calls", type=int, default=50, help="calls of a piece per timing")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--time-limit", type=float, default=None, help="seconds; then exit 4, run again to go on")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)  # the child: one scenario
    a = p.parse_args()
    if a.rounds < 1 or a.calls < 1:
        p.error("--rounds and --calls must be at least 1")
    a.out.mkdir(parents=True, exist_ok=True)
    if a.one:
        result = measure(a.one, a)
        atomic_write_json(a.out / f"{a.one}-costs.json", result)
        rows = [f"  {k:13s} {v['median_us']:9.1f} us  x{v['per_step']:2d}" for k, v in result["pieces"].items()]
        print(json.dumps(result["extra_us"]) + "\n" + "\n".join(rows), flush=True)
        return 0
    names = scenario_names(a.only)
    deadline = None if a.time_limit is None else time.monotonic() + a.time_limit
    if expired(deadline):
        return TIME_LIMIT
    if a.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise BadInput("no CUDA device here; --device cpu runs the script on the CPU (its figures mean nothing)")
    args = ["--device", a.device, "--rounds", str(a.rounds), "--calls", str(a.calls)]
    code = each_scenario(HERE, names, a.out, args, "costs", deadline)
    return code or write_table(a.out)


def write_table(out: Path) -> int:
    """OUT/engine-costs.csv: a row per scenario and piece, and each scenario's shares per step."""
    import pandas as pd

    whose = {piece: who for piece, who, _ in PIECES}
    rows = []
    for path in sorted(out.glob("*-costs.json")):
        result = json.loads(path.read_text())
        for piece, t in result["pieces"].items():
            rows.append({"scenario": result["scenario"], "piece": piece, "whose": whose[piece], **t})
        for share, us in result["extra_us"].items():
            rows.append({"scenario": result["scenario"], "piece": f"extra per step: {share}", "median_us": us})
    frame = pd.DataFrame(rows)
    atomic_write_text(out / "engine-costs.csv", frame.to_csv(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
