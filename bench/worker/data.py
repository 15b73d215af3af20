"""The guide's random data: token ids in [100, 30000), labels all 0 (np.random.randint(0, 1)); for a
causal language model the labels are the token ids themselves (the model shifts them by one)."""

from __future__ import annotations

from typing import Any

import torch


class InMemoryDataset(torch.utils.data.Dataset):
    """Rows of pre-made tensors; no per-row Python work beyond indexing."""

    def __init__(self, input_ids: torch.Tensor, labels: torch.Tensor) -> None:
        self.input_ids, self.labels = input_ids, labels

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.input_ids[i], "labels": self.labels[i]}


def make_dataset(samples: int, seq_len: int, vocab_size: int, seed: int, source: str, causal: bool = False) -> Any:
    gen = torch.Generator().manual_seed(seed)
    high = min(30000, vocab_size)
    low = min(100, high - 1)
    input_ids = torch.randint(low, high, (samples, seq_len), generator=gen, dtype=torch.long)
    # a classifier: the guide's randint(0, 1), all zero; a causal LM: next-token labels (shifted inside the model)
    labels = input_ids.clone() if causal else torch.zeros(samples, dtype=torch.long)
    if source == "datasets":
        from datasets import Dataset

        ds = Dataset.from_dict({"input_ids": input_ids.numpy(), "labels": labels.numpy()})
        ds.set_format("pt")
        return ds
    return InMemoryDataset(input_ids, labels)
