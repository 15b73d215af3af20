"""`--cpu-affinity`: the CPUs the workers may run on, as Linux writes CPU lists ("0-3,8")."""

from __future__ import annotations

import os

from .errors import BadInput

ENV_VAR = "GPUBENCH_CPU_AFFINITY"  # parent -> worker (and fork server): "2,3,4,5"
MAX_CPUS = 65536  # far past any machine (Linux allows 8192): a larger number is a typo, not a CPU


def parse(text: str) -> tuple[int, ...]:
    """ "2-5,8" -> (2, 3, 4, 5, 8); anything else is bad input."""
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            first, dash, last = part.strip().partition("-")
            lo = int(first)
            hi = int(last) if dash else lo
            if lo < 0 or hi < lo or hi >= MAX_CPUS:
                raise ValueError(part)
            cpus.update(range(lo, hi + 1))
    except ValueError:
        raise BadInput(
            f"--cpu-affinity {text!r} is not a CPU list", hint="write it as Linux does, for example 2-5 or 0,2,4-7"
        ) from None
    return tuple(sorted(cpus))


def available() -> set[int] | None:
    """The CPUs this process may use; None where the OS cannot pin (not Linux)."""
    getter = getattr(os, "sched_getaffinity", None)
    return set(getter(0)) if getter is not None else None


def format_list(cpus: set[int] | tuple[int, ...] | list[int]) -> str:
    """(0, 1, 2, 3, 8) -> "0-3,8"."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)


def check(text: str) -> tuple[int, ...]:
    """The parsed list, if this machine can pin to it."""
    cpus = parse(text)
    usable = available()
    if usable is None:
        raise BadInput("--cpu-affinity needs Linux (os.sched_setaffinity)", hint="leave it out on this system")
    missing = [c for c in cpus if c not in usable]
    if missing:
        raise BadInput(
            f"--cpu-affinity {text}: CPU {format_list(missing)} is not available to this process",
            hint=f"choose from {format_list(usable)}",
        )
    return cpus


def pin_from_env() -> None:
    """In a worker or the fork server, before anything starts threads: keep to the run's CPUs."""
    wanted = os.environ.get(ENV_VAR)
    if wanted and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, [int(c) for c in wanted.split(",")])


def current() -> str | None:
    usable = available()
    return format_list(usable) if usable else None
