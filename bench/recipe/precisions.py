"""The precisions a scenario can name, as data (torch-free: the scenario validates them before any
work). gpubench's own are fp32, fp16 and bf16: fp32 weights, the matmuls in autocast's dtype
(`tf32 = true` is a separate switch). An engine may add its own spelling (Lightning Fabric's
`32-true`, `bf16-mixed`, ...) in its registry row (bench/recipe/engine_registry.py `precisions`): a string that is
one of gpubench's is stored as gpubench's (so every reader of `precision` reads it), the others as
the engine writes them, with what the rest of gpubench must know about them here.
"""

from __future__ import annotations

from dataclasses import dataclass

PRECISIONS = ("fp32", "fp16", "bf16")


@dataclass(frozen=True)
class EnginePrecision:
    """One precision string an engine takes beyond gpubench's own."""

    name: str  # the engine's own string ("bf16-mixed")
    matmuls: str  # the number format its matmuls run in: fp32, fp16, bf16 or fp8 (the peak of MFU)
    same_as: str | None = None  # the gpubench precision it is (the scenario stores that), or None
    half_weights: bool = False  # the parameters (so the gradients and optimizer states) in half precision
    package: str | None = None  # a pip package it needs beyond the engine's (import name: '-' as '_')


# Lightning Fabric's `Fabric(precision=...)` strings (lightning_fabric/connector.py)
FABRIC_PRECISIONS = (
    EnginePrecision("32-true", "fp32", same_as="fp32"),
    EnginePrecision("16-mixed", "fp16", same_as="fp16"),
    EnginePrecision("bf16-mixed", "bf16", same_as="bf16"),
    EnginePrecision("16-true", "fp16", half_weights=True),
    EnginePrecision("bf16-true", "bf16", half_weights=True),
    # NVIDIA Transformer Engine: its fp8 Linear layers, the weights in bf16
    EnginePrecision("transformer-engine", "fp8", half_weights=True, package="transformer-engine"),
)
# gpubench's precisions in Fabric's spelling (bench/worker/engines/fabric.py)
TO_FABRIC = {p.same_as: p.name for p in FABRIC_PRECISIONS if p.same_as}


def matmul_format(precision: str, precisions: tuple[EnginePrecision, ...]) -> str:
    """The number format a stored precision runs its matmuls in, before tf32 and fp8 (fp32, fp16,
    bf16, or fp8 for an engine's own fp8 precision)."""
    if precision in PRECISIONS:
        return precision
    return next((p.matmuls for p in precisions if p.name == precision), "fp32")


def half_weights(precision: str, precisions: tuple[EnginePrecision, ...]) -> bool:
    """Whether a stored precision keeps the parameters in half precision (Fabric's `*-true` ones)."""
    return any(p.name == precision and p.half_weights for p in precisions)
