"""Fidelity of gpubench's figures on a GPU, measured side by side in one job:

1. the Accelerate engine (`gpubench run --matrix fidelity`) against the hand-written reference loop
   (validation/reference_loop.py) for the same scenarios: the ratio must be within 3%;
2. the cost of the NVML memory sampler: the same scenarios with sampling on and off.

    python -m validation.fidelity --out results/bench/fidelity --repeats 3

The yardstick is the loop with the engine's own data path: accelerate's DataLoader (like the
Trainer, and like a plain `batch.to("cuda")`) copies each batch with a blocking copy, which waits
for the GPU once per step. The loop also runs with `non_blocking=True`: set beside the first, that
shows what the guide's data path costs, which is the recipe's cost, not the harness's.

Repeat R runs the engine on every scenario (OUT/engine-rR), the engine again with the sampler off
(OUT/engine-no-sampler-rR), then for each scenario the loop with the blocking copy
(OUT/reference-blocking-SCENARIO-rR.json, the scenarios of --blocking-copy) and the loop with the
non-blocking copy (OUT/reference-SCENARIO-rR.json). Both sides thus alternate in time, so a
machine that drifts over the job moves both alike. Every finished piece is kept: running the
script again goes on where it stopped. With --time-limit it starts nothing once the time is up
and exits 4 (run it again to go on).

Writes OUT/fidelity.csv (per scenario: the median samples/s of each side over the repeats, their
ratios, the range of the per-repeat ratios, each side's coefficient of variation, and the
sampler's cost, and the median CPU probe around the engine's and the blocking loop's windows:
`engine_cpu_loop_ms`, `blocking_cpu_loop_ms`) once every repeat is done, and prints it.
`within_3pct` judges the engine's median against the blocking loop's where that ran, else
against the non-blocking loop's. On a host whose CPU speed drifts (a launch-bound step follows
it), a ratio of medians can pass or fail by chance; so the table also gives
`pair_geomean_ratio`: the geometric mean of the per-repeat ratios engine / blocking loop, with its
95% interval (`pair_ci_low`, `pair_ci_high`; validation/interleave_stats.py), from 4 repeats up.
validation/interleaved.py measures the same ratio with both sides in one process, which a
drifting CPU cannot bias. Arguments after `--` go to each `gpubench run` (e.g. `-- --model
bert-base`). `--device cpu` runs the whole thing on the CPU with the tiny model, to test the
script; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import pandas as pd

from bench.fsio import atomic_write_text
from bench.results import read_results, row_cpu_loop_ms
from validation.interleave_stats import paired_ratio
from validation.parts import TIME_LIMIT, expired, gpubench_run, run_child, run_script

# One reference loop: seconds on a GPU (bert-large, 128 steps); a hang guard far above that.
REFERENCE_TIMEOUT_S = 900.0


def reference(settings: dict, device: str, out: Path, blocking: bool = False) -> int:
    """Run the reference loop for the settings of one engine row into `out` (kept if present); its
    exit code. `blocking`: copy each batch as accelerate's DataLoader does (--blocking-copy)."""
    if out.is_file():
        return 0
    cmd = [sys.executable, "-m", "validation.reference_loop", "--device", device, "--out", str(out)]
    cmd += ["--blocking-copy"] if blocking else []
    for key in ("batch_size", "precision", "optimizer", "attn_implementation", "samples", "seq_len"):
        cmd += [f"--{key.replace('_', '-')}", str(settings[key])]
    cmd += ["--model", str(settings["model_resolved"]), "--warmup-steps", str(settings["warmup_steps"])]
    cmd += ["--tf32"] if settings["tf32"] else []
    return run_child(f"reference loop {out.stem}", cmd, REFERENCE_TIMEOUT_S, quiet=True)


def cv_pct(values: pd.Series) -> float:
    return float(values.std() / values.mean() * 100) if len(values) > 1 else float("nan")


def table(out: Path, repeats: int, sampler_off: bool) -> pd.DataFrame:
    pairs = []
    for r in range(repeats):
        engine = read_results(out / f"engine-r{r}")
        off = read_results(out / f"engine-no-sampler-r{r}").set_index("scenario") if sampler_off else None
        for row in engine[engine["status"] == "ok"].to_dict("records"):
            ref_json = out / f"reference-{row['scenario']}-r{r}.json"
            ref = json.loads(ref_json.read_text()) if ref_json.is_file() else {}
            blocking_json = out / f"reference-blocking-{row['scenario']}-r{r}.json"
            blocking = json.loads(blocking_json.read_text()) if blocking_json.is_file() else {}
            pairs.append(
                {
                    "scenario": row["scenario"],
                    "engine": row["samples_per_s"],
                    "reference": ref.get("samples_per_s", math.nan),
                    "no_sampler": off["samples_per_s"].get(row["scenario"]) if off is not None else None,
                    "blocking": blocking.get("samples_per_s"),
                    "engine_cpu_ms": row_cpu_loop_ms(row),
                    "blocking_cpu_ms": row_cpu_loop_ms(blocking),
                    "engine_mb": row["torch_max_allocated_mb"],
                    "reference_mb": ref.get("torch_max_allocated_mb", math.nan),
                }
            )
    frame = pd.DataFrame(pairs)
    frame["ratio"] = frame["engine"] / frame["reference"]
    rows = []
    for name, g in frame.groupby("scenario", sort=False):
        engine, ref = g["engine"].median(), g["reference"].median()
        row = {
            "scenario": name,
            "repeats": len(g),
            "engine_samples_per_s": engine,
            "reference_samples_per_s": ref,
            "engine_over_reference": engine / ref,
            "ratio_min": g["ratio"].min(),
            "ratio_max": g["ratio"].max(),
            "engine_cv_pct": cv_pct(g["engine"]),
            "reference_cv_pct": cv_pct(g["reference"]),
            "engine_max_allocated_mb": g["engine_mb"].median(),
            "reference_max_allocated_mb": g["reference_mb"].median(),
            "within_3pct": abs(engine / ref - 1) <= 0.03,
        }
        blocking = pd.to_numeric(g["blocking"], errors="coerce").dropna()
        if len(blocking):  # the loop with accelerate's blocking batch copy: the engine's own data path
            ratios = g["engine"] / pd.to_numeric(g["blocking"], errors="coerce")
            row["reference_blocking_samples_per_s"] = blocking.median()
            row["engine_over_blocking"] = engine / blocking.median()
            row["blocking_ratio_min"], row["blocking_ratio_max"] = ratios.min(), ratios.max()
            row["blocking_cv_pct"] = cv_pct(blocking)
            row["within_3pct"] = abs(engine / blocking.median() - 1) <= 0.03
            # How fast the CPU was around each side's windows: where the two differ, so may the speeds
            for side in ("engine", "blocking"):
                row[f"{side}_cpu_loop_ms"] = pd.to_numeric(g[f"{side}_cpu_ms"], errors="coerce").median()
            paired = paired_ratio(g["engine"], pd.to_numeric(g["blocking"], errors="coerce"))
            row["pair_geomean_ratio"] = paired["ratio"]
            row["pair_ci_low"], row["pair_ci_high"] = paired["ci_low"], paired["ci_high"]
        no_sampler = pd.to_numeric(g["no_sampler"], errors="coerce").dropna()
        if len(no_sampler):
            row["no_sampler_samples_per_s"] = no_sampler.median()
            row["sampler_cost_pct"] = (1 - engine / no_sampler.median()) * 100
        rows.append(row)
    return pd.DataFrame(rows)


def main() -> int:
    return run_script(_main)


def _main() -> int:
    p = argparse.ArgumentParser(
        prog="python -m validation.fidelity", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--only", default=None, help="comma-separated scenarios of the fidelity matrix")
    p.add_argument(
        "--sampler-off",
        default="fp32-b4,bf16-b4",  # compute-bound and launch-bound: the sampler's NVML calls could contend there
        help="scenarios to rerun with NVML sampling off ('' for none)",
    )
    p.add_argument(
        "--blocking-copy",
        default="all",
        help="scenarios whose reference loop also runs with accelerate's blocking batch copy, the yardstick "
        "('all', the default, or a comma-separated list; '' for none)",
    )
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--time-limit", type=float, default=None, help="seconds; then exit 4, run again to go on")
    p.add_argument("extra", nargs="*", help="passed to each gpubench run (after --)")
    a = p.parse_args()
    deadline = None if a.time_limit is None else time.monotonic() + a.time_limit
    args = ["--matrix", "fidelity", "--device", a.device, *(["--only", a.only] if a.only else []), *a.extra]
    for r in range(a.repeats):
        steps = [(f"engine r{r}", a.out / f"engine-r{r}", args)]
        if a.sampler_off:
            off = ["--matrix", "fidelity", "--device", a.device, "--only", a.sampler_off, "--no-memory-sampling"]
            steps.append((f"engine, sampler off, r{r}", a.out / f"engine-no-sampler-r{r}", off + a.extra))
        for name, out, step_args in steps:
            if expired(deadline):
                return TIME_LIMIT
            code = gpubench_run(name, out, step_args, deadline)
            if code not in (0, 1):  # 1: a scenario failed; its row says why, and it is left out below
                return code
        engine = read_results(a.out / f"engine-r{r}")
        for row in engine[engine["status"] == "ok"].to_dict("records"):
            blocking = a.blocking_copy == "all" or row["scenario"] in a.blocking_copy.split(",")
            loops = [("reference-blocking", True)] if blocking else []
            loops += [("reference", False)]
            for prefix, blocking in loops:
                ref_out = a.out / f"{prefix}-{row['scenario']}-r{r}.json"
                if not ref_out.is_file() and expired(deadline):
                    return TIME_LIMIT
                code = reference(row, a.device, ref_out, blocking)
                if code != 0:
                    print(f"{ref_out.stem}: the reference loop ended with exit {code}", file=sys.stderr)
                    return code
    result = table(a.out, a.repeats, bool(a.sampler_off))
    atomic_write_text(a.out / "fidelity.csv", result.to_csv(index=False))
    print(result.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
