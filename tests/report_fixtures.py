"""Result sets for the report tests, written with bench.results.write_results plus an env.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness import write_run as write_set  # noqa: F401  (the report tests' name)

H200_ENV: dict[str, Any] = {
    "gpubench": "0.1.0",
    "created_at": "2026-11-29T10:00:00+00:00",
    "command": "gpubench run --matrix full --repeats 3",
    "host": "gpu-node-1",
    "platform": "Linux-6.8-x86_64",
    "python": "3.12.3",
    "cpu": "Intel Xeon Platinum 8480+",
    "cpu_count": 16,
    "device": "cuda:0",
    "gpu": {
        "name": "NVIDIA H200",
        "uuid": "GPU-1",
        "driver": "580.159.04",
        "memory_total_mb": 143771.0,
        "capability": "9.0",
    },
    "cuda_runtime": "13.0",
    "torch_build": "2.11.0+cu130",
    "packages": {
        "torch": "2.11.0",
        "transformers": "5.17.0",
        "accelerate": "1.15.0",
        "bitsandbytes": "0.50.2",
        "datasets": "5.2.0",
    },
    "git": {"commit": "0123456789abcdef", "branch": "main"},
    "matrix": "full",
    "gpu_processes_at_start": [],
}
CPU_ENV: dict[str, Any] = {
    **H200_ENV,
    "command": "gpubench run --matrix quick",
    "device": "cpu",
    "gpu": None,
    "cuda_runtime": None,
    "torch_build": "2.13.0+cpu",
    "cpu": "AMD EPYC",
    "cpu_count": 2,
    "matrix": "quick",
}
OOM_ERROR = "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 139.8 GiB total)"
SKIP_REASON = "tf32 is a CUDA matmul mode (Ampere or newer); it has no meaning on the CPU"
CRASH_ERROR = "worker exited with signal 11 (SIGSEGV)"


def gpu_row(scenario: str, repeat: int, sps: float, mem: float, **extra: Any) -> dict[str, Any]:
    """An ok row with NVML and torch memory figures (reserved = NVML - 700, allocated - 1000)."""
    return {
        "scenario": scenario,
        "repeat": repeat,
        "status": "ok",
        "description": f"{scenario} run",
        "samples_per_s": sps,
        "peak_mem_mb": mem,
        "peak_mem_source": "nvml-process",
        "nvml_process_peak_mb": mem,
        "torch_max_reserved_mb": mem - 700,
        "torch_max_allocated_mb": mem - 1000,
        "mfu": sps / 100,
        "final_loss": 0.01,
        "device": "cuda:0",
        **extra,
    }


def failed_row(scenario: str, repeat: int, status: str, error: str, tail: str = "") -> dict[str, Any]:
    return {
        "scenario": scenario,
        "repeat": repeat,
        "status": status,
        "error": error,
        "description": f"{scenario} run",
        "stderr_tail": tail,
    }


def gpu_rows() -> list[dict[str, Any]]:
    """Three repeats. fp16: faster and leaner; compile: faster, heavier; adafactor: slower,
    leaner; slowheavy: slower and heavier (beaten); big-batch: oom; tf32: skipped; flaky: one
    crashed repeat of three."""
    speeds = {
        "baseline": ([33.0, 34.0, 35.0], 8500.0),
        "fp16": ([52.0, 53.0, 52.5], 7600.0),
        "compile": ([70.0, 71.0, 69.0], 12000.0),
        "adafactor": ([19.0, 20.0, 19.5], 6200.0),
        "slowheavy": ([20.0, 21.0, 20.5], 9000.0),
        "flaky": ([30.0, 31.0], 8400.0),
    }
    rows: list[dict[str, Any]] = []
    for repeat in range(3):
        for name, (values, mem) in speeds.items():
            if name == "flaky" and repeat == 2:
                rows.append(
                    failed_row(
                        name, repeat, "crashed", CRASH_ERROR, "Fatal Python error: Segmentation fault\n<frame> at 0x0"
                    )
                )
                continue
            rows.append(gpu_row(name, repeat, values[repeat], mem + repeat))
        rows.append(
            failed_row(
                "big-batch",
                repeat,
                "oom",
                OOM_ERROR,
                "Traceback (most recent call last):\ntorch.OutOfMemoryError: " + OOM_ERROR,
            )
        )
        rows.append(failed_row("tf32", repeat, "skipped", SKIP_REASON))
    return rows


def cpu_rows() -> list[dict[str, Any]]:
    """One repeat, CPU: only peak RSS as memory, no MFU; one skipped scenario."""

    def row(name: str, sps: float, rss: float) -> dict[str, Any]:
        return {
            "scenario": name,
            "repeat": 0,
            "status": "ok",
            "samples_per_s": sps,
            "peak_mem_mb": rss,
            "peak_mem_source": "rss",
            "rss_peak_mb": rss,
            "device": "cpu",
            "description": f"{name} on the CPU",
            "final_loss": 0.5,
        }

    return [
        row("baseline", 76.1, 576.5),
        row("grad-accum", 56.5, 575.4),
        row("adafactor", 109.2, 602.0),
        row("accelerate", 114.3, 478.3),
        failed_row("tf32", 0, "skipped", SKIP_REASON),
    ]


def gpu_set(tmp: Path) -> Path:
    return write_set(tmp / "h200", gpu_rows(), H200_ENV)


def cpu_set(tmp: Path) -> Path:
    return write_set(tmp / "cpu", cpu_rows(), CPU_ENV)


def scaling_sets(tmp: Path) -> tuple[Path, Path]:
    """Two result directories of one workload made apart: `one-gpu` (the plain single-GPU run and
    fsdp in one process) and `two-gpus` (ddp and fsdp on 2 GPUs); both hold a scenario named fsdp."""
    plain = {"strategy": "none", "gpus": 1, "batch_size": 8}

    def parallel(strategy: str, world: int) -> dict[str, Any]:
        return {"strategy": strategy, "gpus": world, "world_size": world, "batch_size": 8}

    one = [gpu_row("single", r, 100.0 + r, 9000.0, **plain) for r in range(3)]
    one += [gpu_row("fsdp", r, 80.0 + r, 7000.0, **parallel("fsdp", 1)) for r in range(3)]
    two = [gpu_row("ddp", r, 190.0 + r, 9100.0, **parallel("ddp", 2)) for r in range(3)]
    two += [gpu_row("fsdp", r, 140.0 + r, 5000.0, **parallel("fsdp", 2)) for r in range(3)]
    return write_set(tmp / "one-gpu", one, H200_ENV), write_set(tmp / "two-gpus", two, H200_ENV)
