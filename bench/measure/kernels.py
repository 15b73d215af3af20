"""Kernel-time categories of a profile (pure: names in, a category out), so that a speed change
between two profiled rows can be put on what moved: "B is 18% slower: +40 ms optimizer, +12 ms idle".

A CUDA kernel is categorised by its own name; on the CPU (no kernels) a torch operator by its name.
The first pattern that matches wins, in CATEGORIES order; what matches none is elementwise (the
normalisation, activation, softmax, reduction and pointwise kernels that fill a training step).
`idle` is not a kernel: the profiled steps' wall time that no kernel covered (bench/worker/
profiling.py), so the categories and idle add up to the step time on one stream.
"""

from __future__ import annotations

import re

from ..catalogue import KERNEL_NAMES

CATEGORIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("comm", re.compile(r"nccl|gloo|all_?reduce|all_?gather|reduce_?scatter|broadcast|c10d|alltoall", re.I)),
    ("attention", re.compile(r"flash|fmha|attention|sdpa|scaled_dot_product|mha", re.I)),
    ("optimizer", re.compile(r"adam|sgd|adafactor|lamb|lion|multi_tensor|foreach|optimizer", re.I)),
    (
        "gemm",
        re.compile(
            r"gemm|matmul|cutlass|cublas|nvjet|xmma|wgmma|sm\d\d_|_scaled_mm|aten::(mm|addmm|bmm|baddbmm|linear)\b",
            re.I,
        ),
    ),
    ("copy", re.compile(r"memcpy|memset|copy|aten::(to|_to_copy|contiguous|clone)\b", re.I)),
)
NAMES = KERNEL_NAMES  # the columns' order: the catalogue's
COLUMNS = tuple(f"prof_{name}_ms" for name in NAMES)


def category(name: str) -> str:
    """The category of a kernel or operator name."""
    for found, pattern in CATEGORIES:
        if pattern.search(name):
            return found
    return "elementwise"


def attribute(base: dict[str, float | None], new: dict[str, float | None], top: int = 3) -> list[tuple[str, float]]:
    """The categories whose per-step ms moved most from base to new, largest change first (at most
    `top`, none that moved less than 2% of the base's step)."""
    step = sum(v for v in base.values() if isinstance(v, int | float)) or 0.0
    moved = []
    for name in NAMES:
        b, n = base.get(name), new.get(name)
        if isinstance(b, int | float) and isinstance(n, int | float) and abs(n - b) >= 0.02 * step:
            moved.append((name, n - b))
    return sorted(moved, key=lambda kv: -abs(kv[1]))[:top]
