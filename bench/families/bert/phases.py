"""One BERT scenario's predicted memory: the terms, and the three phases whose maximum is the peak.

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

from ...memory import terms
from ...memory.prediction import MemoryModel, Prediction, shared_notes, summed
from ...memory.sharding import shard, world
from ...recipe.scenario import Scenario
from . import acts as bert_acts
from .dims import BertDims, bert_dims_from_config, buffer_bytes, param_count, param_tensors


# -- checkpoint_every = k (bench/worker/checkpointing.py): its activation term, kept in this one function
def every_k_layers(d: BertDims, sc: Scenario, tensors: list, layer: int, half: bool) -> tuple[int, int, int]:
    """(saved activations, the half weight copies autograd keeps, the recompute) when every k-th layer
    is checkpointed (layers 0, k, 2k, ...): those keep only their fp32 input, the others save what a
    layer saves (`layer`) and keep their half weight copies. The backward frees each layer as it passes
    it: the recompute of the highest checkpointed layer c adds to the layers below c only, so the
    recompute term is what that moment holds beyond the saved layers, and the layer's half copies."""
    b, s, k = sc.batch_size, sc.seq_len, sc.checkpoint_every
    body, _, top, recompute = terms.every_k_layers(d.layers, k, layer, s * b * d.hidden * 4)
    acts = body + bert_acts.embedding_activations(d, b, s) + bert_acts.head_activations(d, b, s, half)
    kept = [t for t in tensors if t.layer is None or t.layer % k != 0]
    last = [t for t in tensors if t.layer == top]
    copies = terms.autocast_copies(kept) if half else 0
    return acts, copies, recompute + (terms.autocast_copies(last) if half else 0)


def predict_bert(sc: Scenario, d: BertDims, assumed_gpus: int = 2) -> Prediction:
    """Pure arithmetic on the model's dimensions and the scenario's settings; per GPU for a
    multi-process scenario (sharding.py), gpus = "all" counted as `assumed_gpus`."""
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
    layer = bert_acts.layer_activations(d, b, s, half, eager, half_params=sc.strategy in ("fsdp", "deepspeed"))
    if sc.checkpoint_every:
        acts, saved_copies, recompute = every_k_layers(d, sc, tensors, layer, half)
    elif sc.grad_checkpointing:
        acts = bert_acts.checkpoint_activations(d, b, s, half)
        head_tensors = [t for t in tensors if t.layer is None]
        layer_tensors = [t for t in tensors if t.layer == d.layers - 1]
        saved_copies = terms.autocast_copies(head_tensors) if half else 0
        recompute = layer + (terms.autocast_copies(layer_tensors) if half else 0)
    else:
        acts = d.layers * layer + bert_acts.embedding_activations(d, b, s) + bert_acts.head_activations(d, b, s, half)
        saved_copies = terms.autocast_copies(tensors) if half else 0
        recompute = 0
    cache = terms.autocast_copies(tensors, include_biases=True) if half else 0
    n = world(sc, assumed_gpus)
    per_gpu = shard(sc, w, g, states, n)
    w, g, states = per_gpu.weights, per_gpu.grads, per_gpu.optimizer
    if not per_gpu.autocast_cached:
        cache = saved_copies = 0
        recompute = layer if sc.grad_checkpointing or sc.checkpoint_every else 0
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
            "backward transient": bert_acts.backward_transient(tensors, d, b, s),
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


MODEL = MemoryModel(bert_dims_from_config, predict_bert)
