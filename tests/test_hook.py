"""gpubench's step hook (bench/hook/) and command scenarios (bench/run/command.py): the hook's
session in this process, the rank files combined, and two real runs sharing one fixture: `run
--cmd` of a few-line torch loop, and a matrix of `command = [...]` scenarios that fail each its way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from harness import gpubench, gpubench_in_process, results

import bench.hook as gpubench_hook
from bench.errors import BadInput
from bench.hook import protocol
from bench.run import command
from bench.run.plan import command_scenario
from bench.run.proc import ProcResult
from bench.run.request import RunRequest
from bench.scenario import Scenario

LOOP = """
import torch
import bench.hook as gpubench

torch.manual_seed(0)
model = torch.nn.Linear(8, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(STEPS):
    x, y = torch.randn(4, 8), torch.tensor([0, 1, -100, 2])
    with gpubench.step(samples=4, tokens=gpubench.tokens_from_labels(y)) as s:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        s.loss = loss
"""


def session_env(tmp_path: Path, warmup: int, window: str) -> dict[str, str]:
    return {protocol.DIR_VAR: str(tmp_path), protocol.WARMUP_VAR: str(warmup), protocol.WINDOW_VAR: window}


def test_the_session_times_the_window_and_counts_only_its_samples_and_tokens(tmp_path: Path) -> None:
    import torch

    from bench.hook.session import Session

    session = Session(session_env(tmp_path, warmup=2, window="3"))
    stops = []
    for step in range(7):  # 2 warm-up, 3 timed, 2 after the window
        session.begin()
        labels = torch.tensor([1, -100, 2, -100, 3][: step % 3 + 3])  # 2, 2, 3 trainable tokens...
        stops.append(session.end(samples=step + 1, tokens=gpubench_hook.tokens_from_labels(labels), loss=1.0))
    assert stops == [False, False, False, False, True, True, True]
    session.close()
    result = json.loads(protocol.rank_file(tmp_path, 0).read_text())
    figures = result["figures"]
    assert (result["status"], result["rank"], result["world_size"]) == ("ok", 0, 1)
    assert figures["window_steps"] == 3 and figures["window_stop"] == "steps"
    assert figures["window_samples"] == 3 + 4 + 5  # steps 3 to 5
    window_s = figures["window_s"]
    assert figures["samples_per_s"] == pytest.approx(12 / window_s)
    assert figures["tokens_per_s"] == pytest.approx((2 + 2 + 3) / window_s)  # labels of steps 3-5: 5, 3, 4 long
    assert figures["final_loss"] == 1.0 and figures["loss_finite"] is True
    assert figures["step_time_median_ms"] > 0 and figures["rss_peak_mb"] > 0


def test_with_window_epoch_the_loops_end_closes_the_window_and_a_short_loop_says_why(tmp_path: Path) -> None:
    from bench.hook.session import Session

    long = Session(session_env(tmp_path / "a", warmup=1, window="epoch"))
    (tmp_path / "a").mkdir()
    for _ in range(4):
        long.begin()
        long.end(samples=2)
    long.close()
    figures = json.loads(protocol.rank_file(tmp_path / "a", 0).read_text())["figures"]
    assert (figures["window_steps"], figures["window_samples"], figures["window_stop"]) == (3, 6, "epoch_end")
    assert figures["tokens_per_s"] is None and "final_loss" not in figures  # not given: not made up
    short = Session(session_env(tmp_path, warmup=5, window="epoch"))
    short.begin()
    short.end(samples=2)
    short.close()
    result = json.loads(protocol.rank_file(tmp_path, 0).read_text())
    assert result["status"] == "error"
    assert result["reason"].startswith("the loop ran 1 optimizer steps, not more than warmup_steps = 5")


def test_not_launched_by_gpubench_the_hook_does_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(protocol.DIR_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    with gpubench_hook.step(samples=4, tokens=3) as s:
        s.add(samples=4)
    assert s.samples == 8
    assert gpubench_hook.end(samples=1) is False and gpubench_hook.done() is False
    assert not gpubench_hook.enabled() and gpubench_hook._session is None and not list(tmp_path.iterdir())
    assert gpubench_hook.tokens_from_labels([[1, -100, 2], [-100]]) == 2


def test_the_lightning_style_callback_counts_an_optimizer_step_every_accumulate_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch

    from bench.hook import lightning

    calls: list[Any] = []
    monkeypatch.setattr(lightning, "begin", lambda: calls.append("begin"))
    monkeypatch.setattr(lightning, "end", lambda samples, tokens, loss: calls.append((samples, int(tokens))) or True)
    callback = lightning.GpubenchLightningCallback(accumulate=2, stop_after_window=True)
    trainer = type("T", (), {"should_stop": False})()
    batch = {"input_ids": torch.zeros(3, 5), "labels": torch.tensor([[1, -100], [2, 3], [-100, -100]])}
    for i in range(2):
        callback.on_train_batch_start(trainer, None, batch, i)
        callback.on_train_batch_end(trainer, None, {"loss": torch.tensor(0.5)}, batch, i)
    assert calls == ["begin", (6, 6)] and trainer.should_stop is True
    assert lightning.samples_of((torch.zeros(7, 2), torch.zeros(7))) == 7


def _rank(figures: dict[str, Any], rank: int, world: int, status: str = "ok") -> dict[str, Any]:
    return {
        "status": status,
        "reason": "" if status == "ok" else "boom",
        "figures": figures,
        "rank": rank,
        "world_size": world,
    }


def test_ranks_combine_by_the_built_in_rules_and_a_missing_rank_is_named() -> None:
    one = {"samples_per_s": 10.0, "window_s": 2.0, "window_samples": 20, "tokens_per_s": 5.0, "host": "h"}
    two = {**one, "window_s": 4.0, "step_time_median_ms": 9.0}
    status, reason, row = command.combined({0: _rank(one, 0, 2), 1: _rank(two, 1, 2)})
    assert (status, reason, row["world_size"], row["slowest_rank"]) == ("ok", "", 2, 1)
    assert row["samples_per_s"] == pytest.approx(40 / 4.0) and "host" not in row
    assert command.combined({0: _rank(one, 0, 1)})[2] == {k: v for k, v in one.items() if k != "host"}
    assert command.combined({0: _rank(one, 0, 3)})[:2] == ("error", "ranks 1, 2 never called the hook")
    assert command.combined({0: _rank(one, 0, 1, "oom")})[:2] == ("oom", "boom")
    assert command.combined({}) == ("error", protocol.NEVER_CALLED, {})
    running = {0: {"status": "running", "pid": 1, "rank": 0, "world_size": 1}}
    assert command.combined(running)[:2] == ("error", "rank 0: running: no result (still running at the end)")


def test_a_command_that_exits_non_zero_is_an_error_with_its_last_exception(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text("Traceback (most recent call last):\n  ...\nmodule.ValueError: bad lr\n")
    status, reason, _ = command.outcome(ProcResult(3, 1.0), tmp_path, log, 60, None)
    assert (status, reason) == ("error", "the command exited with code 3: ValueError: bad lr")
    assert command.outcome(ProcResult(-9, 1.0), tmp_path, log, 60, None)[:2] == (
        "crashed",
        "the command was killed by signal SIGKILL",
    )


def test_run_cmd_refuses_bad_input_naming_it() -> None:
    with pytest.raises(BadInput, match="No closing quotation"):
        command_scenario(RunRequest(cmd="python 'train.py"))
    with pytest.raises(BadInput, match="--cmd and --matrix"):
        command_scenario(RunRequest(cmd="python t.py", matrix="quick"))
    with pytest.raises(BadInput, match="--seq-len do not apply to a command"):
        command_scenario(RunRequest(cmd="python t.py", overrides={"seq_len": 64, "window": "auto"}))
    with pytest.raises(BadInput, match="'no-such-program-x' is not a program on PATH"):
        command_scenario(RunRequest(cmd="no-such-program-x --lr 1"))
    sc = command_scenario(RunRequest(cmd=f"{sys.executable} 'my script.py' --lr 3e-4", overrides={"window": "auto"}))
    assert sc.command == (sys.executable, "my script.py", "--lr", "3e-4") and sc.window == "auto"
    with pytest.raises(BadInput, match="strategy = 'ddp' does not apply to a command"):
        Scenario(name="c", command=("python",), strategy="ddp", gpus=2)
    assert Scenario(name="c", command=["python", "t.py"], gpus=2).command == ("python", "t.py")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`run --cmd` of the loop, and a matrix of three command scenarios that fail: ~10 s of CPU."""
    root = tmp_path_factory.mktemp("hook")
    (root / "train.py").write_text(LOOP.replace("STEPS", "30"))
    (root / "nohook.py").write_text("print('training without the hook')\n")
    (root / "exit3.py").write_text("import sys\nraise SystemExit('RuntimeError: no data at /nowhere')\n")
    done = gpubench(
        "run",
        "--cmd",
        f"{sys.executable} {root / 'train.py'}",
        "--warmup-steps",
        "5",
        "--window",
        "10",
        "--device",
        "cpu",
        "--out",
        root / "cmd",
    )
    python = json.dumps(sys.executable)
    (root / "m.toml").write_text(
        "[matrix]\n[base]\nwarmup_steps = 1\n"
        f'[scenarios.nohook]\ncommand = [{python}, "{root / "nohook.py"}"]\n'
        f'[scenarios.exits]\ncommand = [{python}, "{root / "exit3.py"}"]\n'
        f'[scenarios.hangs]\ncommand = [{python}, "-c", "import time; time.sleep(61.25)"]\ntimeout_s = 2\n'
    )
    failing = gpubench("run", "--matrix", root / "m.toml", "--device", "cpu", "--out", root / "m")
    return {"cmd": (done, root / "cmd"), "matrix": (failing, root / "m")}


@pytest.mark.slow
def test_run_cmd_times_the_loop_as_a_scenario(runs: dict[str, Any]) -> None:
    done, out = runs["cmd"]
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = results(out).to_dict("records")
    assert (row["scenario"], row["status"], row["model_resolved"]) == ("cmd", "ok", "command")
    assert json.loads(row["command"])[1].endswith("train.py")
    assert (row["window_steps"], row["window_samples"], row["window_stop"]) == (10, 40, "steps")
    assert row["samples_per_s"] > 0 and row["tokens_per_s"] == pytest.approx(row["samples_per_s"] * 3 / 4)
    assert 0 < row["step_time_p10_ms"] <= row["step_time_median_ms"] <= row["step_time_p90_ms"]
    assert row["loss_finite"] and row["final_loss"] > 0 and row["exit_code"] == 0
    assert row["peak_mem_source"] == "rss" and row["peak_mem_mb"] > 0
    assert json.loads((out / "env.json").read_text())["results_format"] == 1
    report = gpubench_in_process("report", out, "--format", "json")  # it reads like a built-in scenario's row
    assert report.code == 0, report.err
    assert json.loads(report.out)["scenarios"][0]["scenario"] == "cmd"


@pytest.mark.slow
def test_commands_that_fail_are_rows_with_a_status_and_their_reason(runs: dict[str, Any]) -> None:
    done, out = runs["matrix"]
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    rows = {r["scenario"]: r for r in results(out).to_dict("records")}
    assert (rows["nohook"]["status"], rows["nohook"]["error"]) == ("error", protocol.NEVER_CALLED)
    assert rows["exits"]["status"] == "error" and rows["exits"]["exit_code"] == 1
    assert rows["exits"]["error"] == "the command exited with code 1: RuntimeError: no data at /nowhere"
    assert "no data at /nowhere" in rows["exits"]["stderr_tail"]
    assert rows["hangs"]["status"] == "timeout" and "2 s timeout" in rows["hangs"]["error"]
    assert not [p for p in os.listdir(out / "work" / "hangs-r0") if p.startswith("hook-rank")]
    assert subprocess.run(["pgrep", "-f", r"time\.sleep\(61\.25\)"], capture_output=True).returncode == 1  # killed
