"""Real data the user has on disk: a text file, a `datasets` folder (save_to_disk), CIFAR-10's python
batches. Text is tokenised (a local tokenizer, or bytes), documents joined with an end-of-document id
and cut into seq_len blocks (packing). Every file is read with bench/planner/datareaders.py, the readers the
parent checked it with before the run (bench/planner/datakinds.py)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from ..planner.datakinds import CIFAR_BATCHES, CIFAR_TEST
from ..planner.datareaders import CIFAR_SIDE, read_cifar_batch, read_saved_column, read_text
from .dataset import IGNORE, DataRequest, InMemoryDataset, image_shape

BYTE_EOS = 0  # the byte-level fallback: byte b is id b + 1, id 0 ends a document


def documents(text: str) -> list[str]:
    """A text file's documents: the blocks between blank lines, stripped, none empty."""
    return [d.strip() for d in re.split(r"\n\s*\n", text) if d.strip()]


def tokenise(docs: Iterable[str], req: DataRequest) -> tuple[list[list[int]], int]:
    """(ids of each document, the end-of-document id): the local tokenizer's, or bytes."""
    if not req.tokenizer:
        return [[b + 1 for b in doc.encode("utf-8")] for doc in docs], BYTE_EOS
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(req.tokenizer, local_files_only=True)
    eos = tok.eos_token_id if tok.eos_token_id is not None else getattr(req.config, "eos_token_id", None)
    ids = [list(tok(doc, add_special_tokens=False)["input_ids"]) for doc in docs]
    eos = int(eos if isinstance(eos, int) else 0)
    top = max([eos, *(max(d) for d in ids if d)])
    if top >= req.vocab:
        raise ValueError(
            f"tokenizer {req.tokenizer} gives id {top}, but the model's vocab_size is {req.vocab}: "
            "give a model whose vocabulary holds the tokenizer's"
        )
    return ids, eos


def pack(docs: Sequence[Sequence[int]], eos: int, seq_len: int, samples: int) -> InMemoryDataset:
    """Documents joined, each followed by `eos`, cut into blocks of seq_len (the rest is dropped),
    repeated in order up to `samples` rows. A stream shorter than one block is one block padded
    with `eos`: the padding has label IGNORE and attention mask 0."""
    stream = np.fromiter((t for doc in docs for t in (*doc, eos)), dtype=np.int64)
    if stream.size == 0:
        raise ValueError("the data holds no tokens")
    blocks = stream.size // seq_len
    if blocks:
        ids = stream[: blocks * seq_len].reshape(blocks, seq_len)
        rows = torch.from_numpy(ids[np.arange(samples) % blocks])
        return InMemoryDataset(rows.clone(), input_ids=rows)
    one = np.full(seq_len, eos, dtype=np.int64)
    one[: stream.size] = stream
    mask = np.zeros(seq_len, dtype=np.int64)
    mask[: stream.size] = 1
    labels = np.where(mask == 1, one, IGNORE)
    tile = (samples, 1)
    return InMemoryDataset(
        torch.from_numpy(np.tile(labels, tile)),
        input_ids=torch.from_numpy(np.tile(one, tile)),
        attention_mask=torch.from_numpy(np.tile(mask, tile)),
    )


def text_file(req: DataRequest) -> InMemoryDataset:
    """text:PATH, packed for a causal LM."""
    text = read_text(Path(req.argument), req.encoding)
    ids, eos = tokenise(documents(text), req)
    return pack(ids, eos, req.seq_len, req.samples)


def saved_dataset(req: DataRequest) -> InMemoryDataset:
    """saved:PATH: the column `data_column` of a save_to_disk folder (its train split), text or
    token ids (every id below the vocabulary, no empty row: the reader checks), packed for a causal LM."""
    values = read_saved_column(Path(req.argument), req.column, req.vocab)
    if all(isinstance(v, str) for v in values):
        ids, eos = tokenise((v for v in values if v.strip()), req)
    else:
        ids = [[int(t) for t in v] for v in values]
        eos = int(getattr(req.config, "eos_token_id", None) or 0)
    return pack(ids, eos, req.seq_len, req.samples)


def cifar10(req: DataRequest) -> InMemoryDataset:
    """cifar10:DIR: the data_batch_N files in order (the held-out split: test_batch), repeated up to
    `samples`, scaled to [-1, 1] and resized (bilinear) to the model's image size."""
    folder = Path(req.argument)
    files = sorted(folder.glob(CIFAR_BATCHES)) if req.split == "train" else [folder / CIFAR_TEST]
    images, labels = zip(*(read_cifar_batch(f) for f in files), strict=True)
    rows = np.arange(req.samples) % sum(len(x) for x in labels)
    pixels = torch.from_numpy(np.concatenate(images)[rows]).float().div_(127.5).sub_(1.0)
    _, height, width = image_shape(req.config)
    if (height, width) != (CIFAR_SIDE, CIFAR_SIDE):
        pixels = torch.nn.functional.interpolate(pixels, size=(height, width), mode="bilinear", align_corners=False)
    return InMemoryDataset(torch.from_numpy(np.concatenate(labels)[rows]), pixel_values=pixels.contiguous())
