"""What a run's figures are worth before anyone reads them: CPU figures test the harness, and an
unsteady CPU makes small-batch figures noisy. One home for these sentences: `gpubench run` prints
them at its end, the report and `gpubench compare` put them at the top."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..measure import cpuspeed

CPU_NOTE = (
    "these figures come from the CPU: a smoke test of the harness, not findings about any hardware "
    "or technique; run on a GPU to measure the techniques"
)


def cpu_run(env: dict[str, Any] | None, frame: pd.DataFrame | None = None) -> bool:
    """True for a run on the CPU: env.json's device, else (no env.json) every row's device."""
    device = (env or {}).get("device")
    if isinstance(device, str) and device:
        return device.startswith("cpu")
    if frame is None or "device" not in frame:
        return False
    devices = [str(d) for d in frame["device"] if isinstance(d, str) and d]
    return bool(devices) and all(d.startswith("cpu") for d in devices)


def caveats(env: dict[str, Any] | None, frame: pd.DataFrame | None = None) -> list[str]:
    """The sentences to put first: CPU_NOTE on a CPU run; cpuspeed's warning when the CPU was unsteady."""
    unsteady = cpuspeed.warning((env or {}).get("cpu_speed"))
    return [note for note in (CPU_NOTE if cpu_run(env, frame) else None, unsteady) if note]
