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
    with OpLog() as log:  # the thousandth loss folds the lot: a few ops per thousand steps
        for _ in range(tracker.fold_every - 1):
            tracker.track(loss)
    assert "stack" in log.ops and "sum" in log.ops and tracker.losses == []
    assert len(log.ops) < 3 * tracker.fold_every  # a detach and a view a loss, and a dozen ops in all


def test_under_cuda_graphs_a_loss_is_kept_as_a_copy() -> None:
    """A CUDA graph's output is overwritten at its next replay: the tracker keeps its own copy."""
    tracker = LossTracker(copy=True)
    loss = torch.tensor(2.5)
    with OpLog() as log:
        tracker.track(loss)
    assert log.ops == ["detach", "clone"]
    loss.fill_(7.0)  # what the next replay does to the graph's output memory
    assert tracker.result()["final_loss"] == 2.5


def test_result_reads_the_last_loss_and_counts_nonfinite_ones() -> None:
    tracker = LossTracker()
    for value in (1.0, float("nan"), float("inf"), 0.5):
        tracker.track(torch.tensor(value, dtype=torch.bfloat16))
    assert tracker.result() == {"final_loss": 0.5, "loss_finite": True, "nonfinite_losses": 2}
    tracker.track(torch.tensor([float("nan")]))  # a 1-element loss, as some models return
    out = tracker.result()
    assert math.isnan(out["final_loss"]) and not out["loss_finite"] and out["nonfinite_losses"] == 3


def test_a_long_run_folds_its_losses_and_counts_across_the_folds() -> None:
    tracker = LossTracker(fold_every=3)
    values = [1.0, float("nan"), 2.0, 3.0, float("inf"), 4.0, float("nan"), 0.25]
    held = []
    for value in values:
        tracker.track(torch.tensor(value))
        held.append(len(tracker.losses))
    assert max(held) < 3  # folded every 3: a long run does not keep every loss
    assert tracker.result() == {"final_loss": 0.25, "loss_finite": True, "nonfinite_losses": 3}
    tracker.track(torch.tensor(float("nan")))  # the last loss sits in a fold of its own
    out = tracker.result()
    assert math.isnan(out["final_loss"]) and out["nonfinite_losses"] == 4


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
