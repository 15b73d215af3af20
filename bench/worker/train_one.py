"""Run one scenario in this process: check it can run here, build, train, measure."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import torch

from ..families import FAMILIES, Family, family_of
from ..measure.probes import make_probes
from ..recipe import mesh
from ..recipe.engine_registry import ENGINES
from ..recipe.scenario import Scenario
from . import dist, what_ran
from .clock import StepClock
from .dataset import dataset_for, image_shape, trained_tokens
from .engines.inputs import EngineInputs
from .evaluate import held_out
from .llm import build_trained, lora_figures
from .memcap import apply_memory_cap
from .model import count_parameters, count_trainable, task_of
from .precision import matmul_precision, set_tf32
from .profiling import StepProfiler, trace_path
from .ranks import combine_ranks, loss_outcome
from .skips import check_runnable
from .tracking import LossTracker, MemoryPhases, memory_figures
from .window import WindowRule

SLOW_STEP_S = 0.05  # inject_fault = "slow": this much longer per optimizer step


def inject(fault: str) -> None:
    """Faults on purpose, for testing the harness (scenario field `inject_fault`)."""
    if fault == "hang":
        while True:
            time.sleep(1)
    elif fault == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif fault == "raise":
        raise RuntimeError('injected failure (inject_fault = "raise")')
    elif fault == "oom":
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 EiB (injected)")
    elif fault == "exit3":
        os._exit(3)


def poison(model: torch.nn.Module) -> None:
    """inject_fault = "nan": the model's weights (this rank's shards, when sharded) become NaN."""
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(float("nan"))


def preload(engine: str, model_family: Family | None = None) -> None:
    """Import what the engine and the model's family need (while a thread creates the CUDA context);
    every family's preload list when `model_family` is None (the fork server)."""
    for fam in FAMILIES if model_family is None else (model_family,):
        for module in fam.preload:
            importlib.import_module(module)
    row = ENGINES[engine]
    if row.package is not None and importlib.util.find_spec(row.package.replace("-", "_")) is None:
        return  # not installed: its workers are skipped, saying so (skips.py)
    for module in (*row.preload, row.module):
        importlib.import_module(module)


def build_inputs(
    sc: Scenario,
    model_name: str,
    device: torch.device,
    scratch: Path,
    marks: dict[str, float],
    rank: dist.Rank | None = None,
    timeout_s: float = 3600.0,
    shared: Path | None = None,
    trace: Path | None = None,
) -> EngineInputs:
    """Check the scenario can run here, then build what its engine trains and reports to; `marks`
    gains the wall time of each start-up step. `rank`: this process's place in a torchrun job.
    `shared`: the folder the run's workers share (default: this worker's scratch)."""
    check_runnable(sc, device, model_name)
    torch.manual_seed(sc.seed)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        set_tf32(sc.tf32)
        torch.empty(1, device=device)  # the CUDA context, unless a start-up thread made it already
    apply_memory_cap(sc, model_name, device)  # a GPU's allocator capped, or the CPU's stand-in OOM
    marks["cuda_ready"] = time.time()
    agree = None
    if rank is not None:
        dist.init(rank, device, dist.collective_timeout_s(timeout_s))
        if sc.nnodes > 1:  # nodes started with different settings would wait on each other
            dist.check_same_settings(sc.node_rank, sc.settings())
        if sc.window == "auto":
            agree = dist.window_agreement(dist.collective_timeout_s(timeout_s))
        marks["process_group"] = time.time()
    world = rank.world_size if rank else 1
    faulty = sc.fault_rank < 0 or (rank.rank if rank else 0) == sc.fault_rank
    fault = sc.inject_fault if faulty else "none"

    phases = MemoryPhases(device)
    model, task = build_trained(sc, model_name, device, shared or scratch)
    phases.mark("model_built")
    marks["model_built"] = time.time()
    if fault == "nan" and rank is None:
        poison(model)  # every loss is non-finite
    if not sc.compile:
        phases.mark_first_forward(model)
    # `samples` is per data-parallel rank: each one's share of the data set is the single-GPU epoch
    # (weak scaling); a device mesh's cp and tp ranks of one replica train the same samples
    replicas = mesh.resolve(vars(sc), world).dp if mesh.asked(vars(sc)) else world
    data = (sc.data_source, sc.data, sc.tokenizer, sc.data_column)
    dataset = dataset_for(model.config, task, sc.samples * replicas, sc.seq_len, sc.seed, *data)
    marks["data_built"] = time.time()
    # tokens a step trains on: a causal LM's labelled tokens (padding has none), else what it feeds the model
    fed = what_ran.tokens(model, task, sc.seq_len)[1]
    labelled = trained_tokens(dataset)

    clock = StepClock(
        device,
        warmup_steps=sc.warmup_steps,
        total_steps=sc.optimizer_steps,
        samples_per_step=sc.samples_per_step,
        tokens_per_sample=fed if labelled is None else labelled,
        # with several ranks the wrapper (DDP, FSDP, DeepSpeed) gives every rank rank 0's weights
        # when it is built, so a faulty rank's NaN weights are made once the first step is done
        on_first_step=lambda: poison(model) if fault == "nan" and rank is not None else inject(fault),
        probes=make_probes(str(device)),
        on_step=(lambda: time.sleep(SLOW_STEP_S)) if fault == "slow" else None,
        barrier=dist.barrier if rank is not None else None,
        window=WindowRule(sc.window),
        agree=agree,
        profiler=_profiler(sc, device, trace, scratch, rank),
    )
    losses = LossTracker(
        copy=sc.compile and sc.compile_mode == "reduce-overhead",
        every_steps=sc.loss_every,
        micro_per_step=sc.grad_accum_steps,
    )
    return EngineInputs(sc, model, dataset, device, clock, losses, phases, scratch, task)


def _profiler(
    sc: Scenario, device: torch.device, trace: Path | None, scratch: Path, rank: dist.Rank | None
) -> StepProfiler | None:
    """`profile = N`'s profiler, its trace beside the row's log (in scratch when no log is known)."""
    if not sc.profile_steps:
        return None
    path = trace_path(str(trace or scratch / "profile.trace.json"), rank.rank if rank else None)
    assert path is not None
    return StepProfiler(sc.profile_steps, device, path, memory=sc.profile_memory)


def run(spec: dict[str, Any], scratch: Path, marks: dict[str, float] | None = None) -> dict[str, Any]:
    """Train one scenario. `marks` holds wall times of the process's start-up steps so far."""
    marks = dict(marks or {})
    sc = Scenario(**spec["scenario"])
    rank = dist.from_env() if sc.distributed else None
    device = torch.device(f"cuda:{rank.local_rank}" if rank and spec["device"] != "cpu" else spec["device"])
    shared = Path(spec["shared_dir"]) if spec.get("shared_dir") else None
    trace = Path(spec["trace_path"]) if spec.get("trace_path") else None
    timeout_s = float(spec.get("timeout_s", 3600.0))
    inputs = build_inputs(sc, spec["model"], device, scratch, marks, rank, timeout_s, shared, trace)
    model, clock, losses, phases = inputs.model, inputs.clock, inputs.losses, inputs.phases
    engine_figures = ENGINES[sc.engine].implementation().train(inputs)
    tail = {"engine_end": time.perf_counter()}  # the teardown, from the window's last step
    unit, tokens = what_ran.tokens(model, inputs.task, sc.seq_len)
    flop_figures = count_flops(sc, spec["model"], model, tokens, shared)
    tail["flop_count"] = time.perf_counter()
    figures: dict[str, Any] = {
        **clock.summary(),
        **engine_figures,
        **losses.result(),
        **phases.result(),
        **flop_figures,
        **lora_figures(model),
        **what_ran.figures(model, family_of(spec["model"]).name, inputs.task, unit),
        "model_params": count_parameters(model),
        "trainable_params": count_trainable(model),
        # from the parent's launch of this process to the first training step
        "startup_s": (clock.wall_begin or time.time()) - spec["launched_at"],
        "startup_breakdown": startup_breakdown(spec["launched_at"], marks, clock.wall_begin),
        # what the matmuls really ran in: libraries change it (the Trainer and accelerate turn
        # TF32 on for torch_compile), so it is read back, not assumed
        "fp32_matmul_precision": matmul_precision() if device.type == "cuda" else "",
    }
    figures.update(memory_figures(device))
    tail["memory"] = time.perf_counter()
    figures.update(held_out(inputs, rank.world_size if rank else 1))  # after the memory was read
    tail["held_out"] = time.perf_counter()
    figures["teardown_breakdown"] = teardown_breakdown(clock.t_window_end, tail)
    ranks = [figures]
    if rank is not None:
        figures["host"] = os.uname().nodename
        if mesh.asked(vars(sc)):  # one rank per data-parallel replica counts its samples (bench/worker/ranks.py)
            figures["counts_samples"] = mesh.resolve(vars(sc), rank.world_size).counts_samples(rank.rank)
        ranks = dist.gather(figures)
        figures = combine_ranks(ranks, sc.engine)
    status, reason = loss_outcome(ranks)
    # rank 0's curve (the leader's result.json); the parent writes it to losses/ (bench/results/losscurve.py)
    return {"status": status, "reason": reason, "figures": figures, "loss_curve": losses.curve()}


def count_flops(
    sc: Scenario, model_name: str, model: Any, tokens: int | None, shared: Path | None = None
) -> dict[str, Any]:
    """The generic FLOP count of the trained model and FlopCounterMode's cross-check on a meta copy
    (bench/measure/flopcount.py), after the timed window: its cost is never in the figures. `tokens`:
    per sample (bench/worker/what_ran.py); None for a model without tokens (a CNN: counted only).
    `shared`: the run's shared folder, where the cross-check is kept for the next row of the same
    model, task and sequence (the meta copy is the plain model: precision, optimizer, LoRA and the
    memory savers do not change it)."""
    from ..measure import flopcount
    from .model import auto_class, model_config

    fam, task = family_of(model_name), task_of(model_name, sc.task)
    extra = {"attn_implementation": "eager", **({"experts_implementation": "batched_mm"} if fam.moe else {})}

    def build_meta() -> Any:
        config = model_config(model_name, sc.task)
        if task != "causal-lm":  # else the loss asks a meta tensor for its labels' values
            config.problem_type = "single_label_classification"
        with torch.device("meta"):
            return auto_class(model_name, sc.task).from_config(config, **extra)

    meta = torch.device("meta")
    inputs: dict[str, Any]
    if task == "image-classification":
        inputs = {"pixel_values": torch.zeros((1, *image_shape(model.config)), device=meta)}
        inputs["labels"] = torch.zeros(1, dtype=torch.long, device=meta)
    else:
        ids = torch.zeros((1, sc.seq_len), dtype=torch.long, device=meta)
        labels = ids if task == "causal-lm" else torch.zeros(1, dtype=torch.long, device=meta)
        inputs = {"input_ids": ids, "labels": labels}
        if task == "causal-lm" or fam.flop_check_mask:  # else a decoder looks for packed sequences (.item())
            inputs["attention_mask"] = torch.ones_like(ids)
    # Liger patches the transformers classes themselves (not only the trained instance): a meta copy
    # would launch its Triton kernels on meta tensors' null pointers, an illegal memory access that
    # kills the CUDA context after the window (every H200 liger row, liger-kernel 0.8.5)
    no_check = (
        "Liger's Triton kernels patch the model's classes and cannot run on the meta device" if sc.liger else None
    )
    key = json.dumps([model_name, task, sc.seq_len])
    cache = shared / "flops" / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json" if shared else None
    return flopcount.figures(model, task, tokens, build_meta, inputs, no_check, cache)


def teardown_breakdown(window_end: float | None, tail: dict[str, float]) -> str:
    """Seconds from the window's last step to each step of the worker's teardown, in order, as JSON
    (a results column; writing the result, exiting and the parent's reaping are the rest of
    `overhead_s`)."""
    if window_end is None:
        return ""
    return _seconds_between([("window_end", window_end), *tail.items()])


def startup_breakdown(launched_at: float, marks: dict[str, float], train_begin: float | None) -> str:
    """Seconds spent in each start-up step, in order, as JSON (a results column)."""
    steps = [("launched", launched_at), *sorted(marks.items(), key=lambda kv: kv[1])]
    if train_begin:
        steps.append(("train_begin", train_begin))
    return _seconds_between(steps)


def _seconds_between(steps: list[tuple[str, float]]) -> str:
    """{each step after the first: seconds since the one before}, as JSON (the breakdown columns)."""
    return json.dumps({name: round(t - prev, 3) for (_, prev), (name, t) in zip(steps, steps[1:], strict=False)})
