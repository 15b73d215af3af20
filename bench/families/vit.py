"""Vision transformers trained as image classifiers (ViT, DeiT): inputs are `pixel_values` at the
config's image size; a token is a patch (plus the class token)."""

from __future__ import annotations

from typing import Any

from .base import Family

_VIT: dict[str, Any] = {"model_type": "vit", "num_channels": 3, "qkv_bias": True}
PRESETS: dict[str, dict[str, Any]] = {
    "vit-tiny": {
        **_VIT,
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 128,
        "image_size": 32,
        "patch_size": 8,
        "num_labels": 10,
    },
    # ViT-B/16 at 224 px (google/vit-base-patch16-224's shape; torchvision's vit_b_16), 10 classes
    # as in the Fabric talk's CIFAR-10 fine-tune
    "vit-b16": {
        **_VIT,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "image_size": 224,
        "patch_size": 16,
        "num_labels": 10,
    },
}

FAMILY = Family(
    name="vit",
    model_types=("vit", "deit"),
    tasks=("image-classification",),
    default_task="image-classification",
    description="vision transformers (ViT, DeiT) as image classifiers; generic FLOPs",
    techniques=frozenset({"lora"}),
    vision=True,
    presets=PRESETS,
    preload=("transformers.models.vit.modeling_vit",),
)
