"""The training engines, as data: one row each, torch-free, so the parent validates a scenario's
engine without importing torch. A row names its implementation module as a string (imported only
by the worker that trains with it: `row.implementation().train(inputs)`), what the fork server
imports ahead for it, how its per-rank figures combine, what the memory model must know about how
it builds the optimizer, and the scenarios it refuses. Adding an engine: docs/extending.md.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Protocol

from ..errors import did_you_mean
from .optimizer_names import OPTIMIZERS
from .precisions import FABRIC_PRECISIONS, EnginePrecision, half_weights, matmul_format


class Scenario(Protocol):
    """The settings an engine's rules read: a bench.recipe.scenario.Scenario, which sits above the
    registries (this module does not import it; bench/planner/rules.py applies the rules to one)."""

    @property
    def optimizer(self) -> str: ...
    @property
    def strategy(self) -> str: ...
    @property
    def precision(self) -> str: ...
    @property
    def grad_accum_steps(self) -> int: ...
    @property
    def tp(self) -> int: ...
    @property
    def cp(self) -> int: ...
    @property
    def dp_replicate(self) -> int: ...


# How an engine's own whole-loop throughput (`trainer_samples_per_s`) combines over ranks
# (bench/worker/ranks.py): "global", it already counts every rank's samples (rank 0's figure
# stands); "sum", each rank counts its own (the ranks' figures add up).
RANK_RULES = ("global", "sum")


@dataclass(frozen=True)
class Rule:
    """A scenario the engine cannot run as asked: when `applies(scenario)`, the setting `key` is
    refused with `why` (a BadInput naming the key and its value, bench/planner/rules.py); with
    `cuda_only`, the scenario is valid but runs only on CUDA (a skip on the CPU saying `why`:
    bench/planner/rules.py needs_cuda)."""

    key: str  # the scenario field the message names
    applies: Callable[[Scenario], bool]
    why: str
    cuda_only: bool = False


@dataclass(frozen=True)
class MemoryTraits:
    """How the engine builds the optimizers the scenario names (gpubench's own, handed in, have
    neither trait): what bench/memory/terms.py must know to count their states and temporaries."""

    # two parameter groups (weight decay and none): torch's foreach AdamW makes its temporary per group
    decay_groups: bool = False
    # with bitsandbytes' 8-bit optimizers, every nn.Embedding is registered for 32-bit states
    embedding_32bit_states: bool = False


@dataclass(frozen=True)
class Engine:
    """One engine: its name in a scenario (`engine = "..."`) and everything that depends on it."""

    name: str
    label: str  # how a sentence names it ("the Trainer keeps ...")
    module: str  # its implementation: a module with train(EngineInputs) -> figures
    package: str | None = None  # a pip package it needs beyond gpubench's own (import name: '-' as '_')
    preload: tuple[str, ...] = ()  # modules the fork server imports ahead for its workers
    rank_rule: str = "sum"  # RANK_RULES
    memory: MemoryTraits = MemoryTraits()
    rules: tuple[Rule, ...] = ()
    precisions: tuple[EnginePrecision, ...] = ()  # its own precision strings beyond fp32, fp16, bf16

    def __post_init__(self) -> None:
        if self.rank_rule not in RANK_RULES:
            raise ValueError(f"engine {self.name!r}: rank_rule {self.rank_rule!r} is not one of {RANK_RULES}")

    def refusal(self, sc: Scenario) -> Rule | None:
        """The first rule that refuses this scenario, or None."""
        return next((r for r in self.rules if not r.cuda_only and r.applies(sc)), None)

    def needs_cuda(self, sc: Scenario) -> str | None:
        """Why this engine cannot run the scenario without CUDA, or None."""
        return next((r.why for r in self.rules if r.cuda_only and r.applies(sc)), None)

    def implementation(self) -> ModuleType:
        """The implementation module (imports torch and the engine's libraries)."""
        return importlib.import_module(self.module)


def _gpubench_optimizer_under_fsdp(sc: Scenario) -> bool:
    return OPTIMIZERS[sc.optimizer] is None and sc.strategy == "fsdp"


_MESH_ON_THE_LOOP = (
    "builds a device mesh that only the Accelerate loop trains on here (the Trainer's own tensor "
    'parallelism needs a checkpoint loaded with tp_plan); use engine = "accelerate"'
)


def _above_one(key: str) -> Callable[[Scenario], bool]:
    def applies(sc: Scenario) -> bool:
        return bool(getattr(sc, key) != 1)

    return applies


TRAINER = Engine(
    name="trainer",
    label="the Trainer",
    module="bench.worker.engines.trainer",
    preload=("transformers.trainer",),
    rank_rule="global",  # train_samples_per_second counts the whole job's samples
    memory=MemoryTraits(decay_groups=True, embedding_32bit_states=True),  # Trainer.create_optimizer
    rules=(
        Rule(
            "optimizer",
            _gpubench_optimizer_under_fsdp,
            "is built by gpubench and handed to the Trainer through optimizers=, which the Trainer refuses "
            'under FSDP; use engine = "accelerate" or an optimizer the Trainer builds',
        ),
        *(Rule(key, _above_one(key), _MESH_ON_THE_LOOP) for key in ("tp", "cp", "dp_replicate")),
        Rule(
            "strategy",
            lambda sc: sc.strategy == "fsdp",
            "the Trainer runs FSDP only on accelerators; on the CPU it would silently train with DDP",
            cuda_only=True,
        ),
    ),
)
ACCELERATE = Engine(
    name="accelerate",
    label="the Accelerate loop",
    module="bench.worker.engines.accelerate",
    preload=("accelerate",),
    rank_rule="sum",  # the loop's own figure is this rank's
)

FABRIC = Engine(
    name="fabric",
    label="the Fabric loop",
    module="bench.worker.engines.fabric",
    package="lightning-fabric",
    preload=("lightning_fabric",),
    rank_rule="sum",  # the loop's own figure is this rank's
    precisions=FABRIC_PRECISIONS,
    rules=(
        Rule(
            "grad_accum_steps",
            lambda sc: sc.strategy == "deepspeed" and sc.grad_accum_steps > 1,
            "is not wired through Fabric's DeepSpeed strategy here (DeepSpeed counts the micro-batches "
            'itself); use ddp or fsdp, or engine = "accelerate"',
        ),
        Rule(
            "strategy",
            lambda sc: sc.strategy == "fsdp",
            "Lightning Fabric runs FSDP only on GPUs (it refuses accelerator='cpu')",
            cuda_only=True,
        ),
        Rule(
            "precision",
            lambda sc: sc.precision == "fp16",
            "Lightning Fabric trains 16-mixed as bf16-mixed on the CPU (fp16 autocast is CUDA's)",
            cuda_only=True,
        ),
        Rule(
            "precision",
            lambda sc: sc.precision == "transformer-engine",
            "transformer-engine's fp8 layers need an NVIDIA GPU (Hopper or newer)",
            cuda_only=True,
        ),
    ),
)

TORCH = Engine(
    name="torch",
    label="the plain PyTorch loop",
    module="bench.worker.engines.plain",
    rank_rule="sum",  # the loop's own figure is this rank's
    rules=(
        Rule(
            "strategy",
            lambda sc: sc.strategy in ("fsdp", "deepspeed"),
            'is not wired into the plain PyTorch loop here (one process or DDP); use engine = "accelerate" or "fabric"',
        ),  # a device mesh (tp, cp, dp_replicate) needs FSDP: refused with it
    ),
)

ENGINES: dict[str, Engine] = {e.name: e for e in (TRAINER, ACCELERATE, FABRIC, TORCH)}
# every engine's own precision strings (an engine's precision, wherever a stored precision is read)
ENGINE_PRECISIONS: tuple[EnginePrecision, ...] = tuple(p for e in ENGINES.values() for p in e.precisions)


def precision_matmuls(precision: str) -> str:
    """The number format a scenario's stored precision runs its matmuls in (fp32, fp16, bf16, fp8)."""
    return matmul_format(precision, ENGINE_PRECISIONS)


def precision_half_weights(precision: str) -> bool:
    """Whether a scenario's stored precision keeps the parameters in half precision."""
    return half_weights(precision, ENGINE_PRECISIONS)


def engine(name: str) -> Engine:
    """The registry's row for `name`; ValueError, with the closest name, for an unknown one."""
    if name not in ENGINES:
        hint = did_you_mean(name, tuple(ENGINES))
        raise ValueError(f"unknown engine {name!r}: not one of {', '.join(ENGINES)}" + (f"; {hint}" if hint else ""))
    return ENGINES[name]
