"""Model FLOPs and MFU: what the scenario's technique computes, over the dense peak it runs at.

FLOPs per sample (forward + backward), the convention of Kaplan et al. (2020) and the PaLM paper's
MFU (Chowdhery et al. 2022): 2 FLOPs per multiply-add per matmul parameter per token forward, 4 more
backward (input and weight gradients), plus attention's score and value matmuls:

  a family's own  its row names its count (Family.flops, "module:function"), written in its
                  folder: BERT's bidirectional count, a Llama decoder's causal one with LoRA's
                  (bench/families/bert/flops.py, bench/families/llama/flops.py)
  any other       the generic count from the built model's matmul weights x tokens + attention
                  (bench/measure/flopcount.py)
  QLoRA           FLOPs as LoRA; the base is dequantized and its matmuls run in the compute dtype
                  (bf16), so MFU is against the bf16 peak.
  FP8             MFU against the FP8 dense peak (torchao's Float8Linear runs the Linears in FP8;
                  attention and the head stay bf16, so this MFU understates the bf16 part).

Gradient checkpointing recomputes the forward, but MFU counts model FLOPs, so it is not added.
Peaks are dense (never the 2:4 sparsity figure) for the number format the matmuls run in.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..errors import GpubenchError
from ..families import for_config, origin, read_config
from ..families.base import load
from ..recipe.engine_registry import precision_matmuls
from ..recipe.scenario import Scenario

# name pattern -> {precision class: dense TFLOP/s}, source. First match wins: specific before general.
_DS = "NVIDIA datasheet, dense (half the with-sparsity figure)"
_GA102 = "NVIDIA Ampere GA102 whitepaper, dense, FP32 accumulate"
_AD102 = "NVIDIA Ada Lovelace whitepaper, dense, FP32 accumulate"
# FP8 (dense): H100 SXM 3,958 TFLOP/s with sparsity in its datasheet = 1,979 dense; the H200 SXM is
# the same GH100 at the same clocks (1,979). L4: 485 with sparsity = 242.5 dense. The H100 PCIe,
# H100 NVL, H200 NVL and RTX 4090 FP8 figures could not be confirmed from a datasheet here: left
# out, so their FP8 rows get no MFU (peak_source says why) rather than a guessed one.
PEAKS: list[tuple[str, dict[str, float], str]] = [
    (r"H200 NVL", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}, "NVIDIA H200 NVL " + _DS),
    (r"H200", {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1979.0}, "NVIDIA H200 SXM " + _DS),
    (r"H100 NVL", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}, "NVIDIA H100 NVL " + _DS),
    (r"H100 PCIe", {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0}, "NVIDIA H100 PCIe " + _DS),
    (r"H100", {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1979.0}, "NVIDIA H100 SXM " + _DS),
    (r"A100", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}, "NVIDIA A100 " + _DS),
    (r"V100S", {"fp32": 16.4, "fp16": 130.0}, "NVIDIA V100S datasheet (no bf16/tf32)"),
    (r"V100.*PCI", {"fp32": 14.0, "fp16": 112.0}, "NVIDIA V100 PCIe datasheet (no bf16/tf32)"),
    (r"V100", {"fp32": 15.7, "fp16": 125.0}, "NVIDIA V100 SXM2 datasheet (no bf16/tf32)"),
    (r"\bL4\b", {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0, "fp8": 242.5}, "NVIDIA L4 " + _DS),
    (r"\bA10\b", {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0}, "NVIDIA A10 " + _DS),
    (r"RTX 4090", {"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2}, "RTX 4090, " + _AD102),
    (r"RTX 3090", {"fp32": 35.6, "tf32": 35.6, "bf16": 71.0, "fp16": 71.0}, "RTX 3090, " + _GA102),
    (r"RTX 3080", {"fp32": 29.8, "tf32": 29.8, "bf16": 59.5, "fp16": 59.5}, "RTX 3080, " + _GA102),
]


def precision_class(precision: str, tf32: bool, fp8: bool = False) -> str:
    """The number format the matmuls run in: fp8 (torchao), autocast precision, else tf32 or fp32.
    A quantized base (QLoRA) dequantizes to the compute dtype, so it is the autocast precision; an
    engine's own precision (Fabric's bf16-true, transformer-engine) is the format its matmuls run in."""
    matmuls = precision_matmuls(precision)
    if fp8 or matmuls == "fp8":
        return "fp8"
    if matmuls in ("fp16", "bf16"):
        return matmuls
    return "tf32" if tf32 else "fp32"


def peak_tflops(gpu_name: str | None, precision: str, tf32: bool, fp8: bool = False) -> tuple[float | None, str]:
    """(dense peak, source); (None, why) for an unknown GPU or format: never another GPU's peak."""
    if not gpu_name:
        return None, "no GPU: MFU not defined on the CPU"
    cls = precision_class(precision, tf32, fp8)
    for pattern, table, source in PEAKS:
        if re.search(pattern, gpu_name):
            if cls not in table:
                return None, f"{gpu_name} has no confirmed {cls} tensor-core peak in the table: MFU left empty"
            return table[cls], source + (" (FP8)" if cls == "fp8" else "")
    return None, f"unknown GPU '{gpu_name}': no peak in the table, MFU left empty"


COUNTED_SOURCE = "counted: FlopCounterMode over one training step (a model without tokens)"


def flops_per_sample(
    sc: Scenario, model: str, total_params: int | None, generic: float | None = None, counted: float | None = None
) -> tuple[float | None, str]:
    """(FLOPs per sample, their source) or (None, why). A family that names its own count
    (Family.flops) has it analytic, given the worker's parameter count; every other family takes the
    worker's generic count from the built model (bench/measure/flopcount.py); a model without
    tokens (a CNN: no generic count) takes FlopCounterMode's count of its training step (`counted`)."""
    try:
        cfg = read_config(model)
        fam = for_config(cfg, origin(model))
    except GpubenchError:
        return None, "model dimensions unknown"
    if fam.flops is not None:
        try:
            per_sample = load(fam.flops)(sc, cfg, model, total_params)
        except GpubenchError as exc:
            return None, f"model dimensions unusable: {exc.message}"
        if per_sample is None:
            return None, "model dimensions unknown"
        return float(per_sample), f"analytic: {fam.name}"
    if generic:
        return float(generic), "generic: the built model's matmul weights x tokens + attention"
    if counted:
        return float(counted), COUNTED_SOURCE
    return None, f"no FLOP count: the {fam.name} family has no analytic one and the worker gave no generic count"


CHECK_NOTE_PCT = 5.0  # a cross-check gap over this is a note (results.csv, the run table, the report)
MFU_GAP_PCT = 25.0  # a gap over this: the FLOP count is not trusted, achieved_tflops and MFU are left empty


def gap_of(worker: dict[str, Any]) -> float | None:
    """The cross-check's gap in %, a finite number, or None."""
    gap = worker.get("flops_check_gap_pct")
    return float(gap) if isinstance(gap, int | float) and math.isfinite(gap) else None


def mfu_note(gap_pct: float | None) -> str:
    """Why achieved_tflops and MFU are left empty: the two FLOP counts disagree by more than MFU_GAP_PCT."""
    if gap_pct is None or abs(gap_pct) <= MFU_GAP_PCT:
        return ""
    return (
        f"FLOP counts disagree by {gap_pct:+.1f}% (over {MFU_GAP_PCT:g}%): achieved_tflops, mfu and "
        "mfu_ceiling left empty"
    )


def check_note(gap_pct: float | None, note: str | None) -> str:
    if note:
        return note
    if gap_pct is not None and abs(gap_pct) > CHECK_NOTE_PCT:
        return f"FlopCounterMode counts {gap_pct:+.1f}% against the generic count of the dense step"
    return ""


def figures(
    sc: Scenario,
    model: str,
    total_params: int | None,
    samples_per_s: float | None,
    gpu_name: str | None,
    tf32: bool,
    gpus: int = 1,
    worker: dict[str, Any] | None = None,
    ceiling: dict[str, float] | None = None,
) -> dict[str, Any]:
    """FLOPs and MFU of one results row; with several GPUs `samples_per_s` is the job's and the
    peak is all GPUs'. `tf32` is what the run really used (the scenario's or the worker's report);
    `worker`: the worker's figures (its generic count and the counter's cross-check); `ceiling`:
    the run's measured matmul ceiling per format (env.json matmul_ceiling), one GPU's: the row's
    share of it is mfu_ceiling (with several GPUs, of that ceiling times the GPUs)."""
    out: dict[str, Any] = {
        "flops_per_sample": None,
        "achieved_tflops": None,
        "peak_tflops": None,
        "mfu": None,
        "mfu_note": "",
        "peak_source": "",
        "flops_source": "",
        "ceiling_tflops": None,
        "mfu_ceiling": None,
    }
    worker = worker or {}
    if worker.get("flops_check_per_sample") is not None or worker.get("flops_check_note"):
        out["flops_check_note"] = check_note(worker.get("flops_check_gap_pct"), worker.get("flops_check_note"))
    per_sample, source = flops_per_sample(
        sc, model, total_params, worker.get("flops_generic_per_sample"), worker.get("flops_check_per_sample")
    )
    untrusted = mfu_note(gap_of(worker))
    if untrusted:
        out["mfu_note"] = untrusted
    if per_sample is None:
        out["peak_source"] = out["flops_source"] = source
        return out
    out["flops_per_sample"], out["flops_source"] = per_sample, source
    peak, source = peak_tflops(gpu_name, sc.precision, tf32, sc.fp8)
    if peak and gpus > 1:
        peak, source = peak * gpus, f"{gpus} x {source}"
    out["peak_tflops"], out["peak_source"] = peak, source
    reached = (ceiling or {}).get(precision_class(sc.precision, tf32, sc.fp8))
    if reached and gpu_name:
        out["ceiling_tflops"] = reached * gpus
    if samples_per_s and not untrusted:
        out["achieved_tflops"] = per_sample * samples_per_s / 1e12
        if peak:
            out["mfu"] = out["achieved_tflops"] / peak
        if out["ceiling_tflops"]:
            out["mfu_ceiling"] = out["achieved_tflops"] / out["ceiling_tflops"]
    return out
