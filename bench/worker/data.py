"""The guide's random data, per task: token ids in [100, 30000), labels all 0 (np.random.randint(0,
1)) for a classifier; for a causal language model the labels are the token ids themselves (the
model shifts them by one); for an image classifier `pixel_values` of the config's image size
(normal noise), labels all 0."""

from __future__ import annotations

from typing import Any

import torch


class InMemoryDataset(torch.utils.data.Dataset):
    """Rows of pre-made tensors; no per-row Python work beyond indexing."""

    def __init__(self, labels: torch.Tensor, **inputs: torch.Tensor) -> None:
        self.labels, self.inputs = labels, inputs

    def __len__(self) -> int:
        return self.labels.shape[0]

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {**{k: v[i] for k, v in self.inputs.items()}, "labels": self.labels[i]}


def make_dataset(
    samples: int,
    seq_len: int,
    vocab_size: int,
    seed: int,
    source: str,
    causal: bool = False,
    image: tuple[int, int, int] | None = None,
) -> Any:
    """`image`: (channels, height, width) for an image classifier, else token ids."""
    gen = torch.Generator().manual_seed(seed)
    if image is not None:
        inputs = {"pixel_values": torch.randn((samples, *image), generator=gen)}
        labels = torch.zeros(samples, dtype=torch.long)
    else:
        high = min(30000, vocab_size)
        low = min(100, high - 1)
        input_ids = torch.randint(low, high, (samples, seq_len), generator=gen, dtype=torch.long)
        # a classifier: the guide's randint(0, 1), all zero; a causal LM: next-token labels (shifted inside the model)
        labels = input_ids.clone() if causal else torch.zeros(samples, dtype=torch.long)
        inputs = {"input_ids": input_ids}
    if source == "datasets":
        from datasets import Dataset

        ds = Dataset.from_dict({**{k: v.numpy() for k, v in inputs.items()}, "labels": labels.numpy()})
        ds.set_format("pt")
        return ds
    return InMemoryDataset(labels, **inputs)


def dataset_for(config: Any, task: str, samples: int, seq_len: int, seed: int, source: str) -> Any:
    """The random data a model's task trains on: pixel values at a vision config's image size, or
    token ids below its vocabulary (the labels as make_dataset says)."""
    image = image_shape(config) if task == "image-classification" else None
    vocab = getattr(config, "vocab_size", None) or 30522
    return make_dataset(samples, seq_len, vocab, seed, source, task == "causal-lm", image)


def image_shape(config: Any) -> tuple[int, int, int]:
    """(channels, height, width) of a vision config's inputs."""
    size = config.image_size
    height, width = (size, size) if isinstance(size, int) else tuple(size)
    return int(getattr(config, "num_channels", 3)), int(height), int(width)
