"""What the worker records alongside the clock: loss (without syncing) and memory by phase."""

from __future__ import annotations

import math
import resource
from typing import Any

import torch

MB = 1024 * 1024


class LossTracker:
    """Keeps the losses on the device and reads them once at the end: no kernel and no sync per
    step (a detached reference is all a step costs), so the tracker cannot slow a launch-bound
    step. Every `fold_every` losses are folded into a running non-finite count on the device (a
    few kernels per thousand steps), so a long run does not hold every loss.

    The loss curve: every `block` losses (micro-batches: `every_steps` optimizer steps of
    `micro_per_step` micro-batches) become one point, their mean, at the fold (fold_every is a
    multiple of the block), so the curve costs nothing per step either and holds one number a point."""

    def __init__(
        self, fold_every: int = 1024, copy: bool = False, every_steps: int = 1, micro_per_step: int = 1
    ) -> None:
        self.block = max(1, every_steps) * max(1, micro_per_step)
        self.every_steps, self.micro_per_step = max(1, every_steps), max(1, micro_per_step)
        self.fold_every = self.block * max(1, -(-fold_every // self.block))
        # CUDA graphs (compile_mode = "reduce-overhead") reuse their output memory at the next replay:
        # a loss kept from an earlier step must be a copy (one small kernel a step), or reading it
        # raises "accessing tensor output of CUDAGraphs that has been overwritten".
        self.copy = copy
        self.losses: list[torch.Tensor] = []
        self.last: torch.Tensor | None = None
        self.nonfinite: torch.Tensor | None = None  # over the losses folded so far
        self.points: list[torch.Tensor] = []  # block means, on the device
        self.tail: tuple[torch.Tensor, int] | None = None  # the last, partial block: its mean and length
        # the model's loss is the tracked loss times this, in final_loss and every point of the curve:
        # the Trainer's training_step returns a micro-batch's share of the step (its engine sets the
        # scale after training), the loops track the model's own loss (1)
        self.scale = 1.0

    def track(self, loss: torch.Tensor) -> None:
        self.losses.append(loss.detach().clone() if self.copy else loss.detach())
        if len(self.losses) >= self.fold_every:
            self._fold()

    def _fold(self) -> None:
        values = torch.stack([v.reshape(()).float() for v in self.losses])
        bad = (~torch.isfinite(values)).sum()
        self.nonfinite = bad if self.nonfinite is None else self.nonfinite + bad
        self.last = values[-1]
        full = len(values) // self.block * self.block
        if full:
            self.points.append(values[:full].reshape(-1, self.block).mean(dim=1))
        if full < len(values):  # only at the end: fold_every is a multiple of the block
            self.tail = (values[full:].mean(), len(values) - full)
        self.losses = []

    def result(self) -> dict[str, Any]:
        if self.losses:
            self._fold()
        if self.last is None or self.nonfinite is None:
            return {"final_loss": float("nan"), "loss_finite": False, "nonfinite_losses": 0}
        final = float(self.last) * self.scale
        return {"final_loss": final, "loss_finite": math.isfinite(final), "nonfinite_losses": int(self.nonfinite)}

    def curve(self) -> dict[str, Any]:
        """The loss curve as plain data: the optimizer step at the end of each point, and the mean
        loss of its micro-batches (None where it is not finite). Read after `result`."""
        if self.losses:
            self._fold()
        means = [float(v) * self.scale for v in torch.cat(self.points).tolist()] if self.points else []
        steps = [(i + 1) * self.every_steps for i in range(len(means))]
        if self.tail is not None:
            mean, micro = self.tail
            means.append(float(mean) * self.scale)
            steps.append(len(steps) * self.every_steps + -(-micro // self.micro_per_step))
        return {
            "every_steps": self.every_steps,
            "steps": steps,
            "loss": [v if math.isfinite(v) else None for v in means],
        }


class MemoryPhases:
    """torch's allocated memory the first time each phase is reached (CUDA only; a host-side read)."""

    NAMES = ("model_built", "after_forward", "after_backward", "after_optimizer_step")

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.values: dict[str, float] = {}

    def mark_first_forward(self, model: torch.nn.Module) -> None:
        """Mark after_forward when the model's first forward returns, then drop the hook, so later
        steps do not pay for it."""

        def hook(*_: Any) -> None:
            self.mark("after_forward")
            handle.remove()

        handle = model.register_forward_hook(hook)

    def mark(self, name: str) -> None:
        if self.cuda and name not in self.values:
            self.values[name] = torch.cuda.memory_allocated() / MB

    def mark_optimizer_step(self, optimizer: Any) -> None:
        """Mark after the first optimizer step that really ran: a step skipped by fp16's
        GradScaler, or a micro-batch of gradient accumulation, creates no optimizer state."""
        if not self.cuda or "after_optimizer_step" in self.values:
            return
        inner = getattr(optimizer, "optimizer", optimizer)  # accelerate wraps the optimizer
        state = getattr(inner, "state", None)
        if state is None or any(len(s) for s in state.values()):
            self.mark("after_optimizer_step")

    def result(self) -> dict[str, Any]:
        return {f"torch_alloc_{name}_mb": self.values.get(name) for name in self.NAMES}


def memory_figures(device: torch.device) -> dict[str, Any]:
    """The process's peak resident set, and torch's allocator peaks on a GPU."""
    out: dict[str, Any] = {
        "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "torch_max_allocated_mb": None,
        "torch_max_reserved_mb": None,
    }
    if device.type == "cuda":
        out["torch_max_allocated_mb"] = torch.cuda.max_memory_allocated(device) / MB
        out["torch_max_reserved_mb"] = torch.cuda.max_memory_reserved(device) / MB
    return out
