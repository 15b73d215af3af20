"""The learnable synthetic kinds: structure a tiny model learns in a few hundred steps, made from a
seed with numpy, no download. Rows are drawn in order, so the first N rows are the same whatever the
number asked for (a run of more samples trains on the same ones, and more). The task's structure
(the chain, the classes' patterns) comes from the seed's first stream; the rows from the next ones,
and a held-out split's rows (`eval_samples`) from streams of their own: the same task, other rows."""

from __future__ import annotations

import numpy as np
import torch

from .dataset import DataRequest, InMemoryDataset, image_shape

LM_STATES = 512  # token ids the Markov chain walks over
LM_SUCCESSORS = np.array([0.55, 0.25, 0.15, 0.05])  # each id's 4 next ids, with these chances
CLS_STATES = 256  # token ids of the classification task
CLS_PLANTED = 0.25  # the share of a row's tokens drawn from its target class
VISION_GRID = 4  # class patterns are a 4 x 4 grid per channel, stretched to the image
VISION_NOISE = 0.5  # noise's standard deviation, against patterns of 1


def _ids(vocab: int, states: int) -> tuple[int, int]:
    """(first id, number of ids) of a task over `states` ids below `vocab`, from 100 like `random`."""
    count = min(states, vocab)
    return min(100, vocab - count), count


HELD_OUT_STREAMS = 1000  # a held-out split's row streams start here; the training rows' below


def _streams(seed: int, n: int) -> list[np.random.Generator]:
    """`n` independent generators of one seed: each array is drawn from its own, so its rows do
    not depend on the size of the others."""
    return [np.random.default_rng([seed, i]) for i in range(n)]


def _row_streams(req: DataRequest, n: int) -> list[np.random.Generator]:
    """The `n` generators a split's rows are drawn from (after the structure's stream 0): streams
    1..n for training, HELD_OUT_STREAMS.. for the held-out split, so no row is in both."""
    first = 1 if req.split == "train" else HELD_OUT_STREAMS
    return [np.random.default_rng([req.seed, first + i]) for i in range(n)]


def lm_synthetic(req: DataRequest) -> InMemoryDataset:
    """A sparse Markov chain: each of LM_STATES ids is followed by one of 4 ids (LM_SUCCESSORS). A
    model that learned it has a loss of the successors' entropy (1.1 nats), against ln(vocab) for
    a guess; the labels are the ids (the model shifts them)."""
    (structure,) = _streams(req.seed, 1)
    starts, steps = _row_streams(req, 2)
    low, count = _ids(req.vocab, LM_STATES)
    successors = structure.integers(0, count, (count, len(LM_SUCCESSORS)))
    state = starts.integers(0, count, req.samples)
    choice = steps.choice(len(LM_SUCCESSORS), size=(req.samples, max(req.seq_len - 1, 0)), p=LM_SUCCESSORS)
    walk = np.empty((req.samples, req.seq_len), dtype=np.int64)
    walk[:, 0] = state
    for t in range(1, req.seq_len):
        state = successors[state, choice[:, t - 1]]
        walk[:, t] = state
    ids = torch.from_numpy(walk + low)
    return InMemoryDataset(ids.clone(), input_ids=ids)


def cls_synthetic(req: DataRequest) -> InMemoryDataset:
    """Token id i (of CLS_STATES) is of class i mod num_labels; a row's label is the class most of
    its tokens are of (the lowest on a tie). Each row is planted with CLS_PLANTED of one class's
    tokens, so the classes are about even and the majority is clear."""
    targets, tokens, planted = _streams(req.seed, 3) if req.split == "train" else _row_streams(req, 3)
    low, count = _ids(req.vocab, CLS_STATES)
    classes = min(req.num_labels, count)
    target = targets.integers(0, classes, req.samples)
    ids = tokens.integers(0, count, (req.samples, req.seq_len))
    plant = planted.random((req.samples, req.seq_len)) < CLS_PLANTED
    moved = ids - ids % classes + target[:, None]
    moved = np.where(moved < count, moved, target[:, None])
    ids = np.where(plant, moved, ids)
    counts = np.stack([(ids % classes == c).sum(axis=1) for c in range(classes)], axis=1)
    labels = counts.argmax(axis=1)
    return InMemoryDataset(torch.from_numpy(labels.astype(np.int64)), input_ids=torch.from_numpy(ids + low))


def vision_synthetic(req: DataRequest) -> InMemoryDataset:
    """One smooth pattern per class (a VISION_GRID grid of normal values per channel, stretched to
    the image) plus normal noise of VISION_NOISE; labels even over num_labels."""
    (patterns_rng,) = _streams(req.seed, 1)
    labels_rng, noise_rng = _row_streams(req, 2)
    channels, height, width = image_shape(req.config)
    grid = patterns_rng.standard_normal((req.num_labels, channels, VISION_GRID, VISION_GRID))
    rows, cols = np.arange(height) * VISION_GRID // height, np.arange(width) * VISION_GRID // width
    patterns = grid[:, :, rows][:, :, :, cols].astype(np.float32)
    labels = labels_rng.integers(0, req.num_labels, req.samples)
    noise = noise_rng.standard_normal((req.samples, channels, height, width), dtype=np.float32)
    pixels = patterns[labels] + VISION_NOISE * noise
    return InMemoryDataset(torch.from_numpy(labels.astype(np.int64)), pixel_values=torch.from_numpy(pixels))
