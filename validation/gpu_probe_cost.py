"""What the GPU window probe (bench/measure/gpuwatch.py) costs the steps it watches: the
hand-written loop (validation/reference_loop.py) in one process, in alternating blocks of
`--block-steps` steps, a b | b a | ..., with the probe open over side a's blocks (its sampler
thread reading power, clock and clocks-event reasons at `--hz`, the energy counter and GPM at its
edges: what a row's window gets) and closed over side b's. The ratio is the geometric mean of the
per-pair samples/s ratios a/b with a 95% interval from resampled pairs
(validation/interleave_stats.py). Run it on a compute-bound recipe (the budget: at most 1%) and on
a launch-bound one (the sampler shares the GIL with the thread launching the kernels).

    python -m validation.gpu_probe_cost --batch-size 32 --precision bf16 --out cost-b32.json
    python -m validation.gpu_probe_cost --batch-size 4 --precision bf16 --hz 100 --out cost-b4.json
"""

from __future__ import annotations

import json
import time

import torch

from bench.measure.gpuwatch import SAMPLE_HZ, GpuProbe
from validation.interleave_stats import paired_ratio
from validation.interleaved import timed_block
from validation.reference_loop import ReferenceLoop
from validation.reference_loop import parser as loop_parser


def main() -> None:
    p = loop_parser()
    p.prog = "python -m validation.gpu_probe_cost"
    p.add_argument("--pairs", type=int, default=20)
    p.add_argument("--block-steps", type=int, default=30)
    p.add_argument("--hz", type=float, default=SAMPLE_HZ)
    a = p.parse_args()
    loop = ReferenceLoop(a)
    cuda = loop.device.type == "cuda"
    counter = iter(range(10**9))

    def step() -> None:
        loop.step(next(counter))

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    timed_block(step, a.warmup_steps, sync)
    blocks, figures = [], []
    for pair in range(a.pairs):
        for side in ("a", "b") if pair % 2 == 0 else ("b", "a"):
            probe = GpuProbe(str(loop.device), hz=a.hz)
            if side == "a":
                probe.open()
            seconds = timed_block(step, a.block_steps, sync)
            if side == "a":
                figures.append(probe.close())
            blocks.append({"pair": pair, "side": side, "samples_per_s": a.block_steps * a.batch_size / seconds})
    by = {s: [b["samples_per_s"] for b in sorted(blocks, key=lambda b: b["pair"]) if b["side"] == s] for s in "ab"}
    result = {
        "what": "samples/s with the GPU probe open (a) over without it (b), alternating blocks",
        "ratio": paired_ratio(by["a"], by["b"]),
        "hz": a.hz,
        "sample_hz_reached": [f.get("gpu_sample_hz") for f in figures],
        "probe_figures_last": figures[-1] if figures else None,
        "blocks": blocks,
        "settings": vars(a),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "gpu": torch.cuda.get_device_name() if cuda else None,
    }
    with open(a.out, "w") as fh:
        json.dump(result, fh, indent=1)
    print(json.dumps({"ratio": result["ratio"], "hz": a.hz, "batch_size": a.batch_size, "precision": a.precision}))


if __name__ == "__main__":
    main()
