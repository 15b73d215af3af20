"""The interconnect check: all_reduce, all_gather and reduce_scatter timed over a few message sizes
on every rank of a short torchrun job (`python -m bench.worker --interconnect cpu|cuda OUT.json`,
started by bench/run/interconnect.py before the run's multi-process scenarios), NCCL on GPUs and
gloo on the CPU. Rank 0 writes the figures; env.json keeps them as `interconnect`.

Bandwidths as nccl-tests defines them (its doc/PERFORMANCE.md), for a message of S bytes (the
all-reduce's buffer, all-gather's output, reduce-scatter's input) over n ranks, t the slowest
rank's mean time per call: algbw = S / t; busbw = algbw x 2(n-1)/n for all-reduce and
algbw x (n-1)/n for all-gather and reduce-scatter, so that busbw is comparable with the link's
bandwidth whatever n.
"""

from __future__ import annotations

import time
from typing import Any

OPS = ("all_reduce", "all_gather", "reduce_scatter")
# message sizes in bytes: small on the CPU (the whole check about a second), up to 256 MiB on GPUs
SIZES = {"cpu": (1 << 14, 1 << 18, 1 << 20), "cuda": (1 << 20, 1 << 24, 1 << 28)}
WARMUP = {"cpu": 1, "cuda": 3}
ITERS = {"cpu": 3, "cuda": 20}


def bus_factor(op: str, n: int) -> float:
    """busbw / algbw (nccl-tests): 2(n-1)/n for all-reduce, (n-1)/n for all-gather and reduce-scatter."""
    return (2 if op == "all_reduce" else 1) * (n - 1) / n


def _call(op: str, size: int, n: int, device: Any) -> Any:
    import torch
    import torch.distributed as dist

    elements = size // 4 // n * n  # float32, a multiple of n: every rank's part is whole
    full = torch.ones(elements, dtype=torch.float32, device=device)
    part = torch.ones(elements // n, dtype=torch.float32, device=device)
    if op == "all_reduce":
        return lambda: dist.all_reduce(full)
    if op == "all_gather":
        return lambda: dist.all_gather_single(full, part)
    return lambda: dist.reduce_scatter_single(part, full)


def measure(device_type: str) -> dict[str, Any] | None:
    """Every op at every size on this rank; the slowest rank's times, on rank 0 (None elsewhere)."""
    import torch
    import torch.distributed as dist

    n = dist.get_world_size()
    device = torch.device("cuda", torch.cuda.current_device()) if device_type == "cuda" else torch.device("cpu")
    warmup, iters = WARMUP[device_type], ITERS[device_type]
    results = []
    for op in OPS:
        for size in SIZES[device_type]:
            call = _call(op, size, n, device)
            for _ in range(warmup):
                call()
            _sync(device)
            dist.barrier()
            start = time.perf_counter()
            for _ in range(iters):
                call()
            _sync(device)
            took = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64, device=device)
            dist.all_reduce(took, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
            seconds = float(took.item())
            bytes_ = size // 4 // n * n * 4
            algbw = bytes_ / seconds / 1e9
            results.append(
                {
                    "op": op,
                    "bytes": bytes_,
                    "time_us": seconds * 1e6,
                    "algbw_gbps": algbw,
                    "busbw_gbps": algbw * bus_factor(op, n),
                }
            )
    if dist.get_rank() != 0:
        return None
    return {"world_size": n, "backend": dist.get_backend(), "iters": iters, "results": results}


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run(device_type: str, out: str) -> int:
    """The torchrun child on `device_type` ("cpu": gloo, "cuda": NCCL): the group, the
    measurement, rank 0's JSON (atomic)."""
    import os
    from pathlib import Path

    import torch
    import torch.distributed as dist

    from ..fsio import atomic_write_json

    cuda = device_type == "cuda"
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl", device_id=torch.device("cuda", torch.cuda.current_device()))
    else:
        dist.init_process_group("gloo")
    try:
        figures = measure("cuda" if cuda else "cpu")
    finally:
        dist.destroy_process_group()
    if figures is not None:
        atomic_write_json(Path(out), figures)
    return 0
