"""Model FLOPs and MFU: 6 x matmul parameters x tokens plus the attention term, over a dense peak.

FLOPs per sample (forward + backward) = 6 * P_matmul * seq + 12 * layers * hidden * seq^2, where
P_matmul is the parameter count without the embedding tables (lookups, not matmuls) — the
convention of Kaplan et al. (2020) and the PaLM paper's MFU (2022). Gradient checkpointing
recomputes the forward, but MFU counts model FLOPs, so it is not added.
Peaks are dense (never the 2:4 sparsity figure) for the precision the matmuls actually run in.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..models import PRESETS

# name pattern -> {precision class: dense TFLOP/s}, source. First match wins: specific before general.
_DS = "NVIDIA datasheet, dense (half the with-sparsity figure)"
_GA102 = "NVIDIA Ampere GA102 whitepaper, dense, FP32 accumulate"
_AD102 = "NVIDIA Ada Lovelace whitepaper, dense, FP32 accumulate"
PEAKS: list[tuple[str, dict[str, float], str]] = [
    (r"H200 NVL", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}, "NVIDIA H200 NVL " + _DS),
    (r"H200", {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}, "NVIDIA H200 SXM " + _DS),
    (r"H100 NVL", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}, "NVIDIA H100 NVL " + _DS),
    (r"H100 PCIe", {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0}, "NVIDIA H100 PCIe " + _DS),
    (r"H100", {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}, "NVIDIA H100 SXM " + _DS),
    (r"A100", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}, "NVIDIA A100 " + _DS),
    (r"V100S", {"fp32": 16.4, "fp16": 130.0}, "NVIDIA V100S datasheet (no bf16/tf32)"),
    (r"V100.*PCI", {"fp32": 14.0, "fp16": 112.0}, "NVIDIA V100 PCIe datasheet (no bf16/tf32)"),
    (r"V100", {"fp32": 15.7, "fp16": 125.0}, "NVIDIA V100 SXM2 datasheet (no bf16/tf32)"),
    (r"\bL4\b", {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0}, "NVIDIA L4 " + _DS),
    (r"\bA10\b", {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0}, "NVIDIA A10 " + _DS),
    (r"RTX 4090", {"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2}, "RTX 4090, " + _AD102),
    (r"RTX 3090", {"fp32": 35.6, "tf32": 35.6, "bf16": 71.0, "fp16": 71.0}, "RTX 3090, " + _GA102),
    (r"RTX 3080", {"fp32": 29.8, "tf32": 29.8, "bf16": 59.5, "fp16": 59.5}, "RTX 3080, " + _GA102),
]


def precision_class(precision: str, tf32: bool) -> str:
    """The number format the matmuls run in: autocast precision, else tf32 or plain fp32."""
    if precision in ("fp16", "bf16"):
        return precision
    return "tf32" if tf32 else "fp32"


def peak_tflops(gpu_name: str | None, precision: str, tf32: bool) -> tuple[float | None, str]:
    """(dense peak, source); (None, why) for an unknown GPU or format: never another GPU's peak."""
    if not gpu_name:
        return None, "no GPU: MFU not defined on the CPU"
    cls = precision_class(precision, tf32)
    for pattern, table, source in PEAKS:
        if re.search(pattern, gpu_name):
            if cls not in table:
                return None, f"{gpu_name} has no {cls} tensor-core peak in the table"
            return table[cls], source
    return None, f"unknown GPU '{gpu_name}': no peak in the table, MFU left empty"


def model_dims(model: str) -> dict[str, Any] | None:
    """hidden, layers, embedding sizes from a preset or a checkpoint's config.json."""
    if model in PRESETS:
        cfg = PRESETS[model]
    else:
        try:
            cfg = json.loads((Path(model) / "config.json").read_text())
        except (OSError, ValueError):
            return None
    try:
        hidden, layers = int(cfg["hidden_size"]), int(cfg["num_hidden_layers"])
    except (KeyError, TypeError, ValueError):
        return None
    emb_rows = sum(int(cfg.get(k, 0) or 0) for k in ("vocab_size", "max_position_embeddings", "type_vocab_size"))
    return {"hidden": hidden, "layers": layers, "embedding_params": emb_rows * hidden}


def flops_per_sample(total_params: int, dims: dict[str, Any], seq_len: int) -> float:
    matmul_params = max(total_params - dims["embedding_params"], 0)
    return 6.0 * matmul_params * seq_len + 12.0 * dims["layers"] * dims["hidden"] * seq_len**2


def figures(
    model: str,
    total_params: int | None,
    seq_len: int,
    samples_per_s: float | None,
    gpu_name: str | None,
    precision: str,
    tf32: bool,
    gpus: int = 1,
) -> dict[str, Any]:
    """FLOPs and MFU; with several GPUs `samples_per_s` is the job's and the peak is all GPUs'."""
    out: dict[str, Any] = {
        "flops_per_sample": None,
        "achieved_tflops": None,
        "peak_tflops": None,
        "mfu": None,
        "peak_source": "",
    }
    dims = model_dims(model)
    if dims is None or not total_params:
        out["peak_source"] = "model dimensions unknown"
        return out
    per_sample = flops_per_sample(total_params, dims, seq_len)
    out["flops_per_sample"] = per_sample
    peak, source = peak_tflops(gpu_name, precision, tf32)
    if peak and gpus > 1:
        peak, source = peak * gpus, f"{gpus} x {source}"
    out["peak_tflops"], out["peak_source"] = peak, source
    if samples_per_s:
        out["achieved_tflops"] = per_sample * samples_per_s / 1e12
        if peak:
            out["mfu"] = out["achieved_tflops"] / peak
    return out
