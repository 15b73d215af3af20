"""TF32 on/off and what fp32 matmuls really run in, through whichever torch API this version has.

torch >= 2.9 has `fp32_precision` settings and refuses to read the legacy getter once a library
(transformers does) has used the new API, so we set and read the new one where it exists.
"""

from __future__ import annotations

import torch

# gpubench's mixed precisions and the dtype autocast runs their matmuls in (fp32: no autocast)
AUTOCAST = {"fp16": torch.float16, "bf16": torch.bfloat16}


def set_tf32(enable: bool) -> None:
    mode = "tf32" if enable else "ieee"
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        matmul.fp32_precision = mode
        torch.backends.cudnn.fp32_precision = mode
    else:  # older torch
        matmul.allow_tf32 = enable
        torch.backends.cudnn.allow_tf32 = enable


def matmul_precision() -> str:
    """'tf32' or 'ieee' (plain fp32) for CUDA fp32 matmuls, as they are set now."""
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        mode = matmul.fp32_precision
        if mode == "none":
            mode = getattr(torch.backends, "fp32_precision", "ieee")
        return "tf32" if mode == "tf32" else "ieee"
    return "tf32" if matmul.allow_tf32 else "ieee"
