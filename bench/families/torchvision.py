"""torchvision's image classifiers (the Fabric talk trained torchvision's `vit_b_16`), random
weights, through the same seam as transformers' models: the builder `bench.families.tvmodel`
(imported in the worker only) wraps the torchvision module so that it takes `pixel_values` and
`labels` and returns transformers' ImageClassifierOutput.

A config names its model by `architecture`: a torchvision builder (`torchvision.models.get_model`,
e.g. "vit_b_16", built at the config's `image_size`), or "VisionTransformer" with the dimensions
given (`num_layers`, `num_heads`, `hidden_dim`, `mlp_dim`). torchvision is not a gpubench
dependency: without it the family's rows are skipped; the parent never imports it, so the memory
model does not predict these models (bench/families/build.py inventory)."""

from __future__ import annotations

from typing import Any

from .base import Family

PACKAGE = "torchvision"
VIT_CLASS = "VisionTransformer"  # `architecture` that builds torchvision's class from the config's dimensions
_TV: dict[str, Any] = {"model_type": "torchvision", "num_channels": 3, "num_labels": 10}
PRESETS: dict[str, dict[str, Any]] = {
    # torchvision's vit_b_16: ViT-B/16 at 224 px, 10 classes as the talk's CIFAR-10
    "tv-vit-b16": {**_TV, "architecture": "vit_b_16", "image_size": 224, "patch_size": 16},
    # the tests' size: vit-tiny's dimensions in torchvision's class
    "tv-vit-tiny": {
        **_TV,
        "architecture": VIT_CLASS,
        "image_size": 32,
        "patch_size": 8,
        "num_layers": 2,
        "num_heads": 2,
        "hidden_dim": 64,
        "mlp_dim": 128,
    },
}
NO_CHECKPOINTING = (
    "is not wired for the torchvision family (its models have no gradient_checkpointing_enable); train them without it"
)
NO_ATTENTION_CHOICE = (
    "does not apply to the torchvision family (its models' attention is nn.MultiheadAttention's own); leave it default"
)

FAMILY = Family(
    name="torchvision",
    model_types=("torchvision",),
    tasks=("image-classification",),
    default_task="image-classification",
    description="torchvision's image classifiers (vit_b_16, ...), random weights; needs torchvision installed",
    vision=True,
    presets=PRESETS,
    preload=(),
    builder="bench.families.tvmodel:TorchvisionClassifier",
    package=PACKAGE,
    refuses=(("grad_checkpointing", NO_CHECKPOINTING), ("attn_implementation", NO_ATTENTION_CHOICE)),
)
