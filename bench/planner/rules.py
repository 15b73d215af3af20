"""The registries' rules over a scenario: its engine, optimizer and task are ones gpubench knows; its
precision is gpubench's or its engine's own (an engine's spelling of one of gpubench's is stored as
gpubench's); its data kind, its model family's refusals, its device mesh and its engine's own rules
allow it. A Scenario checks its own fields (bench/recipe/scenario.py) and imports no registry; these rules
run when a matrix is loaded (bench/planner/matrix.py expand) and again when a run is planned
(bench/planner/planning.py plan_scenarios), so a bad scenario is one line and exit 2 before any work.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import did_you_mean
from ..families import TASKS, refusal
from ..recipe import engine_registry, mesh
from ..recipe.optimizer_names import OPTIMIZERS  # our name -> the Trainer's `optim`; None: gpubench builds it
from ..recipe.precisions import PRECISIONS
from ..recipe.scenario import MAX_GPUS_PER_NODE, MAX_NODES, Scenario
from . import datakinds


def check_all(scenarios: Iterable[Scenario]) -> tuple[Scenario, ...]:
    """Each scenario checked by `check`, in order; the first refusal is raised."""
    return tuple(check(sc) for sc in scenarios)


def check(sc: Scenario) -> Scenario:
    """The scenario as the registries take it (an engine's spelling of a precision stored as
    gpubench's), or BadInput naming the setting, its value and why."""
    for key, choices in (
        ("engine", tuple(engine_registry.ENGINES)),
        ("optimizer", tuple(OPTIMIZERS)),
        ("task", ("auto", *TASKS)),
    ):
        value = getattr(sc, key)
        if not isinstance(value, str) or value not in choices:
            hint = did_you_mean(str(value), choices)
            raise sc.bad(key, value, f"is not one of {', '.join(choices)}" + (f"; {hint}" if hint else ""))
    sc = _precision(sc)
    if sc.is_command:  # the script has its own model, data and engine
        return sc
    _check_mesh(sc)
    _check_data(sc)
    refused = refusal(sc.model, vars(sc))  # the model family's own (bench/families)
    if refused is not None:
        raise sc.bad(*refused)
    if sc.checkpoint_every:  # every k-th layer: only a family whose layers can be checkpointed
        layers = refusal(sc.model, {**vars(sc), "grad_checkpointing": True})
        if layers is not None and layers[0] == "grad_checkpointing":
            raise sc.bad("checkpoint_every", sc.checkpoint_every, layers[2])
    if sc.fp8 and sc.precision != "bf16":
        raise sc.bad("fp8", True, 'needs precision = "bf16" (float8 matmuls inside a bf16 mixed-precision step)')
    rule = engine_registry.ENGINES[sc.engine].refusal(sc)  # the engine's own rules (bench/recipe/engine_registry.py)
    if rule is not None:
        raise sc.bad(rule.key, getattr(sc, rule.key), rule.why)
    return sc


def _precision(sc: Scenario) -> Scenario:
    """gpubench's precisions, or the engine's own strings (bench/recipe/precisions.py); one of the
    engine's that is one of gpubench's is stored as gpubench's."""
    value, row = sc.precision, engine_registry.ENGINES[sc.engine]
    if isinstance(value, str) and value in PRECISIONS:
        return sc
    mine = next((p for p in row.precisions if p.name == value), None)
    if mine is not None:
        return sc.replace(precision=mine.same_as) if mine.same_as is not None else sc
    owner = next((e for e in engine_registry.ENGINES.values() for p in e.precisions if p.name == value), None)
    if owner is not None:
        theirs = next(p for p in owner.precisions if p.name == value)
        takes = f'\'s is "{theirs.same_as}"' if theirs.same_as else f" takes {', '.join(PRECISIONS)}"
        kind = "spelling" if theirs.same_as else "own precision"
        raise sc.bad("precision", value, f'is {owner.label}\'s {kind} (engine = "{owner.name}"); {row.label}{takes}')
    choices = (*PRECISIONS, *(p.name for p in engine_registry.ENGINE_PRECISIONS))
    hint = did_you_mean(str(value), choices)
    others = "; ".join(
        f'{", ".join(p.name for p in e.precisions)} with engine = "{e.name}"'
        for e in engine_registry.ENGINES.values()
        if e.precisions
    )
    why = f"is not one of {', '.join(PRECISIONS)}, nor {others}" + (f"; {hint}" if hint else "")
    raise sc.bad("precision", value, why)


def _check_data(sc: Scenario) -> None:
    """The data fields' form (the files and the model's task are checked when the run is planned)."""
    why = datakinds.syntax_error(sc.data)
    if why:
        raise sc.bad("data", sc.data, why)
    kind = datakinds.KINDS[datakinds.split(sc.data)[0]]
    held_out = datakinds.held_out_error(sc.data) if sc.eval_samples else None
    if held_out:
        raise sc.bad("eval_samples", sc.eval_samples, held_out)
    for key, applies, default, needs in (
        ("tokenizer", kind.tokenized, "", "text data (text:PATH or saved:PATH)"),
        ("data_column", kind.columns, "text", 'data = "saved:PATH"'),
    ):
        value = getattr(sc, key)
        if not isinstance(value, str) or (key == "data_column" and not value.strip()):
            raise sc.bad(key, value, "must be a string" + (" (a column name)" if key == "data_column" else ""))
        if not applies and value != default:
            raise sc.bad(key, value, f"needs {needs}; data = {sc.data!r} takes none")


def _whole(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _check_mesh(sc: Scenario) -> None:
    """tp, cp, dp_replicate, dp_shard: whole numbers, under FSDP2, multiplying to the world size."""
    most = MAX_GPUS_PER_NODE * MAX_NODES
    for key in ("tp", "cp", "dp_replicate", "dp_shard"):
        value = getattr(sc, key)
        if not (_whole(value, 1, most) or (key == "dp_shard" and value == mesh.AUTO)):
            auto = ' or "auto"' if key == "dp_shard" else ""
            raise sc.bad(key, value, f"must be a whole number from 1 to {most}{auto}")
    asked = [k for k in ("tp", "cp", "dp_replicate") if getattr(sc, k) != 1]
    if sc.dp_shard != mesh.AUTO:
        asked.append("dp_shard")
    if not asked:
        return
    key = asked[0]
    if sc.strategy != "fsdp":
        raise sc.bad(
            key,
            getattr(sc, key),
            "needs strategy = \"fsdp\": the mesh's data-parallel dimensions are FSDP2's (DDP and DeepSpeed "
            "do not take DTensor parameters)",
        )
    if isinstance(sc.gpus, int):
        try:
            mesh.resolve(vars(sc), sc.world_size)
        except ValueError as exc:
            raise sc.bad(key, getattr(sc, key), f"does not fit the job: {exc}") from None
    if not mesh.asked(vars(sc)):
        return  # dp_shard alone: FSDP's own one-dimensional sharding
    unwired = {
        "offload": sc.offload != "none",
        "precision": sc.precision == "fp16",  # GradScaler over DTensor gradients: bf16 needs none
        "peft": sc.peft != "none",
        "fp8": sc.fp8,
    }
    for other in (k for k, on in unwired.items() if on):
        raise sc.bad(other, getattr(sc, other), f"is not wired through a device mesh here ({key} = {getattr(sc, key)})")
    if sc.cp > 1:
        if sc.attn_implementation == "eager":
            raise sc.bad("cp", sc.cp, "shards SDPA's attention: needs attn_implementation sdpa or default")
        if sc.seq_len % (2 * sc.cp):
            raise sc.bad(
                "cp",
                sc.cp,
                f"splits each sequence into 2 x cp = {2 * sc.cp} chunks (load-balanced causal attention); "
                f"seq_len = {sc.seq_len} must be a multiple of {2 * sc.cp}",
            )


def needs_cuda(sc: Scenario) -> str | None:
    """Why this scenario cannot run without CUDA, or None (its engine's CUDA-only rules included)."""
    if sc.tf32:
        return "tf32 is a CUDA matmul mode (Ampere or newer); it has no meaning on the CPU"
    if sc.cp > 1:
        return "context parallelism shards attention through torch's CUDA SDPA kernels (context_parallel)"
    if sc.strategy == "deepspeed":
        return "DeepSpeed's engine needs a GPU here (its CPU accelerator needs Intel's extension for PyTorch)"
    if why := engine_registry.ENGINES[sc.engine].needs_cuda(sc):
        return why
    if sc.offload != "none" or sc.activation_offload:
        return "offloading to the CPU has no meaning when training on the CPU"
    if sc.quantize_base != "none":
        return f"{sc.quantize_base} base weights are bitsandbytes' CUDA kernels"
    if sc.optimizer == "paged_adamw_8bit":
        return "paged optimizer states live in CUDA unified memory"
    if sc.liger:
        return "Liger's kernels are Triton kernels for GPUs"
    if sc.fp8:
        return "float8 matmuls need a GPU with FP8 tensor cores (Ada, Hopper or newer)"
    if sc.compile_mode == "reduce-overhead":
        return "reduce-overhead captures CUDA graphs"
    return None
