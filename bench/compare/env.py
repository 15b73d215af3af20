"""The two runs' environments (env.json): is the comparison meaningful, and what differs?"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import IncomparableRuns
from ..measure import cpuspeed
from ..results import ENV_JSON, RESULTS_CSV
from ..results.identity import gpu_card, gpu_model

# shown when they differ, never failing: the machine (another card of the same model, another host:
# four H100s of one kind ran fabric-vit's `plain` at 381-573 samples/s), then the software;
# packages.* are added from both files
MACHINE_KEYS = ("host", "gpu.uuid")
SOFTWARE_KEYS = ("gpubench", "gpu.driver", "cuda_runtime", "python", "cpu", "matrix")


@dataclass(frozen=True)
class EnvDifference:
    key: str
    base: str
    new: str


@dataclass(frozen=True)
class EnvCheck:
    base_gpu: str  # a GPU name, "CPU", or "unknown"
    new_gpu: str
    differences: tuple[EnvDifference, ...]
    notes: tuple[str, ...]


def check_envs(
    base: dict[str, Any] | None,
    new: dict[str, Any] | None,
    *,
    allow_mismatch: bool = False,
    labels: tuple[str, str] = ("base", "new"),
) -> EnvCheck:
    """Raise IncomparableRuns when the GPU models differ (GPU vs CPU included), unless allowed."""
    base_gpu, new_gpu = gpu_model(base), gpu_model(new)
    notes = [
        f"{label}: no {ENV_JSON} beside {RESULTS_CSV}; GPU unknown, not checked"
        for label, env in zip(labels, (base, new), strict=True)
        if env is None
    ]
    differences = env_differences(base, new)
    if base_gpu and new_gpu and base_gpu != new_gpu:
        if not allow_mismatch:
            raise IncomparableRuns(
                f"the runs come from different devices: {labels[0]} on {base_gpu}, {labels[1]} on {new_gpu}",
                hint="compare runs from the same GPU model, or pass --allow-env-mismatch",
            )
        notes.append(f"different devices ({base_gpu} vs {new_gpu}); compared anyway")
        differences = (EnvDifference("gpu.name", base_gpu, new_gpu), *differences)
    for label, env in zip(labels, (base, new), strict=True):
        speed = env.get("cpu_speed") if env is not None else None
        if isinstance(speed, dict) and cpuspeed.warning(speed):
            ratio = float(speed["p90_over_p10"])
            notes.append(
                f"{label}: the CPU's speed was unsteady ({ratio:.2f}x, env.json cpu_speed); "
                "changes in small-batch (launch-bound) rows may be that machine's noise"
            )
    if base is not None and new is not None:
        host = host_speed_note(base.get("cpu_speed"), new.get("cpu_speed"), labels)
        if host:
            notes.append(host)
    return EnvCheck(base_gpu or "unknown", new_gpu or "unknown", differences, tuple(notes))


def host_speed_note(base_speed: Any, new_speed: Any, labels: tuple[str, str] = ("base", "new")) -> str | None:
    """A note when the two runs' CPU probes (taken before any worker) differ by cpuspeed.SHIFT_PCT or
    more: another machine, or a busier one. Launch-bound rows follow the CPU (on two H200 hosts of
    one kind, 18.2 against 9.3 ms a pass came with fp16 at batch 4 at 41 against 81 samples/s)."""
    base_ms, new_ms = cpuspeed.median_ms(base_speed), cpuspeed.median_ms(new_speed)
    change = cpuspeed.shift_pct(base_ms, new_ms)
    if change is None or base_ms is None or new_ms is None:
        return None
    return (
        f"{labels[1]}'s host ran the CPU probe {'slower' if change > 0 else 'faster'} than {labels[0]}'s: "
        f"{new_ms:.1f} vs {base_ms:.1f} ms a pass ({change:+.0f}%, env.json cpu_speed), another machine or a "
        "busier one; launch-bound (small-batch) rows follow the CPU, so their changes may be the host's"
    )


def env_differences(base: dict[str, Any] | None, new: dict[str, Any] | None) -> tuple[EnvDifference, ...]:
    """Machine and software differences, in a stable order."""
    if base is None or new is None:
        return ()
    packages = [*_as_dict(base.get("packages")), *_as_dict(new.get("packages"))]
    keys = [*MACHINE_KEYS, *SOFTWARE_KEYS, *dict.fromkeys(f"packages.{p}" for p in packages)]
    out = []
    for key in keys:
        a, b = (gpu_card(base), gpu_card(new)) if key == "gpu.uuid" else (_lookup(base, key), _lookup(new, key))
        if a != b:
            out.append(EnvDifference(key, _text(a), _text(b)))
    return tuple(out)


def _lookup(env: dict[str, Any], dotted: str) -> Any:
    value: Any = env
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return "-" if value is None else str(value)
