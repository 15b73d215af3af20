"""Bad results files shared by the library and CLI tests of `gpubench compare`."""

from __future__ import annotations

from typing import Any

import pytest

HEADER = "scenario,repeat,status,samples_per_s,peak_mem_mb,error\n"
MISSING_COLUMNS = "missing columns: scenario, repeat, status, samples_per_s, peak_mem_mb"

# (file text, the problem the one-line error names)
BAD_RESULT_FILES = [
    pytest.param("", "the file is empty", id="empty"),
    pytest.param("a,b\n1,2\n", f"not a gpubench results file ({MISSING_COLUMNS})", id="not-gpubench"),
    pytest.param(
        HEADER + "baseline,1,ok,100,1000,\nbaseline,2,ok,fast,1000,\n",
        "line 3: column 'samples_per_s' holds a non-numeric value 'fast'",
        id="non-numeric",
    ),
    pytest.param(
        HEADER + "baseline,1,ok,100,1000,\nbaseline,1,ok,101,1000,\n",
        "line 3: duplicate rows for scenario 'baseline' repeat 1 (the first is on line 2)",
        id="duplicate",
    ),
    pytest.param(HEADER, "holds a header but no result rows", id="header-only"),
]


def env(gpu: str | None = "NVIDIA H200", **packages: str) -> dict[str, Any]:
    """An env.json as the core writes it; gpu=None is a CPU run."""
    return {
        "gpubench": "0.1.0",
        "created_at": "2025-06-01T02:00:00+00:00",
        "command": "gpubench run --matrix full --repeats 3",
        "host": "gpu-node-1",
        "device": "cuda:0" if gpu else "cpu",
        "gpu": {
            "name": gpu,
            "uuid": "GPU-1",
            "driver": "580.65",
            "memory_total_mb": 143771,
            "capability": "9.0",
        }
        if gpu
        else None,
        "cuda_runtime": "13.0" if gpu else None,
        "packages": {
            "torch": "2.9.0",
            "transformers": "4.57.0",
            "accelerate": "1.10.0",
            "bitsandbytes": "0.48.0",
            "datasets": "4.0.0",
            "nvidia-ml-py": "13.580",
            **packages,
        },
        "cpu": "Intel Xeon Platinum 8480+",
        "matrix": "full",
    }
