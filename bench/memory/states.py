"""The memory of any model from its parameter tensors alone: parameters, gradients and optimizer
states tensor by tensor, and a Prediction that says its activations are not predicted.

What a family with no activation model gets (docs/extending.md): the rules are terms.py's, per
tensor - fp32 master weights and fp32 gradients for every tensor that trains; AdamW's two fp32
moments; bitsandbytes' 8-bit states from 4096 elements (32-bit below, and for nn.Embedding
weights under the Trainer); Adafactor's factored second moment for tensors of 2 or more
dimensions; none for SGD. A frozen tensor (LoRA's base) is stored at `frozen_bytes` per element
and has no gradient and no optimizer state. Pure arithmetic, no torch.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from ..recipe.scenario import Scenario
from . import terms
from .prediction import ACTIVATIONS_NOT_PREDICTED, Prediction, shared_notes, summed
from .sharding import shard, world
from .tensors import ParamTensor

MASTER_BYTES = 4  # a trained tensor is fp32 (the Trainer's fp16/bf16 is autocast over fp32 weights)
GRAD_BYTES = 4  # gradients take the parameters' dtype


@dataclass(frozen=True)
class TensorStates:
    """One tensor's model states in bytes, each rounded up as the caching allocator does."""

    name: str
    trainable: bool
    weights: int
    grads: int
    optimizer: int  # in torch's allocator
    paged: int  # in CUDA unified memory (a paged 8-bit optimizer), outside torch's allocator

    @property
    def total(self) -> int:
        """What this tensor holds in torch's allocator."""
        return self.weights + self.grads + self.optimizer


@dataclass(frozen=True)
class ModelStates:
    """Parameters + gradients + optimizer states of one model under one optimizer, on one GPU."""

    tensors: tuple[TensorStates, ...]
    buffers: int  # the model's buffers (not parameters), counted with the weights
    shared_optimizer: int  # optimizer state of no one tensor (bitsandbytes' quantization maps)
    step_temporaries: int  # inside optimizer.step() only
    notes: tuple[str, ...] = ()

    @property
    def weights(self) -> int:
        return sum(t.weights for t in self.tensors) + self.buffers

    @property
    def grads(self) -> int:
        return sum(t.grads for t in self.tensors)

    @property
    def optimizer(self) -> int:
        return sum(t.optimizer for t in self.tensors) + self.shared_optimizer

    @property
    def paged(self) -> int:
        return sum(t.paged for t in self.tensors)

    @property
    def total(self) -> int:
        """Weights + gradients + optimizer states in torch's allocator."""
        return self.weights + self.grads + self.optimizer


def model_states(
    tensors: Iterable[ParamTensor],
    optimizer: str,
    engine: str = "trainer",
    *,
    frozen: Collection[str] = (),
    frozen_bytes: int = MASTER_BYTES,
    buffers: int = 0,
) -> ModelStates:
    """Model states of any tensor list; `frozen` names the tensors that do not train.

    `optimizer` and `engine` are a scenario's (gpubench's own optimizers such as adamw_foreach
    count as the Trainer's equivalent, terms.as_built)."""
    tensors = list(tensors)
    unknown = set(frozen) - {t.name for t in tensors}
    if unknown:
        raise ValueError(f"frozen names no tensor of the model: {', '.join(sorted(unknown))}")
    if frozen_bytes < 1 or buffers < 0:
        raise ValueError(f"frozen_bytes {frozen_bytes} must be 1 or more and buffers {buffers} not negative")
    trained = [t for t in tensors if t.name not in frozen]
    _, rule, rule_engine = terms.as_built(trained, optimizer, engine)
    out = []
    for t in tensors:
        if t.name in frozen:
            out.append(TensorStates(t.name, False, terms.alloc(t.numel * frozen_bytes), 0, 0, 0))
            continue
        state = terms.tensor_optimizer_state(t, rule, rule_engine)
        paged = terms.tensor_paged_state(t, optimizer, engine)
        weights, grads = terms.alloc(t.numel * MASTER_BYTES), terms.alloc(t.numel * GRAD_BYTES)
        out.append(TensorStates(t.name, True, weights, grads, state - paged, paged))
    shared = terms.shared_optimizer_state(rule)
    temporaries = terms.optimizer_temporaries(trained, rule, rule_engine) if trained else 0
    paged_total = sum(t.paged for t in out)
    notes = tuple(terms.optimizer_notes(optimizer, engine, paged_total))
    return ModelStates(tuple(out), buffers, shared, temporaries, notes)


def predict_states_only(
    sc: Scenario,
    tensors: Iterable[ParamTensor],
    *,
    frozen: Collection[str] = (),
    frozen_bytes: int = MASTER_BYTES,
    buffers: int = 0,
    assumed_gpus: int = 2,
) -> Prediction:
    """A scenario's prediction from its model's tensors with activations not predicted: the model
    states (sharded per GPU as sharding.py says), the step's temporaries and the workspaces."""
    tensors = list(tensors)
    st = model_states(tensors, sc.optimizer, sc.engine, frozen=frozen, frozen_bytes=frozen_bytes, buffers=buffers)
    n = world(sc, assumed_gpus)
    per_gpu = shard(sc, st.weights, st.grads, st.optimizer, n)
    w, g, states = per_gpu.weights, per_gpu.grads, per_gpu.optimizer
    temp = st.step_temporaries
    if sc.strategy in ("fsdp", "deepspeed"):
        temp = temp // n if per_gpu.weights else 0  # the step runs on the shard (or on the CPU)
    ws = terms.workspace()
    accumulated = g if sc.grad_accum_steps > 1 else 0
    common = {"weights": w, "optimizer states": states, "workspace": ws, "sharding buffers": per_gpu.resident_extra}
    resident = {**common, "accumulated gradients": accumulated}
    phase_terms = {
        "forward": dict(resident),
        "backward": {**resident, "gradient buckets": per_gpu.backward_extra},
        "optimizer_step": {**common, "gradients": g, "step temporaries": temp},
    }
    notes = [*shared_notes(sc, n, assumed_gpus, per_gpu.predicted), *st.notes, ACTIVATIONS_NOT_PREDICTED]
    return Prediction(
        scenario=sc.name,
        params=sum(t.numel for t in tensors),
        weights=w,
        autocast_copies=0,
        grads=g,
        optimizer=states,
        optimizer_temp=temp,
        activations=0,
        workspace=ws,
        phases=summed(phase_terms),
        notes=tuple(notes),
        phase_terms=phase_terms,
        activations_predicted=False,
    )
