"""The data set a scenario trains on: its `data` kind built by the kind's builder (bench/planner/datakinds.py
names it), in the container `data_source` asks for.

The default kind, `random`, is the guide's recipe, per task: token ids in [100, 30000), labels all 0
(np.random.randint(0, 1)) for a classifier; for a causal language model the labels are the token ids
themselves (the model shifts them by one); for an image classifier `pixel_values` of the config's
image size (normal noise, drawn in blocks of IMAGE_BLOCK samples, each from its own generator, on
several threads: the same values whatever the thread count), labels all 0. The learnable kinds
are in datasynth.py, the files in datafiles.py."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch

from .. import cpus
from ..planner import datakinds

IGNORE = -100  # a label the loss skips (padding)
DATA_SEED = 20240601  # the learnable kinds' seed: every scenario of every run trains on the same samples
# random images are drawn in blocks of this many samples, each block from its own generator, on
# several threads. One generator drew fabric-vit's 1,760 ViT-B/16 images (1 GB) in 1.3-2.1 s of
# every worker's start on an H200 host; the blocks take 0.85 s on 2 CPUs (1.59 s from one generator)
IMAGE_BLOCK = 64
MAX_DRAW_THREADS = 16


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
    follows the kind's colon (a path); `split`: "train", or "test" for the rows `eval_samples`
    scores (only a kind with a held-out split gets it: bench/planner/datakinds.py)."""

    config: Any
    task: str
    samples: int
    seq_len: int
    seed: int
    argument: str = ""
    tokenizer: str = ""
    column: str = "text"
    split: str = "train"
    encoding: str = "utf-8"  # a text file's (the data field's "text[ENCODING]:PATH")

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
    split: str = "train",
) -> Any:
    """The scenario's data for the model's task, in the container `source` names. The learnable
    kinds draw from DATA_SEED, `random` from the scenario's seed (as the guide does)."""
    name, argument = datakinds.split(data)
    kind = datakinds.KINDS[name]
    if split != "train" and not kind.held_out:
        raise ValueError(f"data = {data!r} has no held-out split")  # the scenario refuses it first
    seed = DATA_SEED if kind.learnable else seed
    request = DataRequest(
        config, task, samples, seq_len, seed, argument, tokenizer, column, split, datakinds.encoding(data)
    )
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
    if image is not None:
        inputs = {"pixel_values": random_images(samples, image, seed)}
        labels = torch.zeros(samples, dtype=torch.long)
    else:
        gen = torch.Generator().manual_seed(seed)
        high = min(30000, vocab_size)
        low = min(100, high - 1)
        input_ids = torch.randint(low, high, (samples, seq_len), generator=gen, dtype=torch.long)
        # a classifier: the guide's randint(0, 1), all zero; a causal LM: next-token labels (shifted inside the model)
        labels = input_ids.clone() if causal else torch.zeros(samples, dtype=torch.long)
        inputs = {"input_ids": input_ids}
    return contain(InMemoryDataset(labels, **inputs), source)


def random_images(samples: int, image: tuple[int, int, int], seed: int) -> torch.Tensor:
    """`samples` images of standard normal noise. Block b (samples b*IMAGE_BLOCK onward) comes from
    a generator seeded with (seed, b), so the values depend on the seed alone; the blocks are drawn
    on up to MAX_DRAW_THREADS threads of this process's CPUs (torch drops the GIL while it draws)."""
    starts = range(0, samples, IMAGE_BLOCK)
    # whole blocks only: torch draws a small tensor's normals another way than a large one's, so a
    # short last block would change with `samples`
    out = torch.empty((len(starts) * IMAGE_BLOCK, *image))

    def draw(start: int) -> None:
        gen = torch.Generator().manual_seed((seed << 20) + start // IMAGE_BLOCK)
        out[start : start + IMAGE_BLOCK].normal_(generator=gen)

    mine = cpus.available()
    threads = max(1, min(len(starts), len(mine) if mine else os.cpu_count() or 1, MAX_DRAW_THREADS))
    with ThreadPoolExecutor(threads, thread_name_prefix="gpubench-data") as pool:
        list(pool.map(draw, starts))
    return out[:samples]


def image_shape(config: Any) -> tuple[int, int, int]:
    """(channels, height, width) of a vision config's inputs."""
    size = config.image_size
    height, width = (size, size) if isinstance(size, int) else tuple(size)
    return int(getattr(config, "num_channels", 3)), int(height), int(width)
