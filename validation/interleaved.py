"""The Accelerate engine against the hand-written loop in one process, in alternating blocks.

On a host whose CPU speed swings from one few-second window to the next, a launch-bound step
follows it, and an engine run set beside a loop run a minute later differs by up to 20% either
way (measured on the H200 virtual machines; the data are archived at the tag lab-h200-2026-11).
Here both sides live in one process on one GPU and take turns every `--block-steps` steps (about
half a second at batch 4):

- the engine side is gpubench's own Accelerate engine (bench/worker/engines/accelerate.py: the
  same `setup` and `step` a worker runs, with the worker's clock, loss tracker and memory hooks),
  with the NVML memory sampler (bench/measure/nvml.py, 200 Hz, in a process of its own as in a
  run) switched on for the engine's blocks only;
- the loop side is validation/reference_loop.py's `ReferenceLoop`, with the engine's data path
  (a blocking batch copy, `--blocking-copy`): the yardstick of validation/fidelity.py.

Each block is timed with a device synchronisation at both ends. Pair i runs engine then loop for
even i, loop then engine for odd i, so a speed that drifts during a pair favours neither side.
Two consecutive pairs (engine, loop, loop, engine) make one unit; the engine/loop ratio is the
geometric mean over the units, and its 95% interval comes from resampling the units
(validation/interleave_stats.py). `within_3pct` is true when the whole interval lies within 3%,
`within_5pct` within 5%.

More kinds of result use the same alternation with other sides (interleave_sides.KINDS):
`--control S` (A/A: the loop against a second copy of itself; its ratio should be 1, and shows
what the method alone gives), `--sampler-cost S` (the loop with the sampler on against itself
without), `--bare-engine S` (the engine with its clock, loss tracking and memory marks replaced
by stand-ins that do nothing, against the loop: accelerate's share) and `--trackers S` (the
engine against the bare engine: gpubench's share).

    python -m validation.interleaved --out results/engine-vs-loop/interleaved --control tf32-b4

On the CPU, the side whose model was built first in the process ran 1-2% slower (12% with a
tiny ViT at 224 px, fabric-32 of a test matrix, 2026-12-04). So by default
(`--build-first both`) each scenario runs in two processes, half the pairs each, the loop's model
built first in one (OUT/SCENARIO.json) and side a's in the other (OUT/SCENARIO-a-first.json),
and the table pools their units. Each result holds every block. OUT/interleaved.csv
(interleave_stats.collect; `--collect DIR` rewrites it for any directory of results) has a row
per result and a pooled row per scenario and kind. Finished results are kept: running the
command again goes on where it stopped; with --time-limit it starts nothing once the time is up
and exits 4, tabling what finished in OUT/interleaved-partial.csv (OUT/interleaved.csv is written
only when every result is there: `make bench` takes it as the part's end). `--device cpu` runs it
on the CPU with the tiny model, to test the script; its figures mean nothing.

The sides are built in interleave_sides.py; the figures are computed in interleave_stats.py.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.errors import BadInput
from bench.fsio import atomic_write_json, atomic_write_text
from bench.run.proc import run_subprocess
from validation.interleave_sides import (
    KINDS,
    MATRIX,
    WARMUP_STEPS,
    build_sides,
    check_interleavable,
    scenario_names,
    side_label,
)
from validation.interleave_stats import collect, summarize
from validation.model_loop import FEEDS
from validation.parts import INTERRUPTED, TIME_LIMIT, expired, run_script

MODULE = [sys.executable, "-m", "validation.interleaved"]
STARTED = time.perf_counter()  # this module's import: a child's phases_s count from here
PROFILE_TOP_OPS = 40  # operators kept per side of a profiled block, by self CPU time
# steps a side runs under the profiler: reading the profile back (key_averages) takes seconds per
# step's events (6 s for 10 steps of a 12-layer tiny ViT on a CPU, 2.8 s for 3), 17-36 s a process on
# the H100s for 10 steps, more than the timed pairs; per-step figures need only a few
PROFILE_STEPS = 3
TABLE_CSV = "interleaved.csv"  # written once every result is there: run_all takes it as the end
PARTIAL_CSV = "interleaved-partial.csv"  # what finished, when --time-limit stopped it
# One scenario's process: about a minute on a GPU at 40-100 pairs of 10 steps; a hang guard far above.
CHILD_TIMEOUT_S = 900.0
ANSWER_TIMEOUT_S = 60.0  # the sampler helper answers a command within milliseconds
HELPER_END_S = 30.0  # and ends as soon as it has answered `exit`


# ---------------------------------------------------------------- the sampler, on for the engine


class SamplerSwitch:
    """bench/measure/nvml.py's MemorySampler in a process of its own (as a run has it), watching
    this process group, switched on and off by a line on its stdin; it answers once it has. It ends
    on `exit`, not on the end of its stdin: a DataLoader worker forked after it holds the pipe open."""

    def __init__(self, uuid: str, cmd: list[str] | None = None) -> None:
        cmd = cmd or [*MODULE, "--sampler-helper", uuid, "--pgid", str(os.getpgid(0))]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._ask("ready")

    def _ask(self, command: str) -> str:
        """Send one command; its one-line answer, waited for at most ANSWER_TIMEOUT_S."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], ANSWER_TIMEOUT_S)
        if not ready:
            self.proc.kill()
            raise RuntimeError(f"NVML sampler helper gave no answer to {command!r} within {ANSWER_TIMEOUT_S:g} s")
        answer = self.proc.stdout.readline().strip()
        if not answer.startswith("ok"):
            raise RuntimeError(f"NVML sampler helper answered {answer!r} to {command!r}")
        return answer

    def on(self) -> None:
        self._ask("on")

    def off(self) -> float:
        """Switch off; the rate (Hz) the sampler reached while it was on."""
        return float(self._ask("off").split()[1])

    def close(self) -> None:
        """End the helper; one that does not answer or end in HELPER_END_S is killed (the blocks
        measured so far are kept either way)."""
        with contextlib.suppress(OSError, RuntimeError, ValueError):
            self._ask("exit")
        try:
            self.proc.wait(timeout=HELPER_END_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()


def sampler_helper(uuid: str, pgid: int) -> int:
    from bench.measure.nvml import MemorySampler, Nvml

    nvml = None
    sampler = None
    for line in sys.stdin:
        command = line.strip()
        if command == "exit":
            print("ok", flush=True)
            break
        if command == "on":
            nvml = nvml or Nvml(uuid)
            sampler = MemorySampler(nvml)
            sampler.idle_mb = nvml.used_mb()
            sampler.start(pgid)
            print("ok", flush=True)
        elif command == "off" and sampler is not None:
            print(f"ok {sampler.stop().sample_hz:.1f}", flush=True)
            sampler = None
        else:
            print("ok" if command == "ready" else f"unknown command {command!r}", flush=True)
    return 0


# ---------------------------------------------------------------- one scenario, in this process


def timed_block(step: Callable[[], None], steps: int, sync: Callable[[], None]) -> float:
    return traced_block(step, steps, sync)["seconds"]


def traced_block(step: Callable[[], None], steps: int, sync: Callable[[], None]) -> dict[str, Any]:
    """`steps` steps between two device synchronisations: `seconds` (the block's time), and what
    says where a slower side's time went. `host_s`: until the last step returned, before the final
    synchronisation (near `seconds` when the CPU's launching is the bound); `thread_cpu_s`: the CPU
    time of this thread over those steps (below `host_s` when it waited off the CPU: the GIL held
    by another thread, a descheduled vCPU, a blocking copy whose wait yields); `step_ms`: each
    step's host time; `gc`: the garbage collector's passes in the block; `threads`: the Python
    threads alive (each one can take the GIL from the launching thread)."""
    sync()
    threads = threading.active_count()
    passes = sum(g["collections"] for g in gc.get_stats())
    start, cpu = time.perf_counter(), time.thread_time()
    marks = [start]
    for _ in range(steps):
        step()
        marks.append(time.perf_counter())
    cpu = time.thread_time() - cpu
    sync()
    return {
        "seconds": time.perf_counter() - start,
        "host_s": marks[-1] - start,
        "thread_cpu_s": cpu,
        "step_ms": [round((b - a) * 1000, 3) for a, b in zip(marks, marks[1:], strict=False)],
        "gc": sum(g["collections"] for g in gc.get_stats()) - passes,
        "threads": threads,
    }


def alternate(
    sides: dict[str, Callable[[], None]],
    pairs: int,
    block_steps: int,
    batch_size: int,
    sync: Callable[[], None],
    switch: SamplerSwitch | None,
) -> list[dict[str, Any]]:
    """Warm both sides up, then time `pairs` pairs of blocks, a b | b a | ...; the sampler (if
    any) on in side a's blocks only, outside their timing."""
    for side in ("a", "b"):
        timed_block(sides[side], WARMUP_STEPS, sync)
    blocks, t0 = [], time.perf_counter()
    for pair in range(pairs):
        for side in ("a", "b") if pair % 2 == 0 else ("b", "a"):
            sampler = switch if side == "a" else None
            if sampler is not None:
                sampler.on()
            start = time.perf_counter() - t0
            traced = traced_block(sides[side], block_steps, sync)
            hz = sampler.off() if sampler is not None else None
            block = {"pair": pair, "side": side, "start_s": start, **traced}
            blocks.append({**block, "samples": block_steps * batch_size, "sampler_hz": hz})
    return blocks


def profiled_blocks(
    sides: dict[str, Callable[[], None]], steps: int, sync: Callable[[], None], device: Any, stem: Path
) -> dict[str, Any]:
    """STEPS more steps of each side (at most PROFILE_STEPS) under the worker's profiler
    (bench/worker/profiling.py, what `profile = N` runs), after the timed pairs (the profiler's own
    cost is in neither side's figures): per side its steps, its step time under the profiler, its
    gzipped Chrome trace (STEM-a.trace.json.gz), the kernel time per step by category and the operators with the most
    self CPU time per step: where a slower side's host time goes (interleave_stats.profile_gap)."""
    from bench.measure.kernels import NAMES
    from bench.worker.profiling import StepProfiler, on_device

    out: dict[str, Any] = {}
    for side in ("a", "b"):
        profiler = StepProfiler(steps, device, stem.with_name(f"{stem.name}-{side}.trace.json.gz"))
        sync()
        profiler.start()
        for _ in range(steps):
            sides[side]()
        figures = profiler.stop()
        on_cpu = [e for e in profiler.events if not on_device(e)]
        top = sorted(on_cpu, key=lambda e: e.self_cpu_time_total, reverse=True)[:PROFILE_TOP_OPS]
        out[side] = {
            "steps": steps,
            "step_ms": figures["prof_step_ms"],
            "trace": figures["prof_trace"],
            "kernels_ms": {name: figures[f"prof_{name}_ms"] for name in NAMES},
            # every operator's and runtime call's own CPU time: the rest of a CPU-bound step is Python
            "cpu_ops_total_ms": sum(e.self_cpu_time_total for e in on_cpu) / 1000.0 / steps,
            "cpu_ops": [
                {"name": str(e.key), "self_cpu_ms": e.self_cpu_time_total / 1000.0 / steps, "calls": e.count / steps}
                for e in top
            ],
        }
    return out


def measure(a: argparse.Namespace) -> dict[str, Any]:
    import torch

    marks = {"torch_imported": time.perf_counter()}
    device = torch.device("cuda:0" if a.device == "cuda" else "cpu")  # a worker gets an index too
    cuda = device.type == "cuda"
    # enough data that no side wraps (the profiled block's too), and one spare block so the engine
    # clock's end never falls in one
    steps = WARMUP_STEPS + (a.pairs + 1 + int(a.profile_block)) * a.block_steps
    with tempfile.TemporaryDirectory() as scratch:
        sc, model, sides = build_sides(
            a.one, a.kind, steps, device, Path(scratch), a.build_first, a.matrix, a.loop_feed
        )
        marks["sides_built"] = time.perf_counter()
        sync = torch.cuda.synchronize if cuda else (lambda: None)
        sampler = KINDS[a.kind][2]
        switch = SamplerSwitch(gpu_uuid(torch)) if cuda and (a.sampler if sampler is None else sampler) else None
        marks["sampler_started"] = time.perf_counter()
        try:
            blocks = alternate(sides, a.pairs, a.block_steps, sc.batch_size, sync, switch)
            marks["pairs_done"] = time.perf_counter()
            stem = result_path(a.out, a.one, a.kind, a.build_first).with_suffix("")
            profile = None
            if a.profile_block:
                profile = profiled_blocks(sides, min(a.block_steps, PROFILE_STEPS), sync, device, stem)
                marks["profiled"] = time.perf_counter()
        finally:
            if switch is not None:
                switch.close()
    marks["done"] = time.perf_counter()
    return {
        "scenario": a.one,
        "matrix": a.matrix,
        "kind": a.kind,
        "a": side_label(KINDS[a.kind][0], sc, a.matrix) + (", NVML sampler on" if switch is not None else ""),
        "b": side_label(KINDS[a.kind][1], sc, a.matrix),
        "loop_feed": a.loop_feed if a.matrix != MATRIX else None,
        "model": model,
        "batch_size": sc.batch_size,
        "precision": sc.precision,
        "tf32": sc.tf32,
        "block_steps": a.block_steps,
        "built_first": a.build_first,
        "sampler": switch is not None,
        "device": a.device,
        "gpu": torch.cuda.get_device_name(device) if cuda else "",
        "torch": torch.__version__,
        "summary": summarize(blocks),
        "blocks": blocks,
        "profile": profile,
        # where the process's time went, from this module's import (the timed pairs are a fraction)
        "phases_s": phases(marks),
    }


def phases(marks: dict[str, float]) -> dict[str, float]:
    """Seconds from one mark to the next, the first from STARTED; the last, `total`, all of them."""
    out, last = {}, STARTED
    for name, at in marks.items():
        out[name] = round(at - last, 3)
        last = at
    out["total"] = round(last - STARTED, 3)
    return out


def gpu_uuid(torch: Any) -> str:
    return "GPU-" + str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)


# ---------------------------------------------------------------- the driver


def result_path(out: Path, name: str, kind: str, first: str = "b") -> Path:
    stem = name if kind == "engine" else f"{name}-{kind}"
    return out / f"{stem}{'-a-first' if first == 'a' else ''}.json"


def write_env(out: Path, device: str) -> None:
    """OUT/env.json, once: the machine, its GPU and the package versions, as a run writes them
    (interleave_stats.collect reads its GPU), with this command."""
    path = out / "env.json"
    if path.is_file():  # a run that goes on keeps the first command's
        return
    from bench.run.session import environment

    env = environment("cuda:0" if device == "cuda" else "cpu")
    env["command"] = " ".join(["python -m validation.interleaved", *sys.argv[1:]])
    atomic_write_json(path, env)


def main() -> int:
    return run_script(_checked_main)


def _checked_main() -> int:
    try:
        return _main()
    except BadInput as exc:  # a scenario the matrix does not have, ...: one line, exit 2
        print(f"validation.interleaved: error: {exc}", file=sys.stderr)
        return int(exc.exit_code)


def _main() -> int:
    p = argparse.ArgumentParser(
        prog="python -m validation.interleaved",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", type=Path)
    p.add_argument(
        "--matrix",
        default=MATRIX,
        help="the matrix whose scenarios are interleaved (default: fidelity, against validation/reference_loop.py; "
        "any other against validation/model_loop.py, Fabric rows against Fabric's loop)",
    )
    p.add_argument(
        "--only",
        default=None,
        help="comma-separated scenarios of the matrix to run the engine against the loop on "
        "(default: all; '' for none, to run only the other kinds asked for)",
    )
    p.add_argument("--control", default="", help="comma-separated scenarios to run as an A/A test as well")
    p.add_argument("--sampler-cost", default="", help="comma-separated scenarios to run the sampler's A/B on")
    p.add_argument("--bare-engine", default="", help="comma-separated scenarios to run the bare engine on")
    p.add_argument("--trackers", default="", help="comma-separated scenarios: the engine against the bare engine")
    p.add_argument(
        "--loop-feed",
        default="loader",
        choices=FEEDS,
        help="with --matrix other than fidelity: how validation/model_loop.py's loop gets its batches "
        "(loader: a shuffled DataLoader collates them, as the engines do; slices: no collation)",
    )
    p.add_argument("--pairs", type=int, default=40, help="block pairs per scenario (even)")
    p.add_argument("--block-steps", type=int, default=10, help="optimizer steps per block")
    p.add_argument(
        "--sampler", action=argparse.BooleanOptionalAction, default=True, help="NVML sampler on in the engine's blocks"
    )
    p.add_argument(
        "--build-first",
        default="both",
        choices=["both", "a", "b"],
        help="the side whose model is built first in the process; on the CPU the side built first ran 1-12%% "
        "slower, so 'both' (the default) runs half the pairs in each order, in two processes, and pools them",
    )
    p.add_argument(
        "--profile-block",
        action="store_true",
        help="after the pairs, a few more steps of each side (up to 3) under torch.profiler: its trace "
        "(gzipped), kernel time by category and the operators with the most self CPU time (the result's `profile`)",
    )
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--time-limit", type=float, default=None, help="seconds; then exit 4, run again to go on")
    p.add_argument("--collect", type=Path, default=None, help="write DIR/interleaved.csv from every result under DIR")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)  # the child: one scenario, in this process
    p.add_argument("--kind", default="engine", choices=sorted(KINDS), help=argparse.SUPPRESS)  # the child's side a
    p.add_argument("--sampler-helper", default=None, help=argparse.SUPPRESS)  # the sampler's process: a GPU UUID
    p.add_argument("--pgid", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.sampler_helper:
        return sampler_helper(a.sampler_helper, a.pgid)
    if a.collect:
        return write_table(a.collect)
    if a.out is None:
        p.error("--out is required (or --collect DIR)")
    orders = ["b", "a"] if a.build_first == "both" else [a.build_first]
    pairs = a.pairs // len(orders)  # each process's share
    if a.pairs < 2 * len(orders) or pairs % 2 or a.pairs % len(orders) or a.block_steps < 1:
        p.error("--pairs must be even, and a multiple of 4 with --build-first both; --block-steps at least 1")
    if a.one:
        from bench.worker.skips import Skip

        if a.build_first == "both":
            p.error("--one needs --build-first a or b")
        try:
            result = measure(a)
        except Skip as exc:  # e.g. tf32 on the CPU: a row that says why
            result = {"scenario": a.one, "kind": a.kind, "skipped": str(exc)}
        atomic_write_json(result_path(a.out, a.one, a.kind, a.build_first), result)
        return 0
    deadline = None if a.time_limit is None else time.monotonic() + a.time_limit
    jobs = [(n, "engine") for n in scenario_names(a.only, a.matrix)] if a.only != "" else []
    jobs += [(n, "control") for n in scenario_names(a.control, a.matrix)] if a.control else []
    jobs += [(n, "sampler-cost") for n in scenario_names(a.sampler_cost, a.matrix)] if a.sampler_cost else []
    jobs += [(n, "bare-engine") for n in scenario_names(a.bare_engine, a.matrix)] if a.bare_engine else []
    jobs += [(n, "trackers") for n in scenario_names(a.trackers, a.matrix)] if a.trackers else []
    for name, kind in jobs:  # bad input before any child starts
        check_interleavable(name, kind, a.matrix)
    a.out.mkdir(parents=True, exist_ok=True)
    for name, kind, first in ((n, k, f) for n, k in jobs for f in orders):
        path = result_path(a.out, name, kind, first)
        if path.is_file():
            continue
        if expired(deadline):
            if any(f.name != "env.json" for f in a.out.glob("*.json")):
                write_table(a.out, PARTIAL_CSV)  # what finished is tabled; running again goes on
            return TIME_LIMIT
        write_env(a.out, a.device)  # once, before the first child: a spent time limit writes nothing
        cmd = [*MODULE, "--one", name, "--kind", kind, "--out", str(a.out), "--pairs", str(pairs)]
        cmd += ["--block-steps", str(a.block_steps), "--device", a.device, "--sampler" if a.sampler else "--no-sampler"]
        cmd += ["--build-first", first, "--matrix", a.matrix, "--loop-feed", a.loop_feed]
        cmd += ["--profile-block"] if a.profile_block else []
        print("+ " + " ".join(cmd), file=sys.stderr)
        log = path.with_suffix(".log")
        done = run_subprocess(cmd, timeout_s=CHILD_TIMEOUT_S, log_path=log)
        if done.interrupted:
            return INTERRUPTED
        if done.returncode != 0:
            timed_out = f" (still running after its {CHILD_TIMEOUT_S:g} s timeout; stopped)" if done.timed_out else ""
            print(f"{name}: exit {done.returncode}{timed_out}; see {log}", file=sys.stderr)
            return 1
    code = write_table(a.out)
    (a.out / PARTIAL_CSV).unlink(missing_ok=True)
    return code


def write_table(root: Path, name: str = TABLE_CSV) -> int:
    """ROOT/NAME from every result under ROOT (interleave_stats.collect), printed too."""
    frame = collect(root)
    atomic_write_text(root / name, frame.to_csv(index=False))
    print(frame.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
