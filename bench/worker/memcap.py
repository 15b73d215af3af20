"""A scenario's `memory_cap_mb`: how much GPU memory the worker may use, so a smaller GPU's question
("does this fit in 24 GB?") can be asked on a larger one (`gpubench fit --gpu-memory`).

On a GPU: torch.cuda.set_per_process_memory_fraction(cap / total) caps the caching allocator's
reserved memory; an allocation beyond it raises torch.OutOfMemoryError as a full GPU would. The CUDA
context is not the allocator's, so the parent passes the memory left after it (bench/fit/fitting.py).

On the CPU nothing runs out of memory, so the memory model stands in: the scenario's predicted peak
of torch-allocated memory on a CUDA GPU (bench/predict) is compared with the cap, and a peak above it
raises the same torch.OutOfMemoryError before training starts, its message saying it is the
stand-in. A model whose activations the memory model does not predict cannot be judged: an error.
"""

from __future__ import annotations

import torch

from ..recipe.scenario import Scenario

MB = 1024 * 1024
STAND_IN = "CPU stand-in for a capped GPU"


def apply_memory_cap(sc: Scenario, model_name: str, device: torch.device) -> None:
    """Cap the allocator (GPU) or judge the scenario against the cap (CPU); nothing without a cap."""
    if sc.memory_cap_mb is None:
        return
    if device.type == "cuda":
        total_mb = torch.cuda.get_device_properties(device).total_memory / MB
        torch.cuda.set_per_process_memory_fraction(min(1.0, sc.memory_cap_mb / total_mb), device)
        return
    peak_mb = predicted_peak_mb(sc, model_name)
    if peak_mb > sc.memory_cap_mb:
        raise torch.OutOfMemoryError(
            f"{STAND_IN}: the memory model predicts {peak_mb:,.1f} MB allocated at the peak, over the "
            f"{sc.memory_cap_mb:,.1f} MB cap (no allocation failed: docs/fit.md)"
        )


def predicted_peak_mb(sc: Scenario, model_name: str) -> float:
    """The memory model's peak of torch-allocated memory for `sc` on a CUDA GPU, in MB."""
    from ..predict.predictions import prediction_of

    p = prediction_of(sc, model_name)
    if not p.activations_predicted:
        raise RuntimeError(
            f"{STAND_IN}: memory_cap_mb needs the memory model's activations, which it does not predict for "
            f"{model_name} (docs/memory.md); on the CPU this scenario cannot be judged against the cap"
        )
    return p.peak / MB
