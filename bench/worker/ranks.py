"""Many ranks' figures as one row (pure arithmetic, no torch).

Every rank opens and closes its timed window at the same step behind a barrier (with window =
"auto", at the step rank 0 decided: bench/worker/dist.py), so the window is one span of wall time:
the job's samples/s is all ranks' window samples over the longest window (on a device mesh, one
rank per data-parallel replica: its cp and tp ranks train the same samples); window_steps,
window_ci_pct and window_stop are rank 0's (each rank's window_steps is in rank_figures).
Step times come from the slowest rank (a step ends for everyone when its slowest rank is done);
memory is given as the largest rank (what must fit on one GPU) and as the sum over ranks. A
non-finite loss on any rank makes the row diverged (`loss_outcome`), whatever rank 0's loss was.
"""

from __future__ import annotations

import json
from typing import Any

from ..engines import ENGINES

PER_RANK_KEYS = (
    "samples_per_s",
    "step_time_median_ms",
    "window_s",
    "window_steps",
    "torch_max_allocated_mb",
    "torch_max_reserved_mb",
    "rss_peak_mb",
    "final_loss",
    "loss_finite",
    "nonfinite_losses",
    "gpu_energy_j",
    "gpu_sm_active_pct",
    "gpu_sm_clock_median_mhz",
    "host",
    "counts_samples",
)
MAX_KEYS = ("window_s", "first_step_s", "warmup_s", "train_loop_s", "trainer_runtime_s", "startup_s")
MEMORY_KEYS = ("torch_max_allocated_mb", "torch_max_reserved_mb", "rss_peak_mb")
# The GPU probe's figures (bench/measure/gpuwatch.py), one GPU per rank: the job's energy and power
# are the GPUs' sum; its clocks the lowest GPU's; its activity the GPUs' mean.
GPU_SUM_KEYS = ("gpu_energy_j", "gpu_energy_sampled_j", "gpu_power_mean_w", "gpu_power_limit_w")
GPU_MAX_KEYS = ("gpu_power_max_w",)
GPU_MIN_KEYS = ("gpu_sm_clock_median_mhz", "gpu_sm_clock_min_mhz")
GPU_MEAN_KEYS = (
    "gpu_power_capped_pct",
    "gpu_sm_active_pct",
    "gpu_tensor_active_pct",
    "gpu_dram_bw_pct",
    "gpu_fp32_active_pct",
    "gpu_fp16_active_pct",
    "gpu_util_pct",
    "gpu_mem_util_pct",
)


def _numbers(ranks: list[dict[str, Any]], key: str) -> list[float]:
    return [float(r[key]) for r in ranks if isinstance(r.get(key), int | float)]


def combine_ranks(ranks: list[dict[str, Any]], engine: str) -> dict[str, Any]:
    """One row's figures from every rank's (rank order; rank 0 first)."""
    out = dict(ranks[0])
    out.pop("host", None)  # kept per rank, in rank_figures
    out.pop("counts_samples", None)
    world = len(ranks)
    for key in MAX_KEYS:
        values = _numbers(ranks, key)
        if values:
            out[key] = max(values)
    window_s = out.get("window_s")
    counting = [r for r in ranks if r.get("counts_samples", True)]  # one per data-parallel replica
    samples = sum(_numbers(counting, "window_samples"))
    if window_s:
        out["window_samples"] = int(samples)
        out["samples_per_s"] = samples / window_s
        tokens = sum(float(r["tokens_per_s"]) * float(r["window_s"]) for r in counting if r.get("tokens_per_s"))
        # no rank counted tokens (a CNN, a command that gave none): no token figure, never 0
        out["tokens_per_s"] = tokens / window_s if any(r.get("tokens_per_s") for r in counting) else None
        out["samples_per_s_per_gpu"] = out["samples_per_s"] / world
    medians = [(r.get("step_time_median_ms") or 0.0, i) for i, r in enumerate(ranks)]
    slowest = max(medians)[1]
    for key in ("step_time_p10_ms", "step_time_median_ms", "step_time_p90_ms"):
        out[key] = ranks[slowest].get(key)
    out["slowest_rank"] = slowest
    for key in MEMORY_KEYS:
        values = _numbers(ranks, key)
        if values:
            out[key] = max(values)
            out[key.replace("_mb", "_sum_mb")] = sum(values)
    for key in [k for k in ranks[0] if k.startswith("torch_alloc_")]:
        values = _numbers(ranks, key)
        out[key] = max(values) if values else None
    out.update(_gpu_figures(ranks))
    finite = [bool(r.get("loss_finite")) for r in ranks]
    out["loss_finite"] = all(finite)
    out["nonfinite_losses"] = int(sum(_numbers(ranks, "nonfinite_losses")))
    if ENGINES[engine].rank_rule == "sum" and out.get("trainer_samples_per_s") is not None:
        # the engine's own epoch figure is per rank (the Trainer's is already global: bench/engines.py)
        out["trainer_samples_per_s"] = sum(_numbers(counting, "trainer_samples_per_s"))
    out["world_size"] = world
    out["rank_figures"] = json.dumps([{k: r.get(k) for k in PER_RANK_KEYS} | {"rank": i} for i, r in enumerate(ranks)])
    return out


def _gpu_figures(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """The job's GPU-probe figures from every rank's (None where no rank measured one)."""
    out: dict[str, Any] = {}
    for keys, combine in (
        (GPU_SUM_KEYS, sum),
        (GPU_MAX_KEYS, max),
        (GPU_MIN_KEYS, min),
        (GPU_MEAN_KEYS, lambda v: sum(v) / len(v)),
    ):
        for key in keys:
            values = _numbers(ranks, key)
            out[key] = combine(values) if values else None
    events = {e for r in ranks for e in str(r.get("gpu_clock_events") or "").split(";") if e and e != "none"}
    seen = [r.get("gpu_clock_events") for r in ranks if r.get("gpu_clock_events") is not None]
    out["gpu_clock_events"] = (";".join(sorted(events)) or "none") if seen else None
    return out


def loss_outcome(ranks: list[dict[str, Any]]) -> tuple[str, str]:
    """(status, reason) from every rank's loss figures (rank order; one entry without ranks):
    "diverged" when any rank saw a non-finite loss, or none, with the reason naming each such rank,
    the one with the most first (where ranks share gradients, the NaN spreads from it to the others)."""
    bad = [(i, r) for i, r in enumerate(ranks) if not r.get("loss_finite") or r.get("nonfinite_losses")]
    bad.sort(key=lambda item: -int(item[1].get("nonfinite_losses") or 0))
    if not bad:
        return "ok", ""

    def what(r: dict[str, Any]) -> str:
        return f"{int(r.get('nonfinite_losses') or 0)} non-finite losses; final loss {r.get('final_loss')}"

    if len(ranks) == 1:
        return "diverged", what(ranks[0])
    return "diverged", "; ".join(f"rank {i}: {what(r)}" for i, r in bad)
