"""Where the launch-bound rows' noise comes from: CPU placement, measured window by window.

A batch-4 autocast or TF32 step of bert-large on an H200 waits on the CPU launching kernels, so
its speed is the speed of the CPU thread that launches them. This script runs such a step in
several fresh processes, one after the other; each process times consecutive windows of steps
while it changes where its threads may run:

- `free`: every CPU this process may use (what a worker gets by default);
- `one-cpu`: all threads on one CPU, a different one in each process;
- `two-cpus`: all threads on that CPU and the next one this process may use.

Each window's row records samples/s, the CPU each thread of the process was on at the window's
end, and the CPU time the hypervisor took away (steal) during the window. The summary says how far
windows of one placement spread *between* processes and *within* one, which separates "this
process landed badly" from "the machine drifted". Before the processes, every CPU runs the same
pure-Python loop, which shows whether some CPUs are slower than others.

    python benchmarks/cpu_noise.py --out noise --processes 12
    python benchmarks/cpu_noise.py --out noise --device cpu --model tiny  # tests the script only

Writes OUT/env.json, OUT/windows.csv, OUT/cpus.csv and OUT/summary.csv, and prints the summary.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.measure.cpuspeed import loop_seconds

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 600
PLACEMENTS = ("free", "one-cpu", "two-cpus")


def steal_ticks() -> int | None:
    """The machine's steal time so far, in clock ticks (Linux /proc/stat); None elsewhere."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
    except OSError:
        return None
    return int(fields[8]) if fields[0] == "cpu" and len(fields) > 8 else None


def thread_cpus() -> list[int]:
    """The CPU each thread of this process last ran on (/proc/self/task/*/stat, field 39), the main
    thread first. A thread that has slept since a move still shows where it ran before."""
    cpus = []
    for tid in sorted(os.listdir("/proc/self/task"), key=int):
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
        except OSError:
            continue
        cpus.append(int(stat.rsplit(")", 1)[1].split()[36]))
    return cpus


def place(cpus: set[int]) -> None:
    """Allow every thread of this process, and those it starts later, only `cpus`."""
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):  # the thread ended meanwhile
            os.sched_setaffinity(int(tid), cpus)


def python_speed(cpus: list[int], rounds: int) -> list[dict[str, Any]]:
    """Seconds for one fixed pure-Python loop on each CPU, `rounds` times around."""
    rows = []
    allowed = os.sched_getaffinity(0)
    for r in range(rounds):
        for cpu in cpus:
            os.sched_setaffinity(0, {cpu})
            rows.append({"round": r, "cpu": cpu, "loop_s": loop_seconds(2_000_000)})
    os.sched_setaffinity(0, allowed)
    return rows


def child(a: argparse.Namespace) -> None:
    """One process: warm up, then windows cycling through the placements; JSON lines out."""
    import torch
    from transformers import AutoModelForSequenceClassification, BertConfig

    from bench.models import PRESETS

    device = torch.device(a.device)
    cuda = device.type == "cuda"
    torch.backends.cuda.matmul.fp32_precision = "tf32" if a.tf32 else "ieee"
    torch.manual_seed(a.seed)
    with device:
        model = AutoModelForSequenceClassification.from_config(BertConfig(**PRESETS[a.model]))
    model = model.float().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.0)
    ids = torch.randint(100, 30000, (a.batch_size, a.seq_len), device=device)
    labels = torch.zeros(a.batch_size, dtype=torch.long, device=device)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.precision)

    def step() -> None:
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def sync() -> float:
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    for _ in range(a.warmup_steps):
        step()
    free = os.sched_getaffinity(0)
    for w in range(a.windows):
        placement = PLACEMENTS[w % len(PLACEMENTS)]
        place({"free": free, "one-cpu": {a.cpu}, "two-cpus": {a.cpu, a.cpu2}}[placement])
        steal0, t0 = steal_ticks(), sync()
        for _ in range(a.steps):
            step()
        t1, steal1 = sync(), steal_ticks()
        row = {
            "window": w,
            "placement": placement,
            "samples_per_s": a.steps * a.batch_size / (t1 - t0),
            "window_s": t1 - t0,
            "steal_s": (steal1 - steal0) / os.sysconf("SC_CLK_TCK")
            if steal0 is not None and steal1 is not None
            else None,
            "thread_cpus": " ".join(map(str, thread_cpus())),
            "threads": len(os.listdir("/proc/self/task")),
        }
        print(json.dumps(row), flush=True)


def summary(windows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per placement: spread of the windows between processes and within one process."""
    out = []
    for placement in PLACEMENTS:
        rows = [w for w in windows if w["placement"] == placement]
        if not rows:
            continue
        per_process: dict[int, list[float]] = {}
        for w in rows:
            per_process.setdefault(w["process"], []).append(w["samples_per_s"])
        means = [statistics.fmean(v) for v in per_process.values()]
        within = [statistics.stdev(v) / statistics.fmean(v) * 100 for v in per_process.values() if len(v) > 1]
        out.append(
            {
                "placement": placement,
                "processes": len(per_process),
                "windows": len(rows),
                "median_samples_per_s": statistics.median(w["samples_per_s"] for w in rows),
                "between_process_cv_pct": statistics.stdev(means) / statistics.fmean(means) * 100
                if len(means) > 1
                else None,
                "within_process_cv_pct": statistics.fmean(within) if within else None,
                "min_samples_per_s": min(w["samples_per_s"] for w in rows),
                "max_samples_per_s": max(w["samples_per_s"] for w in rows),
            }
        )
    return out


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    import pandas as pd

    from bench.fsio import atomic_write_text

    atomic_write_text(path, pd.DataFrame(rows).to_csv(index=False))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path)
    p.add_argument("--processes", type=int, default=12)
    p.add_argument("--windows", type=int, default=6, help="per process, cycling through the placements")
    p.add_argument("--steps", type=int, default=40, help="optimizer steps per window")
    p.add_argument("--warmup-steps", type=int, default=10)
    p.add_argument("--model", default="bert-large")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--precision", default="fp32", choices=["fp32", "fp16", "bf16"])
    p.add_argument("--tf32", action="store_true", default=True)
    p.add_argument("--no-tf32", dest="tf32", action="store_false")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--device", default="cuda", help="cuda, or cpu to test the script")
    p.add_argument("--python-rounds", type=int, default=3, help="rounds of the per-CPU pure-Python loop")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--cpu", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--cpu2", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        child(a)
        return 0
    if a.out is None:
        p.error("--out is required")
    a.out.mkdir(parents=True, exist_ok=True)
    from bench.api import environment
    from bench.fsio import atomic_write_json

    env = environment(a.device)  # GPU, driver, packages, commit, and the CPU-steadiness probe
    env["command"] = " ".join(["benchmarks/cpu_noise.py", *sys.argv[1:]])
    atomic_write_json(a.out / "env.json", env)
    cpus = sorted(os.sched_getaffinity(0))
    speed = python_speed(cpus, a.python_rounds)
    write_csv(a.out / "cpus.csv", speed)
    windows: list[dict[str, Any]] = []
    forwarded = [arg for arg in sys.argv[1:] if arg not in ("--out", str(a.out))]
    for n in range(a.processes):
        i = (n * 5 + 2) % len(cpus)  # spread over the CPUs, not in order
        cpu, cpu2 = cpus[i], cpus[(i + 1) % len(cpus)]
        cmd = [
            sys.executable,
            str(HERE / "cpu_noise.py"),
            *forwarded,
            "--child",
            "--cpu",
            str(cpu),
            "--cpu2",
            str(cpu2),
        ]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])}
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False, env=env)
        if done.returncode != 0:
            print(f"process {n} failed ({done.returncode}): {done.stderr[-2000:]}", file=sys.stderr)
            return 1
        for line in done.stdout.splitlines():
            if line.startswith("{"):
                windows.append({"process": n, "cpu": cpu, **json.loads(line)})
        write_csv(a.out / "windows.csv", windows)  # after each process: nothing measured is lost
        print(
            f"process {n} (cpu {cpu}): {[round(w['samples_per_s'], 1) for w in windows if w['process'] == n]}",
            file=sys.stderr,
        )
    table = summary(windows)
    write_csv(a.out / "summary.csv", table)
    import pandas as pd

    print(pd.DataFrame(table).to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    per_cpu = pd.DataFrame(speed).groupby("cpu")["loop_s"].median()
    print(f"pure-Python loop per CPU: median {per_cpu.median():.3f} s, ", end="")
    print(f"slowest {per_cpu.max():.3f} s (cpu {per_cpu.idxmax()}), fastest {per_cpu.min():.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
