"""The one reader and writer of a result directory:

  results.csv     one row per scenario x repeat (bench/results/columns.py), rewritten atomically
  env.json        the machine, software and command (bench/run/envinfo.py); a resumed run appends
  scenarios.json  the fully resolved scenarios, repeats, device and model: what --resume replays

Everything that reads a result directory (run --resume, compare, report, history, memory
calibration, validation) comes through here, so a bad file is one BadInput naming the file.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import BadInput
from ..fmt import csv_escape, csv_unescape
from ..fsio import atomic_write_json, atomic_write_text, read_json
from ..recipe.scenario import Scenario
from .columns import COLUMNS, REQUIRED_COLUMNS, RESULTS_FORMAT, SETTING_COLUMNS, check_row
from .rowcheck import check_rows

# Scenario fields with a default other than None: a blank cell or a missing column is that default.
SETTING_DEFAULTS = {
    f.name: f.default
    for f in dataclasses.fields(Scenario)
    if f.name in SETTING_COLUMNS and f.default is not None and f.default is not dataclasses.MISSING
}
SETTING_DEFAULTS["command"] = ""  # a built-in scenario's cell; a command's is its JSON argument list

RESULTS_CSV, ENV_JSON, SCENARIOS_JSON = "results.csv", "env.json", "scenarios.json"


def to_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows as a DataFrame of exactly COLUMNS; a row with an unknown key is an error (check_row)."""
    for row in rows:
        check_row(row)
    return pd.DataFrame([{c: row.get(c) for c in COLUMNS} for row in rows], columns=COLUMNS)


def write_results(path: Path, rows: list[dict[str, Any]]) -> None:
    """Rows as results.csv, written atomically. A text cell that a spreadsheet would run as a
    formula gets a leading ' (fmt.csv_escape), which read_results takes off again; a carriage
    return in a text cell (a progress bar in a log tail) is written as a line feed, since the CSV
    writer would leave it unquoted and every reader would take it for the end of the row."""
    buffer = io.StringIO()
    to_frame(rows).map(lambda v: csv_escape(_line_feeds(v))).to_csv(buffer, index=False)
    atomic_write_text(path, buffer.getvalue())


def _line_feeds(value: Any) -> Any:
    return value.replace("\r\n", "\n").replace("\r", "\n") if isinstance(value, str) else value


def read_results(path: Path) -> pd.DataFrame:
    """Read a results.csv (or a result directory). A file that is not one, or a row that is cut
    off or holds what no run writes (rowcheck.py), is a BadInput naming the file and the line."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_CSV
    if not path.is_file():
        raise BadInput(f"{path}: no such results file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise BadInput(f"{path}: line {line}: not UTF-8 text; not a gpubench results file") from None
    lines = _record_lines(path, text)
    try:
        # Only an empty cell is missing: a scenario may be called "NA", "nan" or "1".
        frame = pd.read_csv(
            io.StringIO(text), keep_default_na=False, na_values=[""], dtype={"scenario": str, "cpu_affinity": str}
        )
    except pd.errors.EmptyDataError:
        raise BadInput(f"{path}: the file is empty") from None
    except (pd.errors.ParserError, ValueError) as exc:
        raise BadInput(f"{path}: not a readable CSV: {str(exc).splitlines()[0]}") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise BadInput(f"{path}: not a gpubench results file (missing columns: {', '.join(missing)})")
    if len(frame) != len(lines):
        raise BadInput(f"{path}: not a readable CSV ({len(lines)} rows, but pandas reads {len(frame)})")
    for column in frame.columns:
        if pd.api.types.is_object_dtype(frame[column]) or pd.api.types.is_string_dtype(frame[column]):
            frame[column] = frame[column].map(csv_unescape)
    return with_setting_defaults(check_rows(path, frame, lines))


def with_setting_defaults(frame: pd.DataFrame) -> pd.DataFrame:
    """Settings a built-in scenario's row was written without (an older gpubench, before the field
    existed) read as the field's default, which is what that run did: otherwise a row from before and a row from after
    the field was added would count as different settings (compare's guard, scaling references)."""
    absent = {key: [default] * len(frame) for key, default in SETTING_DEFAULTS.items() if key not in frame.columns}
    # every other column a minimal or hand-written file leaves out reads as empty, so each reader
    # (compare, report, history) sees the whole schema (docs/columns.md: the minimal columns)
    absent.update({c: [None] * len(frame) for c in COLUMNS if c not in frame.columns and c not in absent})
    if absent:
        frame = pd.concat([frame, pd.DataFrame(absent, index=frame.index)], axis=1)
    # a command row's blank is a setting its script did not have or report (bench/run/command.py):
    # it stays blank, never gpubench's default
    builtin = ~frame["command"].map(lambda v: isinstance(v, str) and bool(v))
    for key, default in SETTING_DEFAULTS.items():
        if frame[key].isna().any():
            # a blank made pandas read the column as floats: these settings are whole numbers,
            # strings or booleans (none is a float), so 64.0 is read back as 64
            filled = frame[key].astype(object).where(frame[key].notna() | ~builtin, default)
            frame[key] = filled.map(lambda v: int(v) if isinstance(v, float) and v.is_integer() else v)
    return frame


def _record_lines(path: Path, text: str) -> list[int]:
    """The line on which each data row starts (quoted cells may span lines); a row with fewer or
    more cells than the header, as a file cut off mid-row has, is a BadInput naming its line."""
    reader = csv.reader(io.StringIO(text), strict=True)
    starts, header, consumed = [], None, 0
    try:
        for record in reader:
            start, consumed = consumed + 1, reader.line_num
            if not record:  # a blank line
                continue
            if header is None:
                header = record
                doubled = sorted({c for c in header if header.count(c) > 1})
                if doubled:
                    raise BadInput(
                        f"{path}: line {start}: the header names {', '.join(map(repr, doubled))} more than once",
                        hint="keep one column of each name: which copy is right cannot be told",
                    )
                continue
            if len(record) != len(header):
                what = "is cut off" if len(record) < len(header) else "has too many cells"
                raise BadInput(
                    f"{path}: line {start}: the row {what} ({len(record)} cells; the header has {len(header)})"
                )
            starts.append(start)
    except csv.Error as exc:
        raise BadInput(f"{path}: line {reader.line_num}: not a readable CSV: {exc}") from None
    return starts


@dataclass(frozen=True)
class Run:
    """A result directory as read from disk."""

    csv_path: Path
    frame: pd.DataFrame
    env: dict[str, Any] | None  # None when there is no env.json beside results.csv


def load_run(path: Path) -> Run:
    """Read a result directory or its results.csv, and the env.json beside it (if any)."""
    path = Path(path)
    csv_path = path / RESULTS_CSV if path.is_dir() else path
    frame = read_results(csv_path)
    if frame.empty:
        raise BadInput(f"{csv_path}: holds a header but no result rows")
    env = read_env(csv_path.parent)
    return Run(csv_path, frame, env)


def check_format(env: dict[str, Any], env_path: Path) -> None:
    """env.json's `results_format` (absent: 1, what every run wrote before it was recorded) must be
    one this gpubench reads."""
    version = env.get("results_format", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BadInput(f"{env_path}: results_format = {version!r} is not a format number (1, 2, ...)")
    if version > RESULTS_FORMAT:
        raise BadInput(
            f"{env_path}: results format {version}, newer than this gpubench reads (up to {RESULTS_FORMAT})",
            hint="upgrade gpubench to read it",
        )


def read_env(result_dir: Path) -> dict[str, Any] | None:
    """DIR/env.json as a dict; None when absent; BadInput when it is not a JSON object."""
    env_path = Path(result_dir) / ENV_JSON
    if not env_path.is_file():
        return None
    try:
        env = json.loads(env_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadInput(f"{env_path}: not valid JSON: {str(exc).splitlines()[0]}") from None
    if not isinstance(env, dict):
        raise BadInput(f"{env_path}: not a gpubench env.json (expected a JSON object)")
    check_format(env, env_path)
    return env


def read_plan(result_dir: Path) -> dict[str, Any]:
    """DIR/scenarios.json (what --resume replays); BadInput when absent or unreadable."""
    path = Path(result_dir) / SCENARIOS_JSON
    if not path.is_file():
        raise BadInput(f"--resume {result_dir}: no {SCENARIOS_JSON} there; not a gpubench result directory")
    try:
        data = read_json(path)
    except ValueError as exc:
        raise BadInput(f"{path}: unreadable ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path}: unreadable (expected a JSON object)")
    return data


def write_plan(result_dir: Path, plan: dict[str, Any], env: dict[str, Any], resumed: bool) -> None:
    """scenarios.json and env.json; a resumed run keeps the first env.json and appends to its
    `resumes` list where (and on which machine) the rest ran."""
    first = read_env(result_dir) if resumed else None  # BadInput when damaged, before anything is written
    atomic_write_json(result_dir / SCENARIOS_JSON, plan)
    env_path = result_dir / ENV_JSON
    if first is not None:
        gpu = env.get("gpu") or {}
        if not isinstance(first.get("resumes"), list):
            first["resumes"] = []
        first["resumes"].append(
            {
                "created_at": env.get("created_at"),
                "host": env.get("host"),
                "command": env.get("command"),
                "launcher": env.get("launcher"),
                "cpu_affinity": env.get("cpu_affinity"),
                "gpu_uuid": gpu.get("uuid"),
                "driver": gpu.get("driver"),
                "packages": env.get("packages"),
                "cpu_speed": env.get("cpu_speed"),
                "matmul_ceiling": _ceiling_note(env.get("matmul_ceiling")),
            }
        )
        atomic_write_json(env_path, first)
    else:
        atomic_write_json(env_path, env)


def _ceiling_note(ceiling: Any) -> Any:
    """A resume's matmul ceiling: what it measured, or which command's it reused (not a copy)."""
    if isinstance(ceiling, dict) and "reused_from" in ceiling:
        return {"reused_from": ceiling["reused_from"]}
    return ceiling


def note_harness_time(result_dir: Path, figures: dict[str, Any], resumed: bool = False) -> None:
    """env.json: where the run's wall time went (bench/run/session.harness_time). A `--resume`
    writes its own figures into its `resumes` entry: the first command's stay as measured."""
    env = read_env(result_dir) or {}
    resumes = env.get("resumes")
    if resumed and isinstance(resumes, list) and resumes and isinstance(resumes[-1], dict):
        resumes[-1]["harness_time"] = figures
    else:
        env["harness_time"] = figures
    atomic_write_json(result_dir / ENV_JSON, env)


def last_harness_time(env: dict[str, Any] | None) -> dict[str, Any]:
    """The latest command's `harness_time` in an env.json: its last resume's, else the first's."""
    env = env or {}
    resumes = env.get("resumes")
    if isinstance(resumes, list) and resumes and isinstance(resumes[-1], dict) and "harness_time" in resumes[-1]:
        return resumes[-1]["harness_time"] or {}
    return env.get("harness_time") or {}


def whole_run_harness_time(env: dict[str, Any] | None) -> dict[str, Any]:
    """Where the wall time of every command of a run went (the first's `harness_time`, then each
    `resumes` entry's): {"commands", "wall_s", "train_loop_s", "training_share"}; commands 0 without any."""
    env = env or {}
    entries = [env.get("harness_time")]
    entries += [r.get("harness_time") for r in env.get("resumes") or [] if isinstance(r, dict)]
    spent: list[dict[str, Any]] = [
        h for h in entries if isinstance(h, dict) and isinstance(h.get("wall_s"), int | float)
    ]
    wall = sum((float(h["wall_s"]) for h in spent), 0.0)
    train = sum((float(h.get("train_loop_s") or 0.0) for h in spent), 0.0)
    share = train / wall if wall > 0 else None
    return {"commands": len(spent), "wall_s": wall, "train_loop_s": train, "training_share": share}


def note_launcher_fallback(result_dir: Path, why: str) -> None:
    """env.json: the fork server could not serve and workers were spawned afresh (bench/run/launcher.py)."""
    env_path = result_dir / ENV_JSON
    env = read_env(result_dir) or {}
    env["launcher_fallback"] = {"launcher": "spawn", "why": why}
    atomic_write_json(env_path, env)
