"""The search space of `gpubench recommend`: combinations, not a matrix's rows.

Each axis is a list of (label, scenario fields); a candidate is one choice on every axis, named by
its labels joined with '.', with the fields merged onto the base scenario. Which axes exist is the
family's technique table (Family.techniques) and the device's: Liger and fp8 only where the family
takes them and on CUDA; LoRA and QLoRA only when --allow names them; the 8-bit optimizer only where
bitsandbytes imports (checked by the caller, which passes what is installed). What the space leaves
out is said (AxisNote), never silently dropped. Pure: no torch, no model built.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import BadInput
from ..families.base import Family

PLAIN = "plain"  # the reference recipe: bf16 autocast, AdamW, no memory savers (parity's reference)
OBJECTIVES = ("speed", "energy", "cost")
ALLOWABLE = ("lora", "qlora")
EVERY_K = 2  # the every-k-layers form of checkpointing in the space: every other layer (half the recompute)


@dataclass(frozen=True)
class Candidate:
    name: str  # its labels joined with "." (an axis's default has none), e.g. "bf16.b8x4.ckpt.adamw_fused"
    fields: Mapping[str, Any]  # the scenario fields it sets on the base
    axes: Mapping[str, str]  # axis -> the label chosen on it (what "a family of candidates" groups by)


@dataclass(frozen=True)
class AxisNote:
    axis: str
    why: str  # why the axis, or one of its choices, is not in the space


@dataclass(frozen=True)
class Space:
    axes: tuple[tuple[str, tuple[tuple[str, Mapping[str, Any]], ...]], ...]
    notes: tuple[AxisNote, ...] = field(default_factory=tuple)

    def noted(self, axis: str, why: str) -> Space:
        """This space with one more note (what the answer says it rests on)."""
        return dataclasses.replace(self, notes=(*self.notes, AxisNote(axis, why)))

    def candidates(self) -> list[Candidate]:
        names = [axis for axis, _ in self.axes]
        out = []
        for picks in itertools.product(*(choices for _, choices in self.axes)):
            fields: dict[str, Any] = {}
            for _, changes in picks:
                fields.update(changes)
            labels = [label for label, _ in picks]
            chosen = dict(zip(names, labels, strict=True))
            out.append(Candidate(".".join(label for label in labels if label) or PLAIN, fields, chosen))
        return out


def valid_candidates(
    candidates: Sequence[Candidate], model: str, base: Mapping[str, Any]
) -> tuple[list[Candidate], dict[str, str]]:
    """The candidates that are valid scenarios on `model` (a combination the scenario refuses, such as
    fp8 with a quantized base, is left out with the scenario's own reason)."""
    from ..planner.rules import check
    from ..recipe.scenario import Scenario

    kept, invalid = [], {}
    for c in candidates:
        try:
            check(Scenario(name=c.name, **{**base, "model": model, **c.fields}))
        except BadInput as exc:
            invalid[c.name] = f"not a valid combination: {exc}".replace(f"scenario '{c.name}': ", "")
        else:
            kept.append(c)
    return kept, invalid


def micro_batches(global_batch: int, most: int = 4) -> list[tuple[int, int]]:
    """(micro-batch, accumulation steps) pairs whose product is global_batch, largest micro-batch
    first, at most `most` of them (halving each time: 32 -> 32x1, 16x2, 8x4, 4x8)."""
    if global_batch < 1:
        raise ValueError(f"global batch {global_batch} must be at least 1")
    pairs: list[tuple[int, int]] = []
    micro = global_batch
    while micro >= 1 and len(pairs) < most:
        if global_batch % micro == 0:
            pairs.append((micro, global_batch // micro))
        micro //= 2
    return pairs


def plain_fields(cuda: bool, global_batch: int) -> dict[str, Any]:
    """The reference every candidate's loss is judged against: bf16 autocast where the GPU has it
    (fp32 on the CPU, where autocast to bf16 is not what anyone trains with), AdamW, no savers, at
    the same global batch as every candidate (its smallest micro-batch: the one likeliest to fit)."""
    micro, accum = micro_batches(global_batch)[-1]
    return {
        "batch_size": micro,
        "grad_accum_steps": accum,
        "precision": "bf16" if cuda else "fp32",
        "tf32": False,
        "optimizer": "adamw",
        "grad_checkpointing": False,
        "checkpoint_every": 0,
        "compile": False,
        "liger": False,
        "fp8": False,
        "peft": "none",
        "quantize_base": "none",
    }


def build_space(
    family: Family,
    *,
    cuda: bool,
    global_batch: int,
    allow: Sequence[str] = (),
    installed: frozenset[str] = frozenset(),
    axes: Sequence[str] | None = None,
) -> Space:
    """The space for one model family on one device. `installed`: the optional packages that import
    (bitsandbytes, liger_kernel, torchao); `axes`: keep only these axes (each of the rest at the plain
    recipe's choice: its first, and the leanest micro-batch, as `plain_fields` trains)."""
    bad = [a for a in allow if a not in ALLOWABLE]
    if bad:
        raise BadInput(f"--allow {','.join(bad)}: not one of {', '.join(ALLOWABLE)}")
    notes: list[AxisNote] = []
    precision: list[tuple[str, Mapping[str, Any]]] = []
    if cuda:
        precision += [("bf16", {"precision": "bf16"}), ("fp16", {"precision": "fp16"})]
        precision.append(("tf32", {"precision": "fp32", "tf32": True}))
        if family.takes("fp8") and "torchao" in installed:
            precision.append(("fp8", {"precision": "bf16", "fp8": True}))
        else:
            notes.append(AxisNote("precision", f"fp8: {_missing(family, 'fp8', 'torchao', installed)}"))
    else:
        precision.append(("fp32", {"precision": "fp32"}))
        notes.append(AxisNote("precision", "on the CPU only fp32: bf16/fp16 autocast and tf32 are GPU recipes"))
    batch: list[tuple[str, Mapping[str, Any]]] = [
        (f"b{m}x{k}", {"batch_size": m, "grad_accum_steps": k}) for m, k in micro_batches(global_batch)
    ]
    checkpoint: list[tuple[str, Mapping[str, Any]]] = [("", {"grad_checkpointing": False, "checkpoint_every": 0})]
    checkpoint.append((f"ckpt{EVERY_K}", {"grad_checkpointing": False, "checkpoint_every": EVERY_K}))
    checkpoint.append(("ckpt", {"grad_checkpointing": True, "checkpoint_every": 0}))
    # closest to the plain recipe's AdamW first: the staged search starts at the first one that fits
    # (stages.reference), since a different optimizer changes what training does, not only its cost
    optimizer: list[tuple[str, Mapping[str, Any]]] = [
        ("adamw_fused" if cuda else "adamw", {"optimizer": "adamw_fused" if cuda else "adamw"}),
    ]
    if "bitsandbytes" in installed and cuda:
        optimizer.append(("adamw_8bit", {"optimizer": "adamw_8bit"}))
    else:
        notes.append(AxisNote("optimizer", "8-bit AdamW needs bitsandbytes on CUDA"))
    optimizer.append(("adafactor", {"optimizer": "adafactor"}))
    notes.append(
        AxisNote(
            "optimizer", "CPU offload of optimizer states needs a sharding strategy (fsdp, deepspeed): not one GPU"
        )
    )
    compile_axis: list[tuple[str, Mapping[str, Any]]] = [("", {"compile": False})]
    if cuda:
        compile_axis += [
            ("compile", {"compile": True, "compile_scope": "model"}),
            ("compile-layers", {"compile": True, "compile_scope": "layers"}),
        ]
    else:
        notes.append(AxisNote("compile", "torch.compile is not probed on the CPU (its compile time would dominate)"))
    table: list[tuple[str, list[tuple[str, Mapping[str, Any]]]]] = [
        ("precision", precision),
        ("batch", batch),
        ("checkpointing", checkpoint),
        ("optimizer", optimizer),
        ("compile", compile_axis),
    ]
    if family.takes("liger") and cuda and "liger_kernel" in installed:
        table.append(("liger", [("", {"liger": False}), ("liger", {"liger": True})]))
    elif family.takes("liger"):
        notes.append(AxisNote("liger", _missing(family, "liger", "liger_kernel", installed, cuda)))
    adapters: list[tuple[str, Mapping[str, Any]]] = [("", {"peft": "none", "quantize_base": "none"})]
    for technique in allow:
        if not family.takes(technique):
            notes.append(AxisNote("adapters", f"{technique}: the {family.name} family takes no {technique}"))
        elif technique == "qlora" and not (cuda and "bitsandbytes" in installed):
            notes.append(AxisNote("adapters", "qlora needs bitsandbytes on CUDA"))
        else:
            adapters.append((technique, {"peft": "lora", "quantize_base": "nf4" if technique == "qlora" else "none"}))
    if len(adapters) > 1:
        table.append(("adapters", adapters))
    if axes is not None:
        unknown = [a for a in axes if a not in {name for name, _ in table}]
        if unknown:
            raise BadInput(f"--axes {','.join(unknown)}: not an axis here ({', '.join(n for n, _ in table)})")
        plain = plain_fields(cuda, global_batch)
        table = [(name, choices if name in axes else _unsearched(choices, plain)) for name, choices in table]
    return Space(tuple((name, tuple(choices)) for name, choices in table), tuple(notes))


def _unsearched(
    choices: list[tuple[str, Mapping[str, Any]]], plain: Mapping[str, Any]
) -> list[tuple[str, Mapping[str, Any]]]:
    """An axis --axes leaves out keeps the plain recipe's choice (`plain_fields`: the smallest
    micro-batch, so a 24 GB question still has candidates that fit), else its first, the plainest
    (fused AdamW where the plain recipe's AdamW is not a choice)."""
    same = [c for c in choices if all(plain.get(k) == v for k, v in c[1].items())]
    return same[:1] or choices[:1]


def _missing(family: Family, technique: str, package: str, installed: frozenset[str], cuda: bool = True) -> str:
    """Why `technique` is not in the space (its axis's note names it: 'liger: a CUDA recipe')."""
    if not family.takes(technique):
        return f"the {family.name} family takes no {technique}"
    if not cuda:
        return "a CUDA recipe"
    return f"needs {package}, which is not installed"
