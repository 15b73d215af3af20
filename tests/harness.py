"""Helpers for the harness tests: small matrix files, `gpubench` as a real subprocess, processes by
command line. Imported by tests/test_*.py (pytest puts tests/ on sys.path)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from bench.fmt import toml_value
from bench.results import read_results, write_results

REPO = Path(__file__).resolve().parents[1]
# The workload of every end-to-end test: one worker costs a few seconds on a 2-core CPU.
BASE: dict[str, Any] = {"model": "tiny", "samples": 16, "seq_len": 32, "warmup_steps": 1, "batch_size": 4}
# For a worker that only has to run to its end: 1 warm-up and 1 timed step (each step of the tiny
# BERT costs ~0.5 s of CPU, its 30k-token embedding's update most of it).
SHORT: dict[str, Any] = {**BASE, "samples": 8}
T = TypeVar("T")


def write_matrix(
    path: Path,
    scenarios: dict[str, dict[str, Any]],
    base: dict[str, Any] | None = None,
    description: str = "",
) -> Path:
    """A matrix file: [matrix], [base] (BASE unless given) and one [scenarios.NAME] table each."""
    lines = []
    if description:
        lines += ["[matrix]", f"description = {toml_value(description)}", ""]
    lines.append("[base]")
    lines += [f"{k} = {toml_value(v)}" for k, v in (BASE if base is None else base).items()]
    for name, settings in scenarios.items():
        lines += ["", f"[scenarios.{name}]"]
        lines += [f"{k} = {toml_value(v)}" for k, v in settings.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def gpubench_cmd(*args: str | Path) -> list[str]:
    """`gpubench run` writes no report.html here unless the test passes --report: the charts cost
    about 2 s of CPU a run, and only the tests that read the report need them."""
    argv = list(map(str, args))
    if argv[:1] == ["run"] and "--report" not in argv and "--no-report" not in argv:
        argv.insert(1, "--no-report")
    return [sys.executable, "-m", "bench", *argv]


def user_env() -> dict[str, str]:
    """This process's environment as a user's shell would have it. Importing transformers' Trainer
    in a test sets TORCHINDUCTOR_CACHE_DIR here (torch does when it is unset); passed on, it would
    look like the user's own choice to the run under test."""
    return {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}


def gpubench(
    *args: str | Path, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m bench ARGS` in the repository, as a user runs it; no shell. `env`: variables set
    on top of the user's environment."""
    return subprocess.run(
        gpubench_cmd(*args),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**user_env(), **(env or {})},
    )


@dataclass(frozen=True)
class Done:
    """What `gpubench` did in this process: its exit code, stdout and stderr."""

    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.err.splitlines()


def gpubench_in_process(*args: str | Path) -> Done:
    """The console entry point (bench.cli.main) in this process, as a user's shell would call it:
    the same exit code and one-line errors, without a new interpreter (~1.3 s of CPU each)."""
    from bench.cli import main

    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["gpubench", *map(str, args)]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    else:
        code = 0
    finally:
        sys.argv = argv
    return Done(code, out.getvalue(), err.getvalue())


def start_gpubench(*args: str | Path, log_dir: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """`python -m bench ARGS` in the background; stdout/stderr to files (a full pipe would block it).
    `env`: variables set on top of the user's environment."""
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / "stdout.txt", "wb") as out, open(log_dir / "stderr.txt", "wb") as err:
        return subprocess.Popen(
            gpubench_cmd(*args),
            cwd=REPO,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env={**user_env(), **(env or {})},
        )


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


def wait_for(what: str, probe: Callable[[], T], timeout: float, interval: float = 0.1) -> T:
    """Poll `probe` until it returns something truthy; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def alive(pid: int) -> bool:
    """A live process (a zombie waiting for its reaper counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def pids_with(text: str) -> set[int]:
    """Live processes whose command line contains `text`."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and alive(int(entry.name)):
            found.add(int(entry.name))
    return found


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command name: state, ppid, pgrp, ..."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _live_where(field: int, value: int) -> set[int]:
    """Live processes whose /proc/PID/stat field (after the name: 1 = ppid, 2 = pgrp) is `value`."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = _stat(int(entry.name))
        except OSError:
            continue
        if int(fields[field]) == value and fields[0] != "Z":
            found.add(int(entry.name))
    return found


def group_members(pgid: int) -> set[int]:
    return _live_where(2, pgid)


def children_of(pid: int) -> set[int]:
    return _live_where(1, pid)


def worker_pids(out: Path, scenario: str, repeat: int = 0) -> set[int]:
    """A scenario's live worker processes: the worker leads its own process group (its pid is in
    work/SCENARIO-rN/pid, see bench.run.runner.run_one) and its dataloader workers are in it too."""
    try:
        pgid = int((out / "work" / f"{scenario}-r{repeat}" / "pid").read_text())
    except (OSError, ValueError):
        return set()
    return group_members(pgid)


def write_run(directory: Path, rows: list[dict[str, Any]], env: dict[str, Any] | None) -> Path:
    """A result directory as `gpubench run` leaves it: results.csv, and env.json unless None."""
    directory.mkdir(parents=True, exist_ok=True)
    write_results(directory / "results.csv", rows)
    if env is not None:
        (directory / "env.json").write_text(json.dumps(env), encoding="utf-8")
    return directory


def results(out: Path) -> pd.DataFrame:
    return read_results(out / "results.csv")


def finished(out: Path) -> pd.DataFrame | None:
    """The results table once it exists and is readable, else None."""
    try:
        return results(out) if (out / "results.csv").is_file() else None
    except Exception:
        return None


def statuses(frame: pd.DataFrame) -> dict[str, str]:
    return dict(zip(frame["scenario"], frame["status"], strict=True))


def leftover_temp_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))
