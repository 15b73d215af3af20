"""Host out-of-memory kills, read from the cgroup's memory.events (cgroup v2), where available."""

from __future__ import annotations

from pathlib import Path


def _events_file() -> Path | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            path = Path("/sys/fs/cgroup") / line[3:].lstrip("/") / "memory.events"
            return path if path.is_file() else None
    return None


def oom_kills() -> int | None:
    """The cgroup's count of OOM-killer kills so far, or None where it cannot be read."""
    path = _events_file()
    if path is None:
        return None
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        return None
    return None
