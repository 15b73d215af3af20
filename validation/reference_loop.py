"""A minimal hand-written PyTorch training loop: the yardstick for gpubench's Accelerate engine.

Same model (a BERT preset, random weights, built on the device), same random data, same optimizer
and precision; no Accelerate, no Trainer, no hooks. Timed with a device synchronisation at the
window's two ends only; each step's end is marked with a CUDA event, as the engine's clock does,
for the step-time quantiles (p10, median, p90), and a fixed Python loop is timed just before and
just after the window (`cpu_loop_start_ms`, `cpu_loop_end_ms`), as the engine's clock does. Writes
one JSON object to --out.

Each batch goes to the GPU with `non_blocking=True`, so the CPU may run ahead of the GPU.
`--blocking-copy` copies as accelerate's DataLoader and the Trainer do by default: a blocking copy,
which waits for the GPU to finish the work already queued, once per step. Running both on one
scenario shows what that wait costs.

    python -m validation.reference_loop --model bert-large --batch-size 4 --precision bf16 --out ref.json
"""

from __future__ import annotations

import argparse
import json

import torch
from transformers import AutoModelForSequenceClassification, BertConfig

from bench.families.resolve import PRESETS
from bench.worker.clock import step_time_ms
from validation.window import timed_window


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m validation.reference_loop",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", default="bert-large", choices=sorted(PRESETS))
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--precision", default="fp32", choices=["fp32", "fp16", "bf16"])
    p.add_argument("--tf32", action="store_true")
    p.add_argument("--optimizer", default="adamw", choices=["adamw", "adamw_fused"])
    p.add_argument("--attn-implementation", default="default", choices=["default", "eager", "sdpa"])
    p.add_argument("--samples", type=int, default=512)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--warmup-steps", type=int, default=10)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--blocking-copy", action="store_true", help="copy each batch as accelerate and the Trainer do")
    p.add_argument("--device", default="cuda", help="cuda (the yardstick) or cpu (to test the script)")
    p.add_argument("--out", required=True)
    return p


class ReferenceLoop:
    """The model, data and optimizer of the loop; `step(i)` trains on the i-th batch (wrapping)."""

    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.device = device = torch.device(a.device)
        torch.backends.cuda.matmul.fp32_precision = "tf32" if a.tf32 else "ieee"
        torch.manual_seed(a.seed)
        extra = {} if a.attn_implementation == "default" else {"attn_implementation": a.attn_implementation}
        with device:
            model = AutoModelForSequenceClassification.from_config(BertConfig(**PRESETS[a.model]), **extra)
        self.model = model.float().train()
        fused = True if a.optimizer == "adamw_fused" else None
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=5e-5, weight_decay=0.0, fused=fused)
        gen = torch.Generator().manual_seed(a.seed)
        self.ids = torch.randint(100, 30000, (a.samples, a.seq_len), generator=gen)
        self.labels = torch.zeros(a.samples, dtype=torch.long)
        self.dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.precision)
        self.scaler = torch.amp.GradScaler(device.type) if a.precision == "fp16" else None
        self.batches = a.samples // a.batch_size
        self.loss: torch.Tensor | None = None

    def step(self, i: int) -> None:
        a, device = self.a, self.device
        rows = slice((i % self.batches) * a.batch_size, (i % self.batches + 1) * a.batch_size)
        batch_ids = self.ids[rows].to(device, non_blocking=not a.blocking_copy)
        batch_labels = self.labels[rows].to(device, non_blocking=not a.blocking_copy)
        with torch.autocast(device.type, dtype=self.dtype, enabled=self.dtype is not None):
            loss = self.model(input_ids=batch_ids, labels=batch_labels).loss
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.loss = loss


def main() -> None:
    a = parser().parse_args()
    loop = ReferenceLoop(a)
    device = loop.device
    cuda = device.type == "cuda"
    steps = loop.batches
    w = timed_window(loop.step, steps, a.warmup_steps, cuda)
    window_samples = (steps - a.warmup_steps) * a.batch_size
    result = {
        "samples_per_s": window_samples / w.window_s,
        **step_time_ms(w.step_s),
        "cpu_loop_start_ms": w.cpu_loop_start_ms,
        "cpu_loop_end_ms": w.cpu_loop_end_ms,
        "window_s": w.window_s,
        "window_samples": window_samples,
        "final_loss": float(loop.loss.detach()) if loop.loss is not None else None,
        "torch_max_allocated_mb": torch.cuda.max_memory_allocated() / 2**20 if cuda else None,
        **vars(a),
    }
    with open(a.out, "w") as fh:
        json.dump(result, fh)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
