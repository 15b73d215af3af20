"""One decoder scenario's predicted memory: the terms and the forward / backward / optimizer-step
peaks, as bench/families/bert/phases.py does for BERT (same Prediction, same sharding rules).

  forward        model states + every layer's saved tensors + the head's + autocast's cache of
                 half weights + the loss's logits at its widest (the matmul's logits, the fp32
                 upcast and log-softmax's output; Liger: one chunk)
  backward       the same saved tensors + the saved half weight copies + one layer's recompute
                 (checkpointing) + the loss's gradients (nll's and log-softmax's, fp32 b x s x V)
  optimizer_step model states + gradients + the step's temporaries
Activation offload (saved tensors to pinned host memory): the GPU keeps one layer's saved tensors
in flight (the one being saved in the forward, the one brought back in the backward) and the
head's, which the loss's backward needs first.
"""

from __future__ import annotations

from ...memory import terms
from ...memory.prediction import MemoryModel, Prediction, shared_notes, summed
from ...memory.sharding import activation_split, model_shards, shard, world
from ...recipe.scenario import Scenario
from . import acts
from .dims import DecoderDims, buffer_bytes, decoder_dims_from_config, is_layer_linear, param_count, param_tensors
from .weights import decoder_states, head_tensor


def _half_weight_copies(d: DecoderDims, sc: Scenario, trainable: list, layer: int | None) -> tuple[int, int]:
    """(copies of the decoder layers' weights, of the head's) that autocast makes and autograd saves;
    `layer` limits the first to one layer (checkpointing's recompute, offload's one in flight)."""
    if sc.precision not in terms.HALF:
        return 0, 0
    if sc.peft == "none":
        linears = [t for t in param_tensors(d) if is_layer_linear(t) and (layer is None or t.layer == layer)]
        # torchao's Float8Linear saves the fp32 weight itself and casts it to fp8 on the fly
        body = 0 if sc.fp8 else sum(terms.alloc(t.numel * 2) for t in linears)
        return body, terms.alloc(head_tensor(d).numel * 2)
    adapters = [t for t in trainable if layer is None or t.layer == layer]
    body = sum(terms.alloc(t.numel * 2) for t in adapters)
    # a frozen fp32 lm_head (QLoRA's prepared model) is cast for the matmul and the copy saved
    head = terms.alloc(head_tensor(d).numel * 2) if sc.quantize_base != "none" else 0
    return body, head


# -- checkpoint_every = k (bench/worker/checkpointing.py): its activation term, kept in this one function
def every_k_layers(
    d: DecoderDims, sc: Scenario, one_layer: int, input_bytes: int, body_copies: int, last_copies: int
) -> tuple[int, int, int]:
    """(the body's saved activations, the half weight copies autograd keeps, the recompute) when every
    k-th layer is checkpointed (layers 0, k, 2k, ...): those keep only their input (`input_bytes` each,
    as every-layer checkpointing keeps), the others save what a layer saves (`one_layer`) and keep their
    half weight copies. The backward frees each layer as it passes it, so the recompute of the highest
    checkpointed layer c adds to the saved tensors of the layers below c only: the recompute term is
    what that moment holds beyond the saved body, if anything, and the layer's half weight copies."""
    layers = d.layers
    body, checkpointed, _, recompute = terms.every_k_layers(layers, sc.checkpoint_every, one_layer, input_bytes)
    return body, body_copies * (layers - checkpointed) // layers, recompute + last_copies


def predict_decoder(sc: Scenario, d: DecoderDims, assumed_gpus: int = 2) -> Prediction:
    notes: list[str] = []
    tokens, seq = sc.batch_size * sc.seq_len, sc.seq_len
    st = decoder_states(d, sc, buffer_bytes(d))
    trainable = list(st.trainable)
    head_trains = sc.peft == "none"
    g = terms.grads(trainable)
    states, paged = terms.optimizer_split(trainable, sc.optimizer, sc.engine)
    temp = terms.optimizer_temporaries(*terms.as_built(trainable, sc.optimizer, sc.engine))
    ws = terms.workspace()

    f = acts.flow(sc)
    split, head_split = activation_split(sc)  # a device mesh's tp and cp ranks share the activations
    one_layer = acts.layer(d, f, seq) * tokens // split
    hd = acts.head(d, f, tokens // head_split, head_trains, st.head_bytes)
    body_copies, head_copy = _half_weight_copies(d, sc, trainable, None)
    last_copies, _ = _half_weight_copies(d, sc, trainable, d.layers - 1)
    recompute = 0
    if sc.activation_offload:
        body = one_layer  # one layer's saved tensors in flight; the rest in pinned host memory
        saved_copies = last_copies + head_copy
    elif sc.grad_checkpointing:
        body = acts.checkpointed(d, f, tokens) // head_split  # the layers' inputs: split by cp only
        saved_copies = head_copy
        recompute = one_layer + last_copies
    elif sc.checkpoint_every:
        layer_input = acts.checkpointed(d, f, tokens) // d.layers // head_split
        body, kept_copies, recompute = every_k_layers(d, sc, one_layer, layer_input, body_copies, last_copies)
        saved_copies = kept_copies + head_copy
    else:
        body = acts.layers(d, f, tokens, seq) // split
        saved_copies = body_copies + head_copy
    cache = body_copies + head_copy  # autocast's cache holds every cast weight until the forward ends

    n = world(sc, assumed_gpus)
    per_gpu = shard(sc, st.weights, g, states, n)
    w, g, states = per_gpu.weights, per_gpu.grads, per_gpu.optimizer
    if not per_gpu.autocast_cached:
        cache = saved_copies = 0
        recompute = one_layer if sc.grad_checkpointing or sc.checkpoint_every else 0
    if sc.strategy in ("fsdp", "deepspeed"):
        temp = temp // model_shards(sc, n) if per_gpu.weights else 0
    accumulated = g if sc.grad_accum_steps > 1 else 0
    common = {"weights": w, "optimizer states": states, "workspace": ws, "sharding buffers": per_gpu.resident_extra}
    resident = {**common, "accumulated gradients": accumulated}
    saved = body + hd.saved
    phase_terms = {
        "forward": {
            **resident,
            "activations": saved,
            "half weight copies": cache,
            "logits": hd.logits_saved + hd.forward_extra,
        },
        "backward": {
            **resident,
            "activations": saved,
            "half weight copies": saved_copies,
            "recompute": recompute,
            "logits": hd.logits_saved + hd.backward_extra,
            "gradient buckets": per_gpu.backward_extra,
        },
        "optimizer_step": {**common, "gradients": g, "step temporaries": temp},
    }
    notes += _notes(sc, n, assumed_gpus, paged)
    return Prediction(
        scenario=sc.name,
        params=param_count(d),
        weights=w,
        autocast_copies=saved_copies,
        grads=g,
        optimizer=states,
        optimizer_temp=temp,
        activations=saved + hd.logits_saved,
        workspace=ws,
        phases=summed(phase_terms),
        notes=tuple(notes),
        phase_terms=phase_terms,
    )


def _notes(sc: Scenario, n: int, assumed_gpus: int, paged: int) -> list[str]:
    notes = shared_notes(sc, n, assumed_gpus)
    if sc.activation_offload:
        notes.append(
            "activation offload: saved tensors in pinned host memory; the GPU holds one layer's and the head's"
        )
    if sc.attn_implementation == "eager":
        notes.append("eager attention on a decoder: the s x s probabilities are counted roughly (no dropout)")
    notes += terms.optimizer_notes(sc.optimizer, sc.engine, paged)
    return notes


MODEL = MemoryModel(decoder_dims_from_config, predict_decoder)
