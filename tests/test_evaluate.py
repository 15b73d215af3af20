"""`eval_samples` (bench/worker/evaluate.py): what it counts, and the rows it cannot score say why.
End to end through `gpubench run --eval`: tests/test_data_e2e.py."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch

from bench.worker.dataset import IGNORE, InMemoryDataset
from bench.worker.evaluate import held_out, score


class Guess(torch.nn.Module):
    """Predicts class (first input value mod classes) for every row, or each next token as the
    current one; its loss is a constant it was given."""

    def __init__(self, classes: int = 4, fail: bool = False) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.classes, self.fail = classes, fail

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> Any:
        if self.fail:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2 GiB\nmore detail")
        assert not self.training  # scored in eval mode
        if labels.dim() == 1:
            logits = torch.nn.functional.one_hot(input_ids[:, 0] % self.classes, self.classes).float()
        else:
            logits = torch.nn.functional.one_hot(input_ids % self.classes, self.classes).float()
        return SimpleNamespace(logits=logits + self.weight, loss=torch.tensor(0.5))


def test_a_classifier_scores_top_1_over_its_rows_and_is_left_training() -> None:
    ids = torch.tensor([[0], [1], [2], [3], [0], [1]])
    labels = torch.tensor([0, 1, 0, 0, 0, 1])  # rows 0, 1, 4, 5 right
    model = Guess().train()
    figures = score(
        model, InMemoryDataset(labels, input_ids=ids), "sequence-classification", 4, torch.device("cpu"), None
    )
    assert figures == {"eval_accuracy": pytest.approx(4 / 6), "eval_loss": pytest.approx(0.5), "eval_scored": 6}
    assert model.training


def test_a_causal_lm_scores_each_labelled_next_token() -> None:
    ids = torch.tensor([[1, 1, 2, 3], [2, 2, 2, 2]])
    labels = torch.tensor([[1, 1, 2, IGNORE], [2, 2, 3, 2]])  # predicted: the current token
    figures = score(Guess(), InMemoryDataset(labels, input_ids=ids), "causal-lm", 2, torch.device("cpu"), None)
    # row 0: 1->1 right, 1->2 wrong, (ignored); row 1: 2->2 right, 2->3 wrong, 2->2 right
    assert figures["eval_scored"] == 5 and figures["eval_accuracy"] == pytest.approx(3 / 5)


def inputs(model: Any, eval_samples: int = 8) -> Any:
    sc = SimpleNamespace(
        eval_samples=eval_samples, seq_len=8, seed=0, data="cls-synthetic", tokenizer="", data_column="text",
        batch_size=4, precision="fp32",
    )  # fmt: skip
    config = SimpleNamespace(vocab_size=300, num_labels=4)
    model.config = config
    return SimpleNamespace(sc=sc, model=model, task="sequence-classification", device=torch.device("cpu"))


def test_rows_it_cannot_score_say_why_and_keep_their_training_figures() -> None:
    assert held_out(inputs(Guess(), eval_samples=0)) == {}
    assert held_out(inputs(Guess()), processes=2) == {"eval_note": "scored in one process only; this row trained in 2"}
    failed = Guess(fail=True).train()
    assert held_out(inputs(failed)) == {
        "eval_note": "scoring failed: RuntimeError: CUDA out of memory. Tried to allocate 2 GiB"
    }
    assert failed.training
    scored = held_out(inputs(Guess()))
    assert scored["eval_scored"] == 8 and 0 <= scored["eval_accuracy"] <= 1 and scored["eval_s"] > 0
