"""What this machine's torch can do, asked in a child so the parent never creates a CUDA context."""

from __future__ import annotations

from typing import Any


def probe() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "devices": [],
    }
    if info["cuda_available"]:
        try:
            info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception as exc:  # a build without NCCL
            info["nccl"] = f"unavailable: {type(exc).__name__}"
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            info["devices"].append(
                {
                    "index": i,
                    "name": props.name,
                    "uuid": "GPU-" + str(props.uuid) if hasattr(props, "uuid") else None,
                    "pci_bus_id": getattr(props, "pci_bus_id", None),
                    "total_memory_mb": props.total_memory / 2**20,
                    "capability": f"{props.major}.{props.minor}",
                }
            )
    return info
