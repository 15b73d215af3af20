"""`eval_samples`: the trained model scored on its data's held-out split, the seed talk's
test-accuracy column (bench/planner/datakinds.py says which split each kind has: CIFAR-10's test_batch,
other draws of a learnable synthetic task; the scenario refuses a kind without one).

It runs after the engine's last step and after the row's memory was read, never inside the timed
window: the speed, memory and energy figures stay the training's. The model is the one the engine
trained, in eval mode (no dropout), without gradients, its matmuls in the training's autocast
dtype; a classifier's figure is top-1 accuracy over the held-out rows, a causal LM's next-token
top-1 accuracy over their labelled tokens; the loss is the model's own, weighted the same way. One
process only: a row of several processes (its model sharded or replicated) says why it has none.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import torch

from .dataset import IGNORE, dataset_for
from .engines.inputs import EngineInputs
from .precision import AUTOCAST

CAUSAL = "causal-lm"


def held_out(inputs: EngineInputs, processes: int = 1) -> dict[str, Any]:
    """The row's eval_* columns: empty when eval_samples = 0, a note instead of figures when it
    cannot score here (several processes, a model without logits, a failure while scoring)."""
    sc = inputs.sc
    if not sc.eval_samples:
        return {}
    if processes > 1:
        return {"eval_note": f"scored in one process only; this row trained in {processes}"}
    start = time.perf_counter()
    data = dataset_for(
        inputs.model.config,
        inputs.task,
        sc.eval_samples,
        sc.seq_len,
        sc.seed,
        "memory",
        sc.data,
        sc.tokenizer,
        sc.data_column,
        split="test",
    )
    try:
        figures = score(inputs.model, data, inputs.task, sc.batch_size, inputs.device, AUTOCAST.get(sc.precision))
    except (RuntimeError, ValueError, TypeError) as exc:  # the training's figures stand; the row says why
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        return {"eval_note": f"scoring failed: {type(exc).__name__}: {first}"}
    return {**figures, "eval_s": time.perf_counter() - start}


def score(
    model: Any, data: Any, task: str, batch_size: int, device: torch.device, autocast: torch.dtype | None
) -> dict[str, Any]:
    """Top-1 accuracy and mean loss of `model` over `data` (rows of inputs and labels), in batches
    of `batch_size`; floating inputs cast to the model's parameter dtype (Fabric's *-true precisions
    keep half-precision weights)."""
    loader = torch.utils.data.DataLoader(data, batch_size=batch_size, shuffle=False)
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    was_training = model.training
    model.eval()
    correct = counted = 0
    loss_sum = 0.0
    try:
        mixed = torch.autocast(device.type, dtype=autocast) if autocast is not None else contextlib.nullcontext()
        with torch.no_grad(), mixed:
            for batch in loader:
                batch = {
                    k: v.to(device=device, dtype=dtype if v.is_floating_point() else v.dtype) for k, v in batch.items()
                }
                out = model(**batch)
                logits, labels = getattr(out, "logits", None), batch["labels"]
                if logits is None or getattr(out, "loss", None) is None:
                    return {"eval_note": "the model returned no logits or loss to score"}
                if task == CAUSAL:  # position t predicts token t + 1
                    target = labels[:, 1:]
                    scored = target != IGNORE
                    hits = (logits[:, :-1].argmax(-1) == target) & scored
                else:
                    scored = torch.ones_like(labels, dtype=torch.bool)
                    hits = logits.argmax(-1) == labels
                n = int(scored.sum())
                correct += int(hits.sum())
                counted += n
                loss_sum += float(out.loss) * n
    finally:
        model.train(was_training)
    if not counted:
        return {"eval_note": "the held-out rows have no labelled tokens"}
    return {"eval_accuracy": correct / counted, "eval_loss": loss_sum / counted, "eval_scored": counted}
