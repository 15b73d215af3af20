"""How many repeats a side a comparison needs to catch a given slow-down, per scenario, from the
spread of the repeats already run on this machine (`gpubench compare --detect PCT DIR [DIR]`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from ..stats import MIN_REPEATS
from .comparison import SPEED_METRIC, Thresholds
from .gate import MAX_PLAN_REPEATS, POWER, detectable_pct, pooled_spread, repeats_needed

PLAN_COLUMNS = ["scenario", "repeats", "spread_pct", "detectable_pct", "repeats_needed"]


@dataclass(frozen=True)
class Plan:
    rows: pd.DataFrame  # PLAN_COLUMNS, one row per scenario
    target_pct: float
    thresholds: Thresholds
    family: int  # scenarios with a spread: judged together
    labels: tuple[str, ...]

    @property
    def note(self) -> str:
        """What the figures mean, in one line."""
        if self.family == 0:
            return (
                f"no scenario in {', '.join(self.labels)} has 2 or more ok repeats: a spread, and so the repeats "
                f"needed to catch {self.target_pct:g}%, needs at least 2 (run with --repeats 3 or more)"
            )
        return (
            f"repeats a side for a slow-down of {self.target_pct:g}% in samples/s to be caught {POWER:.0%} of the "
            f"time, {self.family} scenarios judged together (Holm; alpha {self.thresholds.alpha:g} for the "
            f"comparison), at the spread of the ok repeats in {', '.join(self.labels)}; a change must also "
            f"exceed the threshold ({self.thresholds.speed_pct:g}%); offsets between whole runs are not in this spread"
        )


def plan(frames: Sequence[pd.DataFrame], target_pct: float, thresholds: Thresholds, labels: Sequence[str]) -> Plan:
    """Per scenario of the frames: its repeats (the fewest ok in a set), its spread pooled over the
    sets, what a comparison at those repeats could detect, and the repeats needed for target_pct."""
    rule = thresholds.rule(SPEED_METRIC)
    sets: dict[str, list[list[float]]] = {}
    for frame in frames:
        ok = frame[frame["status"] == "ok"]
        for name, group in ok.groupby("scenario", sort=False):
            values = pd.to_numeric(group[SPEED_METRIC], errors="coerce").dropna()
            sets.setdefault(str(name), []).append([float(v) for v in values])
    spreads = {name: pooled_spread(values)[0] for name, values in sets.items()}
    family = sum(not math.isnan(s) for s in spreads.values())
    rows = []
    for name, values in sets.items():
        spread, n = spreads[name], min(len(v) for v in values)
        df = 2 * (n - 1)
        now = math.nan
        if not math.isnan(spread) and n >= MIN_REPEATS:
            now = detectable_pct(spread, df, spread * math.sqrt(2 / n), family, rule)
        needed = repeats_needed(spread, target_pct, family, rule)
        rows.append(
            {
                "scenario": name,
                "repeats": n,
                "spread_pct": 100 * spread,
                "detectable_pct": now,
                "repeats_needed": needed,  # None: no spread, or more than MAX_PLAN_REPEATS
            }
        )
    frame = pd.DataFrame(rows, columns=PLAN_COLUMNS)
    frame["repeats_needed"] = frame["repeats_needed"].astype("Int64")  # whole numbers, <NA> for none
    return Plan(frame, target_pct, thresholds, family, tuple(labels))


def needed_text(row: dict) -> str:
    """A row's repeats_needed as shown: a count, "more than 50", or "-" without a spread."""
    needed, spread = row["repeats_needed"], row["spread_pct"]
    if not pd.isna(needed):
        return str(int(needed))
    return "-" if math.isnan(spread) else f"more than {MAX_PLAN_REPEATS}"
