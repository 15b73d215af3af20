"""A hand-written PyTorch training loop for any scenario of a matrix: the yardstick for the rows of
the model families (vit, moe, decoders matrices) that gpubench's engines time.

The same model as the engine trains (built by gpubench's builder: family, task, LoRA/QLoRA base,
Liger, experts kernels), the same random data, optimizer (torch's AdamW over the trainable
parameters) and precision (autocast; a GradScaler under fp16); then nothing but forward, backward,
step and zero_grad. No Accelerate, no Trainer, no hooks. A scenario of `engine = "fabric"` is the
talk's Fabric loop (`--loop auto`, the default): `Fabric(precision=...)`, `setup_module`,
`setup_optimizers`, `fabric.backward`, nothing else; `--loop plain` runs the plain loop for it, so
that Fabric's own cost is measured apart from gpubench's. The window is the scenario's own: its
warm-up steps, then `window` optimizer steps (or the rest of the epoch), timed with a device
synchronisation at both ends and a CUDA event at each step's end. Writes one JSON object to --out.

    python -m validation.model_loop --matrix vit --scenario bf16-b128 --out loop.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch

from bench.families.resolve import resolve_model
from bench.planner import matrix as matrix_mod
from bench.recipe.scenario import Scenario
from bench.worker.clock import step_time_ms
from bench.worker.dataset import dataset_for
from bench.worker.engines.inputs import shuffled_loader
from bench.worker.llm import apply_liger, build_trained
from bench.worker.precision import set_tf32
from validation.window import timed_window

FEEDS = ("loader", "slices")  # how the loop's batches reach it: make_step says


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m validation.model_loop", description=__doc__)
    p.add_argument("--matrix", required=True, help="a shipped matrix name or a .toml file")
    p.add_argument("--scenario", required=True)
    p.add_argument("--model", default=None, help="override the scenario's model (as gpubench run --model)")
    p.add_argument("--device", default="cuda", help="cuda (the yardstick) or cpu (to test the script)")
    p.add_argument("--out", required=True)
    p.add_argument(
        "--loop", choices=("auto", "plain", "fabric"), default="auto", help="auto: Fabric for engine = fabric"
    )
    p.add_argument(
        "--feed",
        choices=FEEDS,
        default="loader",
        help="loader: a shuffled DataLoader collates each batch (as the engines and the talk's scripts); "
        "slices: contiguous slices of the data set, no collation",
    )
    return p


def fabric_of(sc: Scenario, device: torch.device) -> Any:
    """A Fabric on the one device, in the scenario's precision (Fabric's spelling), as the talk's scripts."""
    from lightning_fabric import Fabric

    from bench.recipe.precisions import TO_FABRIC
    from bench.worker.engines.fabric import no_precision_hint

    no_precision_hint()  # its TF32 hint fails in torch 2.11 once the precision was set per backend
    accelerator = "cuda" if device.type == "cuda" else "cpu"
    devices = [device.index or 0] if device.type == "cuda" else 1
    fabric = Fabric(accelerator=accelerator, devices=devices, precision=TO_FABRIC.get(sc.precision, sc.precision))  # type: ignore[arg-type]
    fabric.launch()
    return fabric


def build(sc: Scenario, model_name: str, device: torch.device, scratch: Path) -> tuple[Any, Any]:
    """(model, dataset) as gpubench's worker builds them."""
    torch.manual_seed(sc.seed)
    model, task = build_trained(sc, model_name, device, scratch)
    return model, dataset_for(model.config, task, sc.samples, sc.seq_len, sc.seed, "memory")


def epochs(data: Any, sc: Scenario, fabric: Any = None) -> Any:
    """Batches for ever, epoch after epoch, from the engines' own DataLoader (shuffled by the
    scenario's seed, whole batches, each collated from its rows), as the talk's scripts have one.
    Fabric's loop takes it through `fabric.setup_dataloaders`, as the talk's Fabric scripts (03-07)
    and the Fabric engine do: its batches reach the device by a non-blocking copy, while the plain
    loop's `.to(device)` (the talk's 01-02) waits for the GPU first."""
    loader = shuffled_loader(data, sc)
    if fabric is not None:
        loader = fabric.setup_dataloaders(loader)
    while True:
        yield from loader


def make_step(
    sc: Scenario, model_name: str, device: torch.device, scratch: Path, loop: str = "plain", feed: str = "loader"
) -> Any:
    """The loop's one optimizer step, `step(i)` on the i-th batch (the data wrap around), with its
    own model, optimizer and data: what `run` times, and a side of validation/interleaved.py.
    `feed`: "loader" collates each batch from the data set's rows (epochs); "slices" copies
    contiguous slices of the data set's tensors, no collation (the yardstick until 2026-12-04)."""
    cuda = device.type == "cuda"
    if cuda:
        set_tf32(sc.tf32)
    model, data = build(sc, model_name, device, scratch)
    if sc.grad_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if sc.liger:
        apply_liger(model)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    fused = True if sc.optimizer == "adamw_fused" else None
    optimizer = torch.optim.AdamW(params, lr=5e-5, weight_decay=0.0, fused=fused)
    forward = torch.compile(model) if sc.compile else model
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(sc.precision)
    scaler = torch.amp.GradScaler(device.type) if sc.precision == "fp16" else None
    fabric = fabric_of(sc, device) if loop == "fabric" else None
    if fabric is not None:  # Fabric's autocast and scaler instead of the loop's own
        forward, optimizer = fabric.setup_module(forward), fabric.setup_optimizers(optimizer)
        dtype, scaler = None, None
        if cuda:
            set_tf32(sc.tf32)
    batches = sc.samples // sc.batch_size
    loader = epochs(data, sc, fabric)

    def collated(_: int) -> dict[str, torch.Tensor]:
        return {k: v.to(device) for k, v in next(loader).items()}

    def sliced(i: int) -> dict[str, torch.Tensor]:
        start = (i % batches) * sc.batch_size
        rows = slice(start, start + sc.batch_size)
        return {**{k: v[rows].to(device) for k, v in data.inputs.items()}, "labels": data.labels[rows].to(device)}

    fetch = collated if feed == "loader" else sliced

    def step(i: int) -> Any:
        batch = fetch(i)
        labels = batch.pop("labels")
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            out = forward(**batch, labels=labels).loss
        if fabric is not None:
            fabric.backward(out)
            optimizer.step()
        elif scaler is not None:
            scaler.scale(out).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            out.backward()
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return out

    return step


def run(
    sc: Scenario, model_name: str, device: torch.device, scratch: Path, loop: str = "plain", feed: str = "loader"
) -> dict[str, Any]:
    cuda = device.type == "cuda"
    step = make_step(sc, model_name, device, scratch, loop, feed)
    batches = sc.samples // sc.batch_size
    steps = min(batches, sc.warmup_steps + sc.window) if isinstance(sc.window, int) else batches
    w = timed_window(step, steps, sc.warmup_steps, cuda)
    loss = w.last
    window_samples = (steps - sc.warmup_steps) * sc.batch_size
    return {
        "scenario": sc.name,
        "model": model_name,
        "loop": loop,
        "feed": feed,
        "samples_per_s": window_samples / w.window_s,
        **step_time_ms(w.step_s),
        "window_s": w.window_s,
        "window_samples": window_samples,
        "cpu_loop_start_ms": w.cpu_loop_start_ms,
        "cpu_loop_end_ms": w.cpu_loop_end_ms,
        "final_loss": float(loss.detach()) if loss is not None else None,
        "torch_max_allocated_mb": torch.cuda.max_memory_allocated() / 2**20 if cuda else None,
    }


def loop_for(sc: Scenario, choice: str = "auto") -> str:
    """The loop --loop names: auto is Fabric's for an engine = "fabric" scenario, else the plain one."""
    return ("fabric" if sc.engine == "fabric" else "plain") if choice == "auto" else choice


def main() -> None:
    a = parser().parse_args()
    overrides = {"model": a.model} if a.model else None
    m = matrix_mod.load_matrix(a.matrix, overrides=overrides, only=[a.scenario])
    sc = m.scenarios[0]
    device = torch.device(a.device)
    model_name = resolve_model(sc.model, "cpu" if device.type == "cpu" else "cuda")
    out = Path(a.out)
    loop = loop_for(sc, a.loop)
    result = run(sc, model_name, device, out.parent / f".{out.stem}-scratch", loop, a.feed)
    out.write_text(json.dumps(result), encoding="utf-8")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
