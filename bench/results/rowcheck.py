"""The checks every row of a results.csv passes when it is read (resultdir.read_results, behind
`run --resume`, `compare`, `report` and `history import`). A file that was cut off, edited or
damaged stops them with one BadInput naming the file and the line, instead of becoming a row that
is silently wrong: a NaN speed that a gate skips, a repeat that --resume runs twice.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..checks import MAX_REPEATS
from ..errors import BadInput
from .columns import (
    NAN_WORDS,
    NONFINITE_COLUMNS,
    NUMERIC_COLUMNS,
    NUMERIC_SETTINGS,
    SIGNED_COLUMNS,
    STATUSES,
)


def check_rows(path: Path, frame: pd.DataFrame, lines: list[int]) -> pd.DataFrame:
    """`frame` as read by pandas, `lines[i]` the line of the file on which row i starts. Returns
    the frame with its numeric columns as numbers; raises BadInput at the first bad row."""

    def stop(mask: pd.Series | np.ndarray, describe: Callable[[int], str], hint: str | None = None) -> None:
        hits = np.flatnonzero(np.asarray(mask, dtype=bool))
        if len(hits):
            i = int(hits[0])
            raise BadInput(f"{path}: line {lines[i]}: {describe(i)}", hint=hint)

    names = frame["scenario"]
    stop(names.isna() | (names.astype(str).str.strip() == ""), lambda i: "no scenario name")
    raw_repeat = frame["repeat"]
    repeat = pd.to_numeric(raw_repeat, errors="coerce").astype("float64")
    whole = repeat.notna() & np.isfinite(repeat) & (repeat % 1 == 0) & (repeat >= 0) & (repeat <= MAX_REPEATS)
    stop(~whole, lambda i: f"repeat = {_shown(raw_repeat.iloc[i])} is not a whole number from 0 to {MAX_REPEATS}")
    frame["repeat"] = repeat.astype("int64")
    status = frame["status"]
    stop(status.isna(), lambda i: "no status")
    stop(
        ~status.isin(STATUSES),
        lambda i: f"unknown status {_shown(status.iloc[i])}",
        hint=f"known: {', '.join(STATUSES)}",
    )
    for column in [c for c in (*NUMERIC_SETTINGS, *NUMERIC_COLUMNS) if c in frame.columns]:
        frame[column] = _number_column(frame[column], stop, column)
    ok = (status == "ok").to_numpy()
    speed = frame["samples_per_s"]
    stop(ok & ~(speed > 0), lambda i: f"an ok row needs a samples_per_s above 0, not {_shown(speed.iloc[i])}")
    duplicate = frame.duplicated(subset=["scenario", "repeat"], keep="first")

    def first_of(i: int) -> str:
        key = (frame["scenario"].iloc[i], frame["repeat"].iloc[i])
        j = next(k for k in range(i) if (frame["scenario"].iloc[k], frame["repeat"].iloc[k]) == key)
        return f"duplicate rows for scenario '{key[0]}' repeat {key[1]} (the first is on line {lines[j]})"

    stop(duplicate, first_of)
    return frame


def usable(row: dict[str, Any]) -> dict[str, Any]:
    """A row as a run saves it, so that its own results.csv always reads back: a figure the reader
    would refuse (infinite; below zero where a figure cannot be) is left empty, and an `ok` row
    without a speed above zero becomes an `error` that says why."""
    out = dict(row)
    dropped = []
    for column in NUMERIC_COLUMNS:
        value = out.get(column)
        if isinstance(value, int | float) and not isinstance(value, bool):
            infinite = math.isinf(value) and column not in NONFINITE_COLUMNS
            if infinite or (value < 0 and column not in SIGNED_COLUMNS):
                dropped.append(f"{column} = {value!r}")
                out[column] = None
    speed = out.get("samples_per_s")
    if out.get("status") == "ok" and not (isinstance(speed, int | float) and speed > 0):
        out["status"] = "error"
        out["error"] = f"the worker reported no usable samples_per_s ({', '.join(dropped) or repr(speed)})"
    return out


def _number_column(raw: pd.Series, stop: Callable[..., None], column: str) -> pd.Series:
    """A column of numbers: an empty or spelled-out missing cell is NaN; text, infinity (except a
    diverged loss) and, where a figure cannot be negative, a negative number stop the read. A column
    pandas already read as numbers holds no text, so only the others' unconverted cells are looked at
    (the text checks were most of a read's time: 0.17 s of a 13-row file's 0.23 s)."""
    if raw.dtype.kind in "iuf":
        converted = raw
    else:
        converted = pd.to_numeric(raw, errors="coerce")
        suspect = raw.notna().to_numpy() & converted.isna().to_numpy()
        if suspect.any():
            spelled_nan = np.zeros(len(raw), dtype=bool)
            spelled_nan[suspect] = raw[suspect].astype(str).str.strip().str.lower().isin(NAN_WORDS).to_numpy()
            stop(
                suspect & ~spelled_nan,
                lambda i: f"column '{column}' holds a non-numeric value {_shown(raw.iloc[i])}",
            )
    values = converted.to_numpy(dtype="float64", na_value=np.nan)
    if column not in NONFINITE_COLUMNS:
        stop(np.isinf(values), lambda i: f"column '{column}' holds {_shown(raw.iloc[i])}, not a finite number")
    if column not in SIGNED_COLUMNS:
        stop(values < 0, lambda i: f"column '{column}' holds a negative value {_shown(raw.iloc[i])}")
    return converted


def _shown(value: object) -> str:
    """A cell as the message shows it: 'fast', 1.5, inf, nan (not np.float64(1.5))."""
    item = getattr(value, "item", None)
    return repr(item() if callable(item) else value)
