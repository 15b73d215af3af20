"""One scenario's predicted memory: the terms, and the three phases whose maximum is the peak.

Steady state (step 2 on: the optimizer states exist), torch-allocated memory only:
  forward        weights + states + workspace + activations (+ autocast's cache of half weights)
                 (+ gradients when accumulating: they stay alive across micro-batches)
  backward       weights + states + workspace + activations + saved half copies
                 + the recompute of one layer (checkpointing) + the early-backward transient
                 (+ gradients when accumulating)
  optimizer_step weights + states + gradients + workspace + the step's temporaries
The CUDA context and the allocator's slack are not predicted; they come from a calibration run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..scenario import Scenario
from . import terms
from .config import BertDims, buffer_bytes, param_count, param_tensors
from .decoder import DecoderDims
from .sharding import shard, world

PHASES = ("forward", "backward", "optimizer_step")


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

    @property
    def peak(self) -> int:
        return max(self.phases.values())

    @property
    def peak_phase(self) -> str:
        return max(PHASES, key=lambda p: self.phases[p])

    @property
    def peak_term(self) -> str:
        """The largest term of the peak phase: what to shrink first."""
        terms = self.phase_terms.get(self.peak_phase) or {}
        return max(terms, key=lambda t: terms[t]) if terms else ""


def summed(phase_terms: dict[str, dict[str, int]]) -> dict[str, int]:
    return {phase: sum(terms.values()) for phase, terms in phase_terms.items()}


def shared_notes(sc: Scenario, n: int, assumed_gpus: int, predicted: bool = True) -> list[str]:
    """The notes every model's prediction carries: per GPU, unpredicted buffers, compile."""
    notes = []
    if sc.strategy != "none":
        assumed = f' (gpus = "all" counted as {assumed_gpus}; --gpus N to say)' if sc.gpus == "all" else ""
        notes.append(f"per GPU over {n} processes ({sc.strategy}){assumed}; activations of one GPU's micro-batch")
    if not predicted:
        notes.append("DeepSpeed offload: the GPU holds DeepSpeed's own buffers, which are not predicted")
    if sc.compile:
        notes.append(
            "torch.compile: Inductor picks what to save and adds its own buffers; these are the eager-mode "
            "figures, not held to the 15% target"
        )
    return notes


def predict(sc: Scenario, d: BertDims | DecoderDims, assumed_gpus: int = 2) -> Prediction:
    """Pure arithmetic on the model's dimensions and the scenario's settings; per GPU for a
    multi-process scenario (sharding.py), gpus = "all" counted as `assumed_gpus`."""
    if isinstance(d, DecoderDims):
        from .decoder_phases import predict_decoder

        return predict_decoder(sc, d, assumed_gpus)
    tensors = param_tensors(d)
    b, s = sc.batch_size, sc.seq_len
    half = sc.precision in terms.HALF
    eager = sc.attn_implementation == "eager"
    notes: list[str] = []

    w = terms.weights(tensors, buffer_bytes(d))
    g = terms.grads(tensors)
    states, paged = terms.optimizer_split(tensors, sc.optimizer, sc.engine)
    temp = terms.optimizer_temporaries(*terms.as_built(tensors, sc.optimizer, sc.engine))
    ws = terms.workspace()
    layer = terms.layer_activations(d, b, s, half, eager, half_params=sc.strategy in ("fsdp", "deepspeed"))
    if sc.grad_checkpointing:
        acts = terms.checkpoint_activations(d, b, s, half)
        head_tensors = [t for t in tensors if t.layer is None]
        layer_tensors = [t for t in tensors if t.layer == d.layers - 1]
        saved_copies = terms.autocast_copies(head_tensors) if half else 0
        recompute = layer + (terms.autocast_copies(layer_tensors) if half else 0)
    else:
        acts = d.layers * layer + terms.embedding_activations(d, b, s) + terms.head_activations(d, b, s, half)
        saved_copies = terms.autocast_copies(tensors) if half else 0
        recompute = 0
    cache = terms.autocast_copies(tensors, include_biases=True) if half else 0
    n = world(sc, assumed_gpus)
    per_gpu = shard(sc, w, g, states, n)
    w, g, states = per_gpu.weights, per_gpu.grads, per_gpu.optimizer
    if not per_gpu.autocast_cached:
        cache = saved_copies = 0
        recompute = layer if sc.grad_checkpointing else 0
    if sc.strategy in ("fsdp", "deepspeed"):
        temp = temp // n if per_gpu.weights else 0  # the step runs on the shard (or on the CPU)
    accumulated = g if sc.grad_accum_steps > 1 else 0
    common = {"weights": w, "optimizer states": states, "workspace": ws, "sharding buffers": per_gpu.resident_extra}
    resident = {**common, "accumulated gradients": accumulated}
    phase_terms = {
        "forward": {**resident, "activations": acts, "half weight copies": cache},
        "backward": {
            **resident,
            "activations": acts,
            "half weight copies": saved_copies,
            "recompute": recompute,
            "backward transient": terms.backward_transient(tensors, d, b, s),
            "gradient buckets": per_gpu.backward_extra,
        },
        "optimizer_step": {**common, "gradients": g, "step temporaries": temp},
    }
    phases = summed(phase_terms)
    notes += shared_notes(sc, n, assumed_gpus, per_gpu.predicted)
    notes += terms.optimizer_notes(sc.optimizer, sc.engine, paged)
    return Prediction(
        scenario=sc.name,
        params=param_count(d),
        weights=w,
        autocast_copies=saved_copies,
        grads=g,
        optimizer=states,
        optimizer_temp=temp,
        activations=acts,
        workspace=ws,
        phases=phases,
        notes=tuple(notes),
        phase_terms=phase_terms,
    )
