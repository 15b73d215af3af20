"""Fidelity of gpubench's figures on a GPU, measured side by side in one job:

1. the Accelerate engine (`gpubench run --matrix fidelity`) against the hand-written reference loop
   (benchmarks/reference_loop.py) for the same scenarios: the ratio must be within 3%;
2. the cost of the NVML memory sampler: the same scenarios with sampling on and off.

    python benchmarks/fidelity.py --out results/h200-fidelity

Writes OUT/fidelity.csv and prints the table. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from bench.fsio import atomic_write_text
from bench.results import read_results

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 900


def gpubench(*args: str) -> int:
    cmd = [sys.executable, "-m", "bench", "run", "--matrix", "fidelity", *args]
    return subprocess.run(cmd, timeout=TIMEOUT_S, check=False).returncode


def reference(settings: dict, out: Path) -> dict:
    cmd = [
        sys.executable,
        str(HERE / "reference_loop.py"),
        "--model",
        settings["model_resolved"],
        "--batch-size",
        str(settings["batch_size"]),
        "--precision",
        settings["precision"],
        "--optimizer",
        settings["optimizer"],
        "--attn-implementation",
        settings["attn_implementation"],
        "--samples",
        str(settings["samples"]),
        "--seq-len",
        str(settings["seq_len"]),
        "--warmup-steps",
        str(settings["warmup_steps"]),
        "--out",
        str(out),
    ] + (["--tf32"] if settings["tf32"] else [])
    subprocess.run(cmd, timeout=TIMEOUT_S, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--only", default=None, help="comma-separated scenarios of the fidelity matrix")
    p.add_argument("--sampler-off", default="fp32-b4", help="scenarios to rerun with NVML sampling off ('' for none)")
    a = p.parse_args()
    only = ["--only", a.only] if a.only else []
    gpubench("--out", str(a.out / "engine"), *only)
    if a.sampler_off:
        gpubench("--out", str(a.out / "engine-no-sampler"), "--only", a.sampler_off, "--no-memory-sampling")
    engine = read_results(a.out / "engine")
    rows = []
    for settings in engine[engine["status"] == "ok"].to_dict("records"):
        ref = reference(settings, a.out / f"reference-{settings['scenario']}.json")
        rows.append(
            {
                "scenario": settings["scenario"],
                "engine_samples_per_s": settings["samples_per_s"],
                "reference_samples_per_s": ref["samples_per_s"],
                "engine_over_reference": settings["samples_per_s"] / ref["samples_per_s"],
                "engine_max_allocated_mb": settings["torch_max_allocated_mb"],
                "reference_max_allocated_mb": ref["torch_max_allocated_mb"],
            }
        )
    table = pd.DataFrame(rows)
    table["within_3pct"] = (table["engine_over_reference"] - 1).abs() <= 0.03
    if a.sampler_off and (a.out / "engine-no-sampler").is_dir():
        off = read_results(a.out / "engine-no-sampler").set_index("scenario")["samples_per_s"]
        table["no_sampler_samples_per_s"] = table["scenario"].map(off)
        table["sampler_cost_pct"] = (1 - table["engine_samples_per_s"] / table["no_sampler_samples_per_s"]) * 100
    atomic_write_text(a.out / "fidelity.csv", table.to_csv(index=False))
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
