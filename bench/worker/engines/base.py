"""The inputs every engine gets: the scenario, the model and data, and the trackers to feed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ...scenario import Scenario
from ..clock import StepClock
from ..tracking import LossTracker, MemoryPhases


@dataclass(frozen=True)
class EngineInputs:
    """What an engine trains and what it reports to: the same for the Trainer and Accelerate."""

    sc: Scenario
    model: Any
    dataset: Any
    device: torch.device
    clock: StepClock
    losses: LossTracker
    phases: MemoryPhases
    scratch: Path
