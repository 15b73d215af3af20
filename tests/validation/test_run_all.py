"""`python -m validation.run_all` (make bench): the command each part starts (fast, nothing runs),
and end to end on the CPU with the tiny model: a part run, then skipped once finished; each script
part's arguments accepted by its script; an unknown or archived part refused."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from harness import REPO
from history_support import H200_RUN

from validation import run_all
from validation.parts import PAST_DEADLINE_S

RUN_ALL = [sys.executable, "-m", "validation.run_all"]
SMALL = ["--samples", "16", "--seq-len", "32", "--warmup-steps", "1"]
HANG_GUARD_S = 600  # each command below takes seconds to a minute on a busy 2-core CPU


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUN_ALL, *args], cwd=REPO, capture_output=True, text=True, timeout=HANG_GUARD_S, stdin=subprocess.DEVNULL
    )


def finished_run(where: Path) -> Path:
    """A finished gpubench run (a real H200 `full` run's rows, every scenario x repeat final)."""
    where.mkdir(parents=True, exist_ok=True)
    shutil.copy(H200_RUN / "results.csv", where / "results.csv")
    counts = pd.read_csv(where / "results.csv").groupby("scenario").size()
    plan = {"scenarios": list(counts.index), "repeats": int(counts.min())}
    (where / "scenarios.json").write_text(json.dumps(plan), encoding="utf-8")
    return where


def part_command(name: str, out: Path, extra: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], float]:
    """The one command (and its timeout) that part `name` would start; nothing is started. A part
    that reads another part's run finds it finished beside its own directory."""
    part = run_all.SCRIPT_PARTS.get(name)
    if part is not None and part.results_of:
        finished_run(out.parent / part.results_of)
    calls: list[tuple[list[str], float]] = []

    def child(what: str, cmd: list[str], timeout_s: float, quiet: bool = False) -> int:
        calls.append((cmd, timeout_s))
        return 0

    with monkeypatch.context() as patch:
        patch.setattr(run_all, "run_child", child)
        assert run_all.run_part(name, out, extra, None) == 0
    (call,) = calls
    return call


def test_every_part_of_make_bench_is_a_validation_part_and_the_research_ones_are_gone() -> None:
    parts = [*run_all.PARTS, *run_all.SCRIPT_PARTS]
    assert sorted(parts) == sorted(
        ["full", "llm", "throughput", "faults", "fidelity", "interleaved", "interleaved-launch-bound"]
        + ["fabric-vit", "fabric-vit-fidelity", "fabric-vit-interleaved", "fabric-vit-interleaved-pieces"]
        + ["fabric-vit-interleaved-no-sampler"]
        + ["cumulative-bert-base", "aa"]
    )


@pytest.mark.parametrize(
    ("part", "module", "args"),
    [
        ("fidelity", "validation.fidelity", []),
        ("interleaved", "validation.interleaved", ["--control", "tf32-b4", "--trackers", "fp16-b4"]),
        ("interleaved-launch-bound", "validation.interleaved", ["--only", "tf32-b4,fp16-b4,bf16-b4"]),
        ("fabric-vit-fidelity", "validation.model_fidelity", ["--matrix", "fabric-vit", "--repeats", "3"]),
        ("fabric-vit-interleaved", "validation.interleaved", ["--matrix", "fabric-vit", "--pairs", "80"]),
        ("fabric-vit-interleaved-pieces", "validation.interleaved", ["--only", "", "--control", "plain"]),
        ("fabric-vit-interleaved-no-sampler", "validation.interleaved", ["--matrix", "fabric-vit", "--pairs", "20"]),
    ],
)
def test_make_bench_script_parts_run_their_module_under_a_timeout(
    part: str, module: str, args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cmd, timeout_s = part_command(part, tmp_path / "p", ["--model", "bert-base"], monkeypatch)
    assert cmd[:3] == [sys.executable, "-m", module]
    for flag, value in zip(args[::2], args[1::2], strict=True):
        assert cmd[cmd.index(flag) + 1] == value
    assert ("--model" in cmd) is (part == "fidelity")  # only fidelity hands extra arguments to gpubench run
    assert timeout_s >= 3600  # no deadline: a hang guard, far above any real part


def test_a_part_under_a_deadline_gets_the_time_left_and_a_margin_as_its_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[list[str], float]] = []

    def child(what: str, cmd: list[str], timeout_s: float, quiet: bool = False) -> int:
        calls.append((cmd, timeout_s))
        return 0

    monkeypatch.setattr(run_all, "run_child", child)
    assert run_all.run_part("interleaved", tmp_path / "i", [], time.monotonic() + 100) == 0
    ((cmd, timeout_s),) = calls
    assert 90 < float(cmd[cmd.index("--time-limit") + 1]) <= 100
    assert 90 + PAST_DEADLINE_S < timeout_s <= 100 + PAST_DEADLINE_S


@pytest.mark.validation
@pytest.mark.parametrize("part", sorted(run_all.SCRIPT_PARTS))
def test_make_bench_script_parts_hand_their_scripts_arguments_they_accept(
    part: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cmd, _ = part_command(part, tmp_path / "p", [], monkeypatch)
    # the module takes those arguments: a spent time limit stops it after parsing them, before any run
    cpu = ["--device", "cpu"] if "validation.interleaved" in cmd else []  # its GPU check comes first
    spent = subprocess.run(
        [*cmd, *cpu, "--time-limit", "0"], cwd=REPO, capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert spent.returncode == 4, spent.stderr[-2000:]
    assert not list((tmp_path / "p").rglob("*.json"))
    (tmp_path / "p").mkdir(exist_ok=True)
    (tmp_path / "p" / run_all.SCRIPT_PARTS[part].last).write_text("scenario\n")  # finished: the part is skipped
    assert run_all.run_part(part, tmp_path / "p", [], None) == 0


@pytest.mark.validation
def test_make_bench_runs_a_part_skips_it_when_finished_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    """The full part, cut to one scenario on the CPU with the tiny model; a second call skips it."""
    args = ["--out", str(tmp_path), "--parts", "full", "--", "--device", "cpu", "--only", "fp16", "--repeats", "1"]
    first = run(*args, *SMALL)
    assert first.returncode == 0, first.stderr[-3000:]
    frame = pd.read_csv(tmp_path / "full" / "results.csv")
    assert list(frame["scenario"]) == ["fp16"] and list(frame["status"]) == ["ok"]
    again = run(*args, *SMALL)
    assert again.returncode == 0 and "full: finished, skipped" in again.stderr, again.stderr[-3000:]
    for bad in ("cpu-loops", "cv-long"):  # a typo, and a research part archived at lab-h200-2026-11
        refused = run("--out", str(tmp_path), "--parts", bad)
        assert refused.returncode == 2 and f"unknown part {bad!r}" in refused.stderr


def test_a_part_that_reads_another_parts_run_refuses_until_that_run_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    started: list[list[str]] = []
    monkeypatch.setattr(run_all, "run_child", lambda what, cmd, timeout_s, quiet=False: started.append(cmd) or 0)
    out = tmp_path / "fabric-vit-fidelity"
    assert run_all.run_part("fabric-vit-fidelity", out, [], None) == 2 and not started  # no run at all
    run = finished_run(tmp_path / "fabric-vit")
    frame = pd.read_csv(run / "results.csv")
    frame.iloc[:-1].to_csv(run / "results.csv", index=False)  # one row short: stopped at its time limit
    assert run_all.run_part("fabric-vit-fidelity", out, [], None) == 2 and not started
    assert "run --parts fabric-vit,fabric-vit-fidelity" in capsys.readouterr().err
    finished_run(run)
    assert run_all.run_part("fabric-vit-fidelity", out, [], None) == 0
    (cmd,) = started
    assert cmd[cmd.index("--results") + 1] == str(run) and cmd[cmd.index("--out") + 1] == str(out)
