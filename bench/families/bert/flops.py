"""BERT's analytic FLOPs per sample (forward + backward), in the convention of bench/measure/mfu.py:

  6 x P_matmul x seq + 12 x layers x hidden x seq^2, P_matmul = the parameters without the
  embedding tables (lookups, not matmuls); attention is bidirectional (the full score matrix).

The parameter count is the worker's (the built model's, head included)."""

from __future__ import annotations

from typing import Any

from ...recipe.scenario import Scenario


def model_dims(cfg: dict[str, Any]) -> dict[str, Any] | None:
    """BERT's hidden, layers, embedding sizes from a preset's or a checkpoint's config; None when
    the config lacks them."""
    try:
        hidden, layers = int(cfg["hidden_size"]), int(cfg["num_hidden_layers"])
    except (KeyError, TypeError, ValueError):
        return None
    emb_rows = sum(int(cfg.get(k, 0) or 0) for k in ("vocab_size", "max_position_embeddings", "type_vocab_size"))
    return {"hidden": hidden, "layers": layers, "embedding_params": emb_rows * hidden}


def bert_flops_per_sample(total_params: int, dims: dict[str, Any], seq_len: int) -> float:
    matmul_params = max(total_params - dims["embedding_params"], 0)
    return 6.0 * matmul_params * seq_len + 12.0 * dims["layers"] * dims["hidden"] * seq_len**2


def flops_per_sample(sc: Scenario, cfg: dict[str, Any], origin: str, total_params: int | None) -> float | None:
    """The family's count (Family.flops); None without the dimensions or the worker's parameter count."""
    dims = model_dims(cfg)
    if dims is None or not total_params:
        return None
    return bert_flops_per_sample(total_params, dims, sc.seq_len)
