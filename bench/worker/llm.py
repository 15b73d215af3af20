"""The decoder techniques that change the model before an engine sees it (docs/llm.md): LoRA on a
frozen base (peft), the QLoRA base quantized by bitsandbytes, and torchao's float8 linear layers.

Dtypes, decided with the memory model (bench/memory):
- no LoRA: every parameter fp32 (mixed precision is autocast), as for BERT;
- LoRA under bf16/fp16: the frozen base is stored in that half dtype (nothing trains it, so there is
  no fp32 master copy), the adapters fp32 (peft's autocast_adapter_dtype), autocast stays on;
  LoRA under fp32: everything fp32;
- QLoRA: the base's linear layers in 4-bit NF4 (or int8), then peft's prepare_model_for_kbit_training
  casts every other half-precision parameter (embeddings, norms, lm_head) to fp32; adapters fp32.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from ..families import BY_TYPE, is_inline
from ..families.base import load
from ..families.build import CONV1D, chosen_layers, lora_layers
from ..families.resolve import has_weights
from ..recipe.scenario import Scenario
from .model import build_model, build_random_on_cpu, load_checkpoint, task_of

HALF = {"bf16": torch.bfloat16, "fp16": torch.float16}


def base_dtype(sc: Scenario) -> torch.dtype:
    """The frozen base's storage dtype: half under LoRA with a half precision, fp32 otherwise."""
    return HALF.get(sc.precision, torch.float32) if sc.peft == "lora" else torch.float32


def compute_dtype(sc: Scenario) -> torch.dtype:
    """bitsandbytes' compute dtype for the quantized base: fp16 under fp16, bf16 otherwise."""
    return torch.float16 if sc.precision == "fp16" else torch.bfloat16


def build_decoder(sc: Scenario, model: str, device: torch.device, shared: Path) -> Any:
    """The model the engine trains: the plain model, or its quantized / half-precision base with
    LoRA adapters; float8 linear layers where fp8 = true. `shared`: the folder this run's workers
    share (random_checkpoint)."""
    if sc.quantize_base != "none":
        built = quantized_base(sc, model, device, shared)
    else:
        built = build_model(model, device, sc.attn_implementation, base_dtype(sc), sc.task, sc.experts_implementation)
    if sc.fp8:
        to_float8(built)
    if sc.peft == "lora":
        built = with_lora(sc, built, task_of(model, sc.task))
    return built


def build_trained(sc: Scenario, model: str, device: torch.device, shared: Path) -> tuple[Any, str]:
    """(the model a scenario trains, its task): a causal LM or a LoRA row through build_decoder,
    any other model as it is built (the worker and validation/model_loop.py both take this)."""
    task = task_of(model, sc.task)
    if task == "causal-lm" or sc.peft != "none":
        return build_decoder(sc, model, device, shared), task
    built = build_model(
        model, device, sc.attn_implementation, task=sc.task, experts_implementation=sc.experts_implementation
    )
    return built, task


def quantized_base(sc: Scenario, model: str, device: torch.device, shared: Path) -> Any:
    """The QLoRA recipe's base: loaded through transformers' BitsAndBytesConfig, then prepared by
    peft.prepare_model_for_kbit_training. transformers quantizes only while loading a checkpoint
    (from_config takes no quantization_config), so a preset is loaded from its random weights saved
    as a checkpoint (random_checkpoint): the GPU's memory figures hold only the quantized model."""
    from peft import prepare_model_for_kbit_training
    from transformers import BitsAndBytesConfig

    if sc.quantize_base == "nf4":
        config = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=compute_dtype(sc),
        )
    else:
        config = BitsAndBytesConfig(load_in_8bit=True)
    extra: dict[str, Any] = {"quantization_config": config}
    if sc.attn_implementation != "default":
        extra["attn_implementation"] = sc.attn_implementation
    source = model if has_weights(model) else random_checkpoint(model, compute_dtype(sc), sc.seed, shared, sc.task)
    built = load_checkpoint(source, device, compute_dtype(sc), task=sc.task, **extra)
    return prepare_model_for_kbit_training(built, use_gradient_checkpointing=sc.grad_checkpointing)


def random_checkpoint(model: str, dtype: torch.dtype, seed: int, shared: Path, task: str = "auto") -> Path:
    """A preset's random weights (those torch.manual_seed(seed) gives) saved as safetensors in
    `shared`, built on the CPU by the run's first worker that needs them and loaded by the rest
    (llama-1b's build, save and quantized load took 50-86 s on the H200 host with the weights drawn
    twice; build_random_on_cpu draws them once, 1.7-1.9x faster on a 2-core CPU). Written under a
    temporary name and renamed, so a worker never reads a partial copy; the global RNG is left as
    it was, so a worker that builds and one that loads go on alike. The run deletes the folder when it
    ends, unless --time-limit stopped it (a --resume loads the copy)."""
    stem = model
    if "/" in model or is_inline(model):  # a path or an inline config: a short, safe name
        short = "model" if is_inline(model) else Path(model).name[:40]
        stem = f"{short}-{hashlib.sha256(model.encode()).hexdigest()[:12]}"
    name = f"{stem}-{str(dtype).removeprefix('torch.')}-seed{seed}"
    target = shared / name
    if not (target / "config.json").is_file():
        shared.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=shared))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            build_random_on_cpu(model, dtype, task).save_pretrained(partial)
        try:
            partial.rename(target)
        except OSError:  # another worker of the run renamed its copy in first
            shutil.rmtree(partial, ignore_errors=True)
    return target


# the task -> peft's task_type (None: a plain PeftModel) and the head that trains fully beside the adapters
PEFT_TASKS: dict[str, tuple[str | None, list[str] | None]] = {
    "causal-lm": ("CAUSAL_LM", None),
    "sequence-classification": ("SEQ_CLS", None),  # peft keeps the classifier (score) trainable
    "image-classification": (None, ["classifier"]),
}


def lora_targets(sc: Scenario, model: Any) -> list[str]:
    """The full names of the layers a scenario's LoRA adapts (bench/families/build.py lora_layers:
    nn.Linear and GPT-2's Conv1D, the head, routers and routed experts left out), picked by
    `lora_targets` ("all-linear" or leaf names)."""
    return [fqn for fqn, _, _ in chosen_layers(lora_layers(model), sc.lora_targets)]


@contextlib.contextmanager
def no_v4_moe_renames() -> Iterator[None]:
    """peft (0.21) rewrites a LoRA config for transformers 5's MoE models as if it named transformers
    4's per-expert layers: every target ending in gate_proj, up_proj or down_proj (a dense MLP's, a
    shared expert's) is moved onto the routed experts' 3-D parameters. That serves loading old
    adapters; a new adapter on the layers gpubench names needs none of it, so it is off here."""
    from peft.utils import transformers_weight_conversion as conversion

    original = getattr(conversion, "convert_peft_config_for_transformers", None)
    if original is None:  # a peft without the rewrite
        yield
        return
    conversion.convert_peft_config_for_transformers = lambda *args, **kwargs: None  # type: ignore[attr-defined]
    try:
        yield
    finally:
        conversion.convert_peft_config_for_transformers = original  # type: ignore[attr-defined]


def with_lora(sc: Scenario, model: Any, task: str = "causal-lm") -> Any:
    """peft's LoRA adapters on exactly the layers lora_targets names (by full name); the base is
    frozen. A model where peft adapted anything else, or fewer, is an error, never a quiet row."""
    from peft import LoraConfig, get_peft_model

    targets = lora_targets(sc, model)
    if not targets:  # plan time refuses it (bench/families/plancheck.py); a worker says it again
        raise ValueError(f"lora_targets = {sc.lora_targets!r}: no linear layer of the model to adapt")
    task_type, head = PEFT_TASKS[task]
    conv1d = {fqn for fqn, module in model.named_modules() if type(module).__name__ == CONV1D}
    config = LoraConfig(
        r=sc.lora_rank,
        lora_alpha=sc.lora_alpha,
        target_modules=targets,
        task_type=task_type,
        modules_to_save=head,
        fan_in_fan_out=set(targets) <= conv1d,  # Conv1D keeps its weight as (in, out)
    )
    if sc.grad_checkpointing:
        # with a frozen embedding, the checkpointed blocks' input must require grad for the adapters'
        # gradients to flow (what transformers and peft do for their own users)
        model.enable_input_require_grads()
    with no_v4_moe_renames():
        wrapped = get_peft_model(model, config)  # adapters in fp32 (autocast_adapter_dtype=True)
    adapted = adapted_layers(wrapped)
    if len(adapted) != len(targets):
        raise RuntimeError(f"peft adapted {len(adapted)} layers, not the {len(targets)} gpubench named")
    return wrapped


def adapted_layers(model: Any) -> list[str]:
    """The full names of the layers that carry LoRA adapters (peft's LoraLayer) in a model."""
    from peft.tuners.lora import LoraLayer

    return [fqn for fqn, module in model.named_modules() if isinstance(module, LoraLayer)]


def lora_figures(model: Any) -> dict[str, Any]:
    """The row's lora_modules (the adapted layers' leaf names, sorted) and lora_layers (how many),
    read off the model that trained; nothing for a model without adapters."""
    if not hasattr(model, "peft_config"):
        return {}
    adapted = adapted_layers(model)
    return {"lora_modules": ",".join(sorted({f.rsplit(".", 1)[-1] for f in adapted})), "lora_layers": len(adapted)}


def float8_eligible(module: torch.nn.Module, fqn: str) -> bool:
    """torchao's module_filter_fn: not the output projection (lm_head), and only linear layers whose
    dimensions are multiples of 16 (what the float8 matmul needs)."""
    if fqn.split(".")[-1] == "lm_head":
        return False
    if isinstance(module, torch.nn.Linear):
        return module.in_features % 16 == 0 and module.out_features % 16 == 0
    return True


def to_float8(model: Any) -> int:
    """Swap the eligible nn.Linear layers for torchao's Float8Linear (dynamic tensorwise scaling, the
    default recipe: composes with torch.compile and FSDP2); returns how many were swapped."""
    from torchao.float8 import convert_to_float8_training

    convert_to_float8_training(model, module_filter_fn=float8_eligible)
    return sum(type(m).__name__ == "Float8Linear" for m in model.modules())


# the four kernels of docs/llm.md; the plain cross-entropy is off (the fused one replaces it)
LIGER_KERNELS = {
    "rope": True,
    "rms_norm": True,
    "swiglu": True,
    "fused_linear_cross_entropy": True,
    "cross_entropy": False,
}


def fused_loss_eager(sc: Scenario) -> None:
    """With `liger` and the whole model compiled (either engine), keep Liger's fused linear
    cross-entropy out of the compiled graph: a graph break
    (torch.compiler.disable) around the functional API its causal-LM loss calls
    (`liger_kernel.transformers.functional.liger_fused_linear_cross_entropy`, looked up on the module
    at each call), so the loss runs eager between compiled graphs. Traced, it fails: dynamo's fake
    tensors reject the kernel's addmm of bf16 inputs into an fp32 gradient buffer (TorchRuntimeError;
    liger-kernel 0.8.5, torch 2.11 on the H200). Wrapping the autograd Function's `apply` would not
    do: dynamo recognises the Function class and traces it whatever `apply` holds. Once per worker."""
    if not (sc.liger and sc.compile and sc.compile_scope == "model"):
        return
    from liger_kernel.transformers import functional

    loss = functional.liger_fused_linear_cross_entropy
    if getattr(loss, "gpubench_eager", False):
        return
    eager = torch.compiler.disable(loss)
    eager.gpubench_eager = True  # type: ignore[attr-defined]
    functional.liger_fused_linear_cross_entropy = eager


def apply_liger(model: Any) -> None:
    """Liger's kernels for this model's type on this instance (the accelerate engine; the Trainer
    has its own `use_liger_kernel`, which calls the same function): RoPE, RMSNorm and SwiGLU (or the
    type's own), and the fused linear cross-entropy, which replaces the instance's forward so the
    logits are never materialised. Liger's per-type function takes the kernels its signature names."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # under a PeftModel
    fam = BY_TYPE.get(base.config.model_type)
    if fam is not None and fam.liger_patch is not None:  # the family's own (Family.liger_patch)
        load(fam.liger_patch)(**LIGER_KERNELS, model=base)
        return
    from liger_kernel.transformers import _apply_liger_kernel_to_instance

    _apply_liger_kernel_to_instance(model=base, **LIGER_KERNELS)
