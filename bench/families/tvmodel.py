"""The torchvision family's builder (bench/families/torchvision.py): a torchvision classifier with
random weights, wrapped so that every engine trains it as it trains a transformers model. Imports
torch and transformers; torchvision only when a model is built (the worker's; never the parent's)."""

from __future__ import annotations

from typing import Any

import torch
from transformers import PretrainedConfig
from transformers.modeling_outputs import ImageClassifierOutput

from .torchvision import VIT_CLASS

VIT_DIMS = ("image_size", "patch_size", "num_layers", "num_heads", "hidden_dim", "mlp_dim")
# extras the seam passes that a torchvision model has no use for: its attention is
# nn.MultiheadAttention's own (the scenario refuses attn_implementation; the FLOP cross-check asks
# for "eager"), and it has no experts
IGNORED_EXTRAS = ("attn_implementation", "experts_implementation")


class TorchvisionConfig(PretrainedConfig):
    """The config of a torchvision model: the family's fields (`architecture`, `image_size`, ...),
    and `num_labels` as transformers' classifiers have it."""

    model_type = "torchvision"


class TorchvisionClassifier(torch.nn.Module):
    """A torchvision classifier taking `pixel_values` (and `labels`), returning transformers'
    ImageClassifierOutput: the loss is the cross-entropy of the logits when labels are given."""

    config_class = TorchvisionConfig
    main_input_name = "pixel_values"

    def __init__(self, config: TorchvisionConfig, model: torch.nn.Module) -> None:
        super().__init__()
        self.config = config
        self.model = model

    @classmethod
    def from_config(cls, config: TorchvisionConfig, dtype: torch.dtype | None = None, **extra: Any) -> Any:
        """The model with random weights, built on the current default device (a `with device:`)."""
        unknown = sorted(set(extra) - set(IGNORED_EXTRAS))
        if unknown:
            raise TypeError(f"the torchvision family takes no {', '.join(unknown)}")
        built = cls(config, build_torchvision(config))
        describe(config, built.model)
        return built.to(dtype) if dtype is not None else built

    @property
    def built_class(self) -> str:
        """The class the row names in model_class (bench/worker/what_ran.py): torchvision's own."""
        return f"torchvision.models.{type(self.model).__name__}"

    def forward(
        self, pixel_values: torch.Tensor, labels: torch.Tensor | None = None, **kwargs: Any
    ) -> ImageClassifierOutput:
        logits = self.model(pixel_values)
        loss = torch.nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return ImageClassifierOutput(loss=loss, logits=logits)


def build_torchvision(config: TorchvisionConfig) -> torch.nn.Module:
    """torchvision's model the config names: its VisionTransformer class with the config's
    dimensions, or a builder of torchvision.models by name (no pretrained weights)."""
    import torchvision.models

    arch = str(config.architecture)
    classes = int(config.num_labels or 0)
    if arch == VIT_CLASS:
        dims = {k: int(getattr(config, k)) for k in VIT_DIMS}
        return torchvision.models.VisionTransformer(**dims, num_classes=classes)  # type: ignore[no-any-return]
    sized = {"image_size": int(config.image_size)} if arch.startswith("vit_") else {}
    return torchvision.models.get_model(arch, weights=None, num_classes=classes, **sized)  # type: ignore[no-any-return]


def describe(config: TorchvisionConfig, model: Any) -> None:
    """A vision transformer's dimensions under transformers' names, read off the built module (a
    builder by name, vit_b_16, gives none in its config): the generic FLOP count reads them."""
    layers = getattr(getattr(model, "encoder", None), "layers", None)
    if not isinstance(layers, torch.nn.Module) or not hasattr(model, "hidden_dim"):
        return
    blocks = list(layers.children())
    config.hidden_size = int(model.hidden_dim)
    config.num_hidden_layers = len(blocks)
    config.num_attention_heads = int(getattr(blocks[0], "num_heads", 0)) if blocks else 0
    config.intermediate_size = int(getattr(model, "mlp_dim", 0))
    if hasattr(model, "patch_size"):
        config.patch_size = int(model.patch_size)
