"""Was each scenario measured the same way on both sides? Its settings, its number of GPUs and the
source of its peak memory, scenario by scenario.

A scenario's settings are those that make a history series (bench/history/ingest.py's
`series_settings`: every setting column but the description, the timeout and the device, with the
model as resolved), so `compare` and `history` agree on what "the same scenario" is. A setting
added after older result sets were written (LATE_SETTINGS there) that is missing on one side
counts as its default; any other setting missing on one side cannot be checked and is passed over.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

GPU_COUNT_KEYS = ("gpus", "world_size", "nnodes")  # a change here is a change of machine
MEMORY_SOURCE = "peak_mem_source"
SHOWN = 4  # differences named in the one-line error; the rest are counted


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
    """Every difference in settings, GPU count or memory source of the scenarios on both sides."""
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
    from ..history.ingest import LATE_SETTINGS, plain, series_settings  # noqa: PLC0415 (a cycle at import time)

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


def refusal(differences: tuple[SettingDifference, ...]) -> str:
    """The one-line error for differences that stop the comparison."""
    gpus = [d for d in differences if d.gpu_count]
    what = "the runs used different numbers of GPUs" if gpus else "scenarios were measured differently"
    shown = [f"{d.scenario}: {d.text()}" for d in (gpus or list(differences))[:SHOWN]]
    more = len(differences) - len(shown)
    return f"{what} ({'; '.join(shown)}{f'; and {more} more' if more > 0 else ''})"


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
