"""The measured matmul ceiling: what one GEMM reaches on this GPU in each number format, at the
clocks it runs at (ml-engineering's "maximum achievable matmul FLOPS" idea). Run by the parent in
a child before the first worker (`python -m bench.worker --ceiling SPEC.json OUT.json`); stored in
env.json as `matmul_ceiling`, read by the rows' `mfu_ceiling`.

Each (format, shape) is timed with CUDA events over ITERS back-to-back matmuls after WARMUP, the
result kept (no dead-code elimination), inputs of unit scale; fp8 through torch._scaled_mm
(e4m3 x e4m3 -> bf16, per-tensor scales) where the GPU has it (compute capability 8.9 or newer).
The format's ceiling is its best shape. The SM clock and power are read from NVML after each.
"""

from __future__ import annotations

import time
from typing import Any

FORMATS = ("bf16", "fp16", "tf32", "fp32", "fp8")
SQUARES = ((4096, 4096, 4096), (8192, 8192, 8192))
WARMUP, ITERS = 3, 20
BUDGET_S = 2.0  # per shape at most: fewer iterations for a slow format (fp32 at 8192)


def _operands(fmt: str, m: int, k: int, n: int, device: Any) -> tuple[Any, Any]:
    import torch

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(fmt, torch.float32)
    a = torch.randn(m, k, device=device, dtype=dtype if fmt != "fp8" else torch.bfloat16)
    b = torch.randn(n, k, device=device, dtype=dtype if fmt != "fp8" else torch.bfloat16)
    if fmt == "fp8":
        return a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
    return a, b


def _matmul(fmt: str) -> Any:
    import torch

    if fmt == "fp8":
        one = torch.ones((), device="cuda")

        def fp8(a: Any, b: Any) -> Any:
            return torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        return fp8
    return lambda a, b: a @ b.t()


def time_shape(fmt: str, shape: tuple[int, int, int], device: Any) -> float:
    """TFLOP/s of one format at one (M, K, N)."""
    import torch

    m, k, n = shape
    torch.backends.cuda.matmul.allow_tf32 = fmt == "tf32"
    a, b = _operands(fmt, m, k, n, device)
    mm = _matmul(fmt)
    for _ in range(WARMUP):
        out = mm(a, b)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = mm(a, b)
    torch.cuda.synchronize()
    one_s = max(time.perf_counter() - t0, 1e-6)
    iters = max(3, min(ITERS, int(BUDGET_S / one_s)))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        out = mm(a, b)
    end.record()
    torch.cuda.synchronize()
    del out
    seconds = start.elapsed_time(end) / 1000.0 / iters
    return 2.0 * m * k * n / seconds / 1e12


def supported(fmt: str) -> str:
    """ "" when this GPU runs the format, else why not."""
    import torch

    if fmt == "fp8":
        major, minor = torch.cuda.get_device_capability()
        if (major, minor) < (8, 9):
            return f"compute capability {major}.{minor} has no fp8 matmul (8.9 or newer)"
        if not hasattr(torch, "_scaled_mm"):
            return "this torch has no torch._scaled_mm"
    return ""


def measure(device: str, shapes: list[tuple[int, int, int]]) -> dict[str, Any]:
    """The ceiling of each format over SQUARES and `shapes` (the scenarios' own GEMMs)."""
    import torch

    from ..measure.gpuwatch import NvmlReader, cuda_uuid

    torch.cuda.set_device(torch.device(device))
    try:
        reader: NvmlReader | None = NvmlReader(cuda_uuid(device) or "")
    except Exception:
        reader = None
    all_shapes: list[tuple[int, int, int]] = list(dict.fromkeys([*SQUARES, *[(s[0], s[1], s[2]) for s in shapes]]))
    formats: dict[str, Any] = {}
    clocks: list[float] = []
    watts: list[float] = []
    for fmt in FORMATS:
        why = supported(fmt)
        if why:
            formats[fmt] = {"tflops": None, "reason": why}
            continue
        by_shape: dict[str, float | None] = {}
        for shape in all_shapes:
            key = "x".join(map(str, shape))
            try:
                by_shape[key] = time_shape(fmt, shape, device)
            except Exception as exc:  # a shape too large, a kernel missing: that shape only
                by_shape[key] = None
                formats.setdefault(f"{fmt}_errors", {})[key] = f"{type(exc).__name__}: {exc}"[:200]
            if reader is not None:
                try:
                    clocks.append(reader.sm_mhz())
                    watts.append(reader.power_w())
                except Exception:
                    pass
        best = max((v for v in by_shape.values() if v is not None), default=None)
        formats[fmt] = {"tflops": best, "by_shape": by_shape}
    torch.backends.cuda.matmul.allow_tf32 = False
    return {
        "formats": formats,
        "shapes": ["x".join(map(str, s)) for s in all_shapes],
        "sm_clock_mhz": sorted(clocks)[len(clocks) // 2] if clocks else None,
        "sm_clock_min_mhz": min(clocks) if clocks else None,
        "sm_clock_max_mhz": reader.max_sm_mhz() if reader is not None else None,
        "power_max_w": max(watts) if watts else None,
        "method": f"CUDA events over up to {ITERS} matmuls after {WARMUP} warm-up ones, per shape (M x K x N)",
    }
