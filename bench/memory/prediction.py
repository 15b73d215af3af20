"""What a prediction is, whatever the model family: bytes per term, and the three phases whose
maximum is the peak; plus the notes every prediction shares (per GPU, offload, compile).

Steady state (step 2 on: the optimizer states exist), torch-allocated memory only. A family with
its own memory model (a `MemoryModel`, which its row names: bench/families/) fills `phase_terms`;
the CUDA context and the allocator's slack are not predicted (a calibration run gives them:
bench/predict/measured.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..recipe import mesh
from ..recipe.scenario import Scenario

PHASES = ("forward", "backward", "optimizer_step")
# what depends on what the forward saves: the fields, and the phase terms, that a prediction with
# activations not predicted leaves out
SAVED_TERMS = ("autocast_copies", "activations")
ACTIVATION_TERMS = frozenset({"activations", "half weight copies", "recompute", "logits", "backward transient"})
ACTIVATIONS_NOT_PREDICTED = (
    "activations not predicted (no activation model for this model family): the peak counts the model "
    "states, the optimizer step's temporaries and the workspaces only, so it is a lower bound"
)


@dataclass(frozen=True)
class Prediction:
    """Bytes per term for one scenario; `phases` holds the three phase peaks."""

    scenario: str
    params: int
    weights: int  # fp32 weights + buffers
    autocast_copies: int  # half weight copies saved for backward, alive at the end of the forward
    grads: int
    optimizer: int  # persistent optimizer state
    optimizer_temp: int  # inside optimizer.step() only
    activations: int  # saved for backward by one micro-batch at the end of its forward
    workspace: int  # cuBLAS workspaces (forward thread + autograd thread)
    phases: dict[str, int]
    notes: tuple[str, ...] = ()
    # phase -> term -> bytes: what each phase's figure is made of (they sum to `phases`)
    phase_terms: dict[str, dict[str, int]] = field(default_factory=dict)
    # False for a family with no activation model: `activations` is 0, no phase counts any, and the
    # peak is a lower bound (model states, step temporaries, workspaces); the notes say so
    activations_predicted: bool = True

    def __post_init__(self) -> None:
        if not self.activations_predicted:
            counted = [p for p, t in self.phase_terms.items() if ACTIVATION_TERMS & {k for k, v in t.items() if v}]
            if self.activations or self.autocast_copies or counted:
                raise ValueError(
                    f"{self.scenario}: activations are not predicted, yet the prediction counts some "
                    f"(activations {self.activations}, half copies {self.autocast_copies}, phases {counted})"
                )
            if ACTIVATIONS_NOT_PREDICTED not in self.notes:
                raise ValueError(f"{self.scenario}: activations are not predicted and no note says so")

    def term(self, name: str) -> int | None:
        """One of the byte fields by name; None for those a family without an activation model
        does not predict (SAVED_TERMS)."""
        if name in SAVED_TERMS and not self.activations_predicted:
            return None
        value: int = getattr(self, name)
        return value

    @property
    def peak(self) -> int:
        """The largest phase; a lower bound where activations are not predicted."""
        return max(self.phases.values())

    @property
    def peak_phase(self) -> str:
        return max(PHASES, key=lambda p: self.phases[p])

    @property
    def peak_term(self) -> str:
        """The largest term of the peak phase: what to shrink first."""
        terms = self.phase_terms.get(self.peak_phase) or {}
        return max(terms, key=lambda t: terms[t]) if terms else ""


@dataclass(frozen=True)
class MemoryModel:
    """A family's own memory model (Family.memory names it): its dimensions from a config (BadInput
    naming `origin` when they are unusable; the dimensions carry the config's `model_type` as a
    class variable, by which bench/families/memory_model.py finds the family again), and the prediction
    on them: per GPU, gpus = "all" counted as the assumed GPUs."""

    dims_from_config: Callable[[dict[str, Any], str], Any]  # (config, origin) -> that family's dims
    predict: Callable[[Scenario, Any, int], Prediction]  # (scenario, that family's dims, assumed GPUs)


def summed(phase_terms: dict[str, dict[str, int]]) -> dict[str, int]:
    return {phase: sum(terms.values()) for phase, terms in phase_terms.items()}


def shared_notes(sc: Scenario, n: int, assumed_gpus: int, predicted: bool = True) -> list[str]:
    """The notes every model's prediction carries: per GPU, unpredicted buffers, compile."""
    notes = []
    if sc.strategy != "none":
        assumed = f' (gpus = "all" counted as {assumed_gpus}; --gpus N to say)' if sc.gpus == "all" else ""
        how = sc.strategy
        if mesh.asked(vars(sc)):
            try:
                layout = mesh.resolve(vars(sc), n)
                sizes = zip(mesh.DIMS, layout.shape, strict=True)
                how += " on a mesh: " + " x ".join(f"{name} {size}" for name, size in sizes)
            except ValueError as exc:
                how += f" on a mesh that does not fit {n} processes: {exc}"
        notes.append(f"per GPU over {n} processes ({how}){assumed}; activations of one GPU's micro-batch")
    if not predicted:
        notes.append("DeepSpeed offload: the GPU holds DeepSpeed's own buffers, which are not predicted")
    if sc.compile:
        notes.append(
            "torch.compile: Inductor picks what to save and adds its own buffers; these are the eager-mode "
            "figures, not held to the 15% target"
        )
    return notes
