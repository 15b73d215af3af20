"""Pruning before any GPU time: a candidate the memory model says cannot fit, beyond its error.

The memory model's peaks are within 4.1% of the measured on BERT and Llama (docs/memory.md; its
target is 15%). A candidate is pruned only when its predicted peak, lowered by that 15% target,
still exceeds the memory cap: so the model's stated error cannot prune a candidate that fits. A
prediction without activations is a lower bound: it prunes when it alone exceeds the cap. A
candidate the model cannot predict is raced, not pruned."""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import GpubenchError
from ..memory.terms import MB
from ..recipe.scenario import Scenario

MEMORY_MARGIN = 0.15  # the memory model's error target (docs/memory.md)


Peak = tuple[float, bool]  # a predicted peak in MB, and whether the activations are in it


def predicted_peaks(probes: Mapping[str, Scenario], model: str) -> dict[str, Peak]:
    """name -> the memory model's peak for each candidate it predicts (one prediction each: the
    pruning and the staged search's start both read it)."""
    from ..predict.predictions import prediction_of

    peaks = {}
    for name, sc in probes.items():
        try:
            prediction = prediction_of(sc, model)
        except GpubenchError:
            continue  # not predicted: the probe decides
        peaks[name] = (prediction.peak / MB, prediction.activations_predicted)
    return peaks


def prune_by_memory(peaks: Mapping[str, Peak], cap_mb: float) -> dict[str, str]:
    """name -> why, for each candidate predicted not to fit `cap_mb` beyond the margin."""
    pruned = {}
    for name, (peak, with_activations) in peaks.items():
        if not with_activations:
            if peak > cap_mb:  # a lower bound above the cap: no error of the model can make it fit
                pruned[name] = (
                    f"out of memory, predicted: {peak:,.0f} MB before any activation (a lower bound) "
                    f"against {cap_mb:,.0f} MB"
                )
        elif peak * (1 - MEMORY_MARGIN) > cap_mb:
            pruned[name] = (
                f"out of memory, predicted: {peak:,.0f} MB against {cap_mb:,.0f} MB, "
                f"beyond the memory model's {MEMORY_MARGIN:.0%} margin"
            )
    return pruned
