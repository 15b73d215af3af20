"""What ran, as the row records it (docs/columns.md, "What ran"): the class built, its task and
family, and what one sample's tokens are, read off the built model and its config.

A token is what the model's attention runs over: a text model's sequence (`seq_len`), a vision
transformer's patches, (image_size / patch_size)^2, plus the tokens its embeddings add (a class
token, DeiT's distillation token, DINOv2's registers: parameters of those names); a model without
attention over patches (a CNN: ConvNeXt, ResNet) has no tokens, only samples."""

from __future__ import annotations

from typing import Any

TEXT_TOKENS = "text tokens"
PATCHES_AND_CLASS = "image patches + class token"  # and any other token the embeddings add
PATCHES = "image patches"
NO_TOKENS = "none"  # samples only (a CNN)
# parameters (1, n, hidden) that the embeddings put in front of the patches
ADDED_TOKENS = frozenset({"cls_token", "class_token", "distillation_token", "register_tokens"})


def base_model(model: Any) -> Any:
    """The plain model under peft's wrapper (or the model itself)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def model_class(model: Any) -> str:
    """The class that was built: transformers' (Dinov2ForImageClassification), or what a family's
    own builder says it built (`built_class`: the torchvision family's torchvision class)."""
    base = base_model(model)
    return str(getattr(base, "built_class", None) or type(base).__name__)


def _pair(value: Any) -> tuple[int, int]:
    return (int(value), int(value)) if isinstance(value, int) else (int(value[0]), int(value[1]))


def image_tokens(model: Any) -> tuple[str, int | None]:
    """(token_unit, tokens per image) of an image classifier, from its config and its parameters."""
    base = base_model(model)
    config = base.config
    heads, patch, size = (getattr(config, k, None) for k in ("num_attention_heads", "patch_size", "image_size"))
    if not heads or not patch or not size:
        return NO_TOKENS, None
    (height, width), (patch_h, patch_w) = _pair(size), _pair(patch)
    added = sum(
        int(p.shape[-2]) if p.dim() >= 2 else 1
        for name, p in base.named_parameters()
        if name.rsplit(".", 1)[-1] in ADDED_TOKENS
    )
    return (PATCHES_AND_CLASS if added else PATCHES), (height // patch_h) * (width // patch_w) + added


def tokens(model: Any, task: str, seq_len: int) -> tuple[str, int | None]:
    """(token_unit, tokens one sample feeds the model; None: no tokens)."""
    if task == "image-classification":
        return image_tokens(model)
    return TEXT_TOKENS, seq_len


def figures(model: Any, family: str, task: str, unit: str) -> dict[str, Any]:
    """The row's record of what ran."""
    return {"model_class": model_class(model), "model_family": family, "model_task": task, "token_unit": unit}
