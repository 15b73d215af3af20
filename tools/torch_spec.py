"""Print the pip requirement for torch on this machine (used by `make install`).

TORCH_SPEC in the environment wins. On a machine without an NVIDIA GPU, a CPU build of torch that
lies on local disk (a pip find-links folder) is preferred to PyPI's multi-GB CUDA build. Otherwise
plain `torch` (PyPI's default build, with CUDA on Linux).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path


def has_nvidia_gpu() -> bool:
    return Path("/dev/nvidia0").exists() or shutil.which("nvidia-smi") is not None


def local_cpu_wheel() -> str | None:
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    folders = [p for p in os.environ.get("PIP_FIND_LINKS", "").split() if p] + ["/opt/wheels"]
    versions = []
    for folder in folders:
        for wheel in Path(folder).glob(f"torch-*+cpu-{tag}-*.whl") if Path(folder).is_dir() else []:
            match = re.match(r"torch-([0-9.]+)\+cpu-", wheel.name)
            if match:
                versions.append(tuple(int(x) for x in match.group(1).split(".")))
    if not versions:
        return None
    return ".".join(str(x) for x in max(versions))


def main() -> None:
    spec = os.environ.get("TORCH_SPEC")
    if not spec:
        version = None if has_nvidia_gpu() else local_cpu_wheel()
        spec = f"torch=={version}" if version else "torch"
    print(spec)


if __name__ == "__main__":
    main()
