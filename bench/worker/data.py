"""The data set a scenario trains on: its `data` kind built by the kind's builder (bench/datakinds.py
names it), in the container `data_source` asks for.

The default kind, `random`, is the guide's recipe, per task: token ids in [100, 30000), labels all 0
(np.random.randint(0, 1)) for a classifier; for a causal language model the labels are the token ids
themselves (the model shifts them by one); for an image classifier `pixel_values` of the config's
image size (normal noise), labels all 0. The learnable kinds are in datasynth.py, the files in
datafiles.py."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .. import datakinds

IGNORE = -100  # a label the loss skips (padding)
DATA_SEED = 20240601  # the learnable kinds' seed: every scenario of every run trains on the same samples


class InMemoryDataset(torch.utils.data.Dataset):
    """Rows of pre-made tensors; no per-row Python work beyond indexing."""

    def __init__(self, labels: torch.Tensor, **inputs: torch.Tensor) -> None:
        self.labels, self.inputs = labels, inputs

    def __len__(self) -> int:
        return self.labels.shape[0]

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {**{k: v[i] for k, v in self.inputs.items()}, "labels": self.labels[i]}

    def trained_tokens_per_sample(self) -> float | None:
        """A causal LM's tokens with a label (not IGNORE) per sample, the mean over the set; None
        for a classifier (one label per sample: its tokens are the inputs)."""
        if self.labels.dim() < 2:
            return None
        return float((self.labels != IGNORE).sum()) / max(len(self), 1)


@dataclass(frozen=True)
class DataRequest:
    """What a builder is asked for: `samples` rows for the model's `task`; `argument` is what
    follows the kind's colon (a path)."""

    config: Any
    task: str
    samples: int
    seq_len: int
    seed: int
    argument: str = ""
    tokenizer: str = ""
    column: str = "text"

    @property
    def vocab(self) -> int:
        return int(getattr(self.config, "vocab_size", None) or 30522)

    @property
    def num_labels(self) -> int:
        return int(getattr(self.config, "num_labels", None) or 2)


def builder(kind: datakinds.DataKind) -> Callable[[DataRequest], InMemoryDataset]:
    module, _, function = kind.builder.partition(":")
    fn: Callable[[DataRequest], InMemoryDataset] = getattr(importlib.import_module(module), function)
    return fn


def dataset_for(
    config: Any,
    task: str,
    samples: int,
    seq_len: int,
    seed: int,
    source: str,
    data: str = datakinds.DEFAULT,
    tokenizer: str = "",
    column: str = "text",
) -> Any:
    """The scenario's data for the model's task, in the container `source` names. The learnable
    kinds draw from DATA_SEED, `random` from the scenario's seed (as the guide does)."""
    name, argument = datakinds.split(data)
    kind = datakinds.KINDS[name]
    seed = DATA_SEED if kind.learnable else seed
    request = DataRequest(config, task, samples, seq_len, seed, argument, tokenizer, column)
    return contain(builder(kind)(request), source)


def contain(dataset: InMemoryDataset, source: str) -> Any:
    """`data_source`: "memory" keeps the tensors; "datasets" is the guide's `Dataset.from_dict`."""
    if source != "datasets":
        return dataset
    from datasets import Dataset

    columns = {**{k: v.numpy() for k, v in dataset.inputs.items()}, "labels": dataset.labels.numpy()}
    ds = Dataset.from_dict(columns)
    ds.set_format("pt")
    ds.trained_tokens_per_sample = dataset.trained_tokens_per_sample  # type: ignore[attr-defined]
    return ds


def trained_tokens(dataset: Any) -> float | None:
    counter = getattr(dataset, "trained_tokens_per_sample", None)
    return counter() if callable(counter) else None


def random_data(req: DataRequest) -> InMemoryDataset:
    """The guide's random data (the module's docstring says what it holds)."""
    image = image_shape(req.config) if req.task == "image-classification" else None
    return make_dataset(req.samples, req.seq_len, req.vocab, req.seed, "memory", req.task == "causal-lm", image)


def make_dataset(
    samples: int,
    seq_len: int,
    vocab_size: int,
    seed: int,
    source: str,
    causal: bool = False,
    image: tuple[int, int, int] | None = None,
) -> Any:
    """`image`: (channels, height, width) for an image classifier, else token ids; in the
    container `source` names."""
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
    return contain(InMemoryDataset(labels, **inputs), source)


def image_shape(config: Any) -> tuple[int, int, int]:
    """(channels, height, width) of a vision config's inputs."""
    size = config.image_size
    height, width = (size, size) if isinstance(size, int) else tuple(size)
    return int(getattr(config, "num_channels", 3)), int(height), int(width)
