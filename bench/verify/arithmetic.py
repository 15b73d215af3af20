"""The claims whose figure is arithmetic on the built model, not a training run: bytes of model
states per parameter and optimizer memory (the memory model, bench/memory via bench/predict), and
training FLOPs against C = 6PD (the model built on torch's meta device, counted by
bench/measure/flopcount.py; torch is imported only here). Each returns (figure, how it was found)."""

from __future__ import annotations

from ..families.resolve import resolve_model
from ..memory.prediction import Prediction
from ..recipe.scenario import Scenario
from .claims import Claim


def _prediction(sc: Scenario) -> Prediction:
    from ..predict.predictions import prediction_of

    return prediction_of(sc, resolve_model(sc.model, "cuda"))


def bytes_per_param(sc: Scenario) -> tuple[float, str]:
    """(weights + gradients + optimizer states) / parameters, as the memory model counts them for
    this scenario's model, precision and optimizer (activations and temporaries apart)."""
    p = _prediction(sc)
    states = p.weights + p.grads + p.optimizer
    params = p.params
    return states / params, (
        f"memory model, {resolve_model(sc.model, 'cuda')} {sc.precision} {sc.optimizer}: weights "
        f"{p.weights / params:.2f} + grads {p.grads / params:.2f} + optimizer "
        f"{p.optimizer / params:.2f} B/param, {params / 1e6:.1f} M params"
    )


def optimizer_memory_ratio(reference: Scenario, treatment: Scenario) -> tuple[float, str]:
    """The memory model's persistent optimizer states, treatment / reference."""
    a, b = _prediction(reference), _prediction(treatment)
    ref, new = a.optimizer, b.optimizer
    return (
        new / ref,
        f"memory model: {treatment.optimizer} {new / 2**20:.1f} MB vs {reference.optimizer} {ref / 2**20:.1f} MB",
    )


def flops_vs_6pd(sc: Scenario) -> tuple[float, str]:
    """The FLOPs of one training token of the model built on the meta device (flopcount's generic
    count: every matmul weight 6 FLOPs a token, plus attention, causal for a causal LM) over 6 x its
    parameters (all of them, embeddings included, as C = 6PD is usually read)."""
    from ..families import build
    from ..measure import flopcount

    model_name = resolve_model(sc.model, "cuda")
    task = build.task_of(model_name, sc.task)
    model = build.build_on_meta(model_name, task)
    params = sum(p.numel() for p in model.parameters())
    per_sample = flopcount.generic_flops_per_sample(model, sc.seq_len, causal=task == "causal-lm")
    counted = per_sample / sc.seq_len
    return counted / (6 * params), (
        f"{model_name} at seq {sc.seq_len}: {counted / 1e9:.3g} GFLOPs a token counted, 6P = "
        f"{6 * params / 1e9:.3g} G ({params / 1e6:.1f} M params); attention and non-matmul parameters make the gap"
    )


def arithmetic(claim: Claim, scenarios: dict[str, Scenario]) -> tuple[float, str]:
    ref = scenarios[claim.reference]
    if claim.quantity == "bytes_per_param":
        return bytes_per_param(ref)
    if claim.quantity == "optimizer_memory_ratio":
        return optimizer_memory_ratio(ref, scenarios[claim.treatment])
    if claim.quantity == "flops_vs_6pd":
        return flops_vs_6pd(ref)
    raise ValueError(f"{claim.quantity} is not arithmetic")
