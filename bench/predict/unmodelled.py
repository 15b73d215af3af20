"""The memory prediction of a model whose family has no activation model (bench/families: decoder,
moe, vit, generic): its parameter tensors read off the model built on the meta device (exact, for
any architecture), the optimizer's rules tensor by tensor, and "activations not predicted"
(bench/memory/states.py). LoRA adds its adapters (rank x (in + out) per targeted layer: the
layers bench/families/build.py lora_layers finds; fp32, trained) over a frozen base stored in the
autocast dtype; a QLoRA base counts its 4- or 8-bit payload (quantization constants left out),
the rest of the base in fp32 as peft casts it. Imports torch and transformers when called."""

from __future__ import annotations

from ..families.build import chosen_layers, inventory
from ..memory.prediction import Prediction
from ..memory.states import predict_states_only
from ..memory.tensors import ParamTensor, from_named_parameters
from ..recipe.scenario import Scenario

PAYLOAD_BYTES = {"nf4": 0.5, "int8": 1.0}


def predict_generic(sc: Scenario, model: str, assumed_gpus: int = 2) -> Prediction:
    """The prediction of `sc` on a resolved `model` from its meta-built tensors."""
    params, linears, buffers = inventory(model, sc.task)
    tensors = from_named_parameters(params)
    if sc.peft == "none":
        return predict_states_only(sc, tensors, buffers=buffers, assumed_gpus=assumed_gpus)
    targets = chosen_layers(linears, sc.lora_targets)
    adapters = [ParamTensor(f"{fqn}.lora_A.weight", (sc.lora_rank, i), None) for fqn, i, _ in targets]
    adapters += [ParamTensor(f"{fqn}.lora_B.weight", (o, sc.lora_rank), None) for fqn, _, o in targets]
    base = [t.name for t in tensors]
    if sc.quantize_base == "none":
        half = 2 if sc.precision in ("bf16", "fp16") else 4  # the frozen base in the autocast dtype
        return predict_states_only(
            sc, [*tensors, *adapters], frozen=base, frozen_bytes=half, buffers=buffers, assumed_gpus=assumed_gpus
        )
    quantized = {f"{fqn}.weight" for fqn, _, _ in targets}
    payload = sum(t.numel for t in tensors if t.name in quantized) * PAYLOAD_BYTES[sc.quantize_base]
    kept = [t for t in tensors if t.name not in quantized]
    return predict_states_only(
        sc,
        [*kept, *adapters],
        frozen=[t.name for t in kept],
        frozen_bytes=4,
        buffers=buffers + int(payload),
        assumed_gpus=assumed_gpus,
    )
