"""What makes two results rows the same scenario: one answer for `compare` and `history`.

A scenario is its name, its settings (every setting column but the description, the timeout and
the device, with the model as resolved) and the GPU model it ran on. `history` keys a series by
the sha256 of these (`series_key`); `compare` refuses a scenario whose settings differ between
its two sides (`setting_differences`), where it also checks the number of processes and the
source of the peak memory. The software versions under test are not part of it, so an upgrade
shows as a step in the same series, or as a change in a comparison.

A run's content (`content_sha256`) is its rows as the results reader reads them, not the bytes of
its results.csv: the same rows re-saved with other float formatting, quoting, column order or line
endings are the same run to `history import`.

A setting added after older result sets were written (LATE_SETTINGS) counts as its default where
it is missing, and enters a series key only when set to something else, so a series recorded
before the setting existed keeps its key. Pure data: no pandas import here (frames are only read).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .columns import SETTING_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

# settings that do not change what is measured stay out of the series key
# (profiling runs after the timed window: bench/worker/profiling.py)
NOT_IN_KEY = (
    "description",
    "timeout_s",
    "device",
    "model",
    "model_resolved",
    "profile_steps",
    "profile_memory",
    "loss_every_steps",  # how often the loss curve takes a point: after the fact, not what is timed
    "eval_samples",  # held-out scoring runs after the training (bench/worker/evaluate.py)
)
KEY_SETTINGS = tuple(c for c in SETTING_COLUMNS if c not in NOT_IN_KEY)
# settings added after results were first recorded, with their defaults
LATE_SETTINGS: dict[str, Any] = {
    "compile_scope": "model",
    "gpus": 1,
    "strategy": "none",
    "zero_stage": 0,
    "fsdp_sharding": "full",
    "offload": "none",
    "nnodes": 1,
    "node_rank": 0,
    "window": "epoch",
    "task": "auto",
    "experts_implementation": "default",
    "command": "",
    "memory_cap_mb": None,
    "tp": 1,
    "cp": 1,
    "dp_replicate": 1,
    "dp_shard": "auto",
    "data": "random",
    "tokenizer": "",
    "data_column": "text",
    "learning_rate": None,
    "lr_schedule": "linear",
    "lr_warmup_steps": 0,
    "checkpoint_every": 0,
}
GPU_COUNT_KEYS = ("gpus", "world_size", "nnodes")  # a change here is a change of machine
MEMORY_SOURCE = "peak_mem_source"


def gpu_model(env: dict[str, Any] | None) -> str | None:
    """The GPU name from env.json, "CPU" for a run without a GPU, None when unknown."""
    if env is None:
        return None
    gpu = env.get("gpu")
    if isinstance(gpu, dict) and gpu.get("name"):
        return str(gpu["name"])
    device = env.get("device")
    if ("gpu" in env and gpu is None) or (isinstance(device, str) and device.startswith("cpu")):
        return "CPU"
    return None


def gpu_card(env: dict[str, Any] | None) -> str | None:
    """Which card of its model a run had: env.json's gpu.uuid to its first 12 characters
    ("GPU-0860ed39"), None without one."""
    gpu = env.get("gpu") if env else None
    uuid = gpu.get("uuid") if isinstance(gpu, dict) else None
    return str(uuid)[:12] if uuid else None


def series_settings(scenario: str, row: dict[str, Any], gpu: str) -> dict[str, Any]:
    """What a series key is made of: the scenario, its settings, the GPU model and the model."""
    settings = {key: plain(row.get(key)) for key in KEY_SETTINGS}
    for key, default in LATE_SETTINGS.items():
        if settings.get(key) in (None, default):
            settings.pop(key, None)
    model = plain(row.get("model_resolved")) or plain(row.get("model"))
    return {"scenario": scenario, "gpu_model": gpu, "model": model, **settings}


def series_key(settings: dict[str, Any]) -> str:
    """The first 16 hex digits of the sha256 of series_settings' JSON."""
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def content_sha256(rows: Iterable[Mapping[str, Any]]) -> str:
    """The sha256 of a results table's content: each row (a frame's records, or rows stored as
    JSON) as JSON with its keys sorted, its values as `plain` makes them (a float by its repr,
    4.0 as 4) and its empty cells left out (a column the file lacks reads as empty), the rows
    sorted. Any changed value changes it; how the file spelled the values does not."""
    texts = sorted(
        json.dumps(
            {k: v for k, v in ((k, plain(v)) for k, v in row.items()) if v is not None}, sort_keys=True, default=str
        )
        for row in rows
    )
    return hashlib.sha256("\n".join(texts).encode()).hexdigest()


def plain(value: Any) -> Any:
    """A value from a CSV cell as plain JSON data: no NaN, no numpy types, 4.0 -> 4."""
    if value is None:
        return None
    if hasattr(value, "item") and not isinstance(value, str):  # numpy scalars
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return int(value) if value.is_integer() and abs(value) < 2**53 else value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return value


# -- two sides of a comparison -------------------------------------------------------------------
@dataclass(frozen=True)
class SettingDifference:
    scenario: str
    key: str
    base: str
    new: str

    @property
    def gpu_count(self) -> bool:
        return self.key in GPU_COUNT_KEYS

    def text(self) -> str:
        return f"{self.key} {self.base} -> {self.new}"


def setting_differences(base: pd.DataFrame, new: pd.DataFrame) -> tuple[SettingDifference, ...]:
    """Every difference in settings, GPU count or memory source of the scenarios on both sides.
    A setting missing on one side cannot be checked and is passed over (a late one counts as its
    default)."""
    base_groups = dict(tuple(base.groupby("scenario", sort=False)))
    new_groups = dict(tuple(new.groupby("scenario", sort=False)))
    out: list[SettingDifference] = []
    for name, base_group in base_groups.items():
        new_group = new_groups.get(name)
        if new_group is not None:
            a, b = scenario_settings(str(name), base_group), scenario_settings(str(name), new_group)
            out.extend(
                SettingDifference(str(name), key, _text(a[key]), _text(b[key]))
                for key in [*a, *(k for k in b if k not in a)]
                if key in a and key in b and not _same(a[key], b[key])
            )
    return tuple(out)


def scenario_settings(name: str, group: pd.DataFrame) -> dict[str, Any]:
    """What must match: the series settings (late ones at their defaults), the number of processes
    and the memory source; a key whose value is unknown is absent."""
    ok = group[group["status"] == "ok"]
    first = (ok if len(ok) else group).iloc[0].to_dict()
    settings = series_settings(name, first, gpu="")
    values = {k: v for k, v in settings.items() if k not in ("scenario", "gpu_model") and not _unknown(v)}
    values.update({k: d for k, d in LATE_SETTINGS.items() if k not in values})
    for key in ("world_size", MEMORY_SOURCE):
        value = plain(ok[key].dropna().iloc[0]) if key in ok and ok[key].notna().any() else None
        if not _unknown(value):
            values[key] = value
    return values


def _unknown(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value == ""


def _same(a: Any, b: Any) -> bool:
    """Equal as numbers when both read as numbers (1, 1.0, "1"), else equal as text."""
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


def _text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
