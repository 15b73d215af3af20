"""The worker's trackers: loss tracking costs a launch-bound step no kernel; the forward hook goes
after the first forward."""

from __future__ import annotations

import math

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from bench.worker.tracking import LossTracker, MemoryPhases


class OpLog(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.ops.append(str(func.overloadpacket.__name__))
        return func(*args, **(kwargs or {}))


def test_tracking_a_loss_runs_no_computation() -> None:
    tracker = LossTracker()
    loss = torch.tensor(2.5, requires_grad=True) * 2
    with OpLog() as log:
        tracker.track(loss)
    assert log.ops == ["detach"]  # a reference, not a kernel: no isfinite, sum or add per step
    assert not tracker.losses[0].requires_grad  # the graph is not kept alive


def test_result_reads_the_last_loss_and_counts_nonfinite_ones() -> None:
    tracker = LossTracker()
    for value in (1.0, float("nan"), float("inf"), 0.5):
        tracker.track(torch.tensor(value, dtype=torch.bfloat16))
    assert tracker.result() == {"final_loss": 0.5, "loss_finite": True, "nonfinite_losses": 2}
    tracker.track(torch.tensor([float("nan")]))  # a 1-element loss, as some models return
    out = tracker.result()
    assert math.isnan(out["final_loss"]) and not out["loss_finite"] and out["nonfinite_losses"] == 3


def test_no_losses_reads_as_not_finite() -> None:
    out = LossTracker().result()
    assert math.isnan(out["final_loss"]) and out["loss_finite"] is False and out["nonfinite_losses"] == 0


def test_the_forward_hook_is_gone_after_the_first_forward() -> None:
    phases = MemoryPhases(torch.device("cpu"))
    model = torch.nn.Linear(2, 2)
    phases.mark_first_forward(model)
    assert len(model._forward_hooks) == 1
    model(torch.ones(1, 2))
    assert len(model._forward_hooks) == 0
    model(torch.ones(1, 2))  # later forwards still work
