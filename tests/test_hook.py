"""gpubench's step hook (bench/hook/) and command scenarios (bench/run/command.py): the hook's
session in this process, the rank files combined, and two real runs sharing one fixture: `run
--cmd` of a few-line torch loop, and a matrix of `command = [...]` scenarios that fail each its way."""

from __future__ import annotations

import contextlib
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
from bench.planner.matrix import load_matrix
from bench.recipe.scenario import Scenario
from bench.run import command
from bench.run.plan import command_scenario
from bench.run.proc import ProcResult
from bench.run.request import RunRequest

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

    from bench.hook.state import Session

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
    from bench.hook.state import Session

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
    one = {"samples_per_s": 10.0, "window_s": 3.5, "window_samples": 20, "tokens_per_s": 5.0, "host": "h"}
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


def test_a_step_inside_another_is_refused_and_the_row_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nested, the inner step's samples would count twice (an `ok` row at 2x samples/s)."""
    monkeypatch.setenv(protocol.DIR_VAR, str(tmp_path))
    monkeypatch.setenv(protocol.WINDOW_VAR, "epoch")
    monkeypatch.setattr(gpubench_hook, "_session", None)
    for _ in range(4):
        with gpubench_hook.step(samples=2), gpubench_hook.step(samples=2):
            pass
    gpubench_hook.close()
    result = json.loads(protocol.rank_file(tmp_path, 0).read_text())
    assert (result["status"], result["reason"]) == ("error", protocol.NESTED)
    assert command.combined({0: result})[:2] == ("error", protocol.NESTED)


def test_a_step_that_raised_is_not_counted_and_the_next_is_not_nested(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(protocol.DIR_VAR, str(tmp_path))
    monkeypatch.setattr(gpubench_hook, "_session", None)
    for i in range(4):
        with contextlib.suppress(ValueError), gpubench_hook.step(samples=2):
            if i == 1:
                raise ValueError("a bad batch, skipped by the loop")
    gpubench_hook.close()
    result = json.loads(protocol.rank_file(tmp_path, 0).read_text())
    assert result["status"] == "ok" and result["figures"]["window_samples"] == 6  # 3 steps ended


def test_the_error_that_ends_a_process_is_its_rank_files_and_torchruns_error_files(tmp_path: Path) -> None:
    from bench.hook.state import Session

    environ = {protocol.DIR_VAR: str(tmp_path), "RANK": "1", "WORLD_SIZE": "2"}
    error_file = tmp_path / "error.json"
    try:
        raise ValueError("rank one has bad data")
    except ValueError as exc:
        protocol.record_failure(exc, None, {**environ, protocol.ERROR_FILE_VAR: str(error_file)})
    result = json.loads(protocol.rank_file(tmp_path, 1).read_text())
    assert (result["status"], result["reason"], result["rank"]) == ("error", "ValueError: rank one has bad data", 1)
    message = json.loads(error_file.read_text())["message"]  # torch's record decorator's shape
    assert (
        message["message"] == "ValueError: rank one has bad data"
        and "Traceback" in message["extraInfo"]["py_callstack"]
    )
    session = Session(environ)  # after a step: the session writes it, once
    session.begin()
    session.end(samples=2)
    protocol.record_failure(RuntimeError("late"), session, environ)
    session.close()
    assert json.loads(protocol.rank_file(tmp_path, 1).read_text())["reason"] == "RuntimeError: late"


def test_ranks_that_timed_different_windows_are_not_ok() -> None:
    def rank(steps: int, window_s: float, r: int) -> dict[str, Any]:
        figures = {"window_steps": steps, "window_s": window_s, "window_samples": 2 * steps, "samples_per_s": 1.0}
        return _rank(figures, r, 2)

    status, reason, row = command.combined({0: rank(8, 0.8, 0), 1: rank(1, 0.1, 1)})
    assert (status, row) == ("error", {})
    assert reason.startswith("the ranks timed different windows (rank 0: 8 steps in 0.8 s, rank 1: 1 steps in 0.1 s")
    assert command.combined({0: rank(8, 0.8, 0), 1: rank(8, 0.5, 1)})[0] == "error"  # 0.5 s of 0.8: apart
    assert command.combined({0: rank(100, 10.0, 0), 1: rank(95, 9.0, 1)})[0] == "ok"  # within 10% / 25%


def test_a_rank_that_ended_without_its_result_says_how_the_command_exited() -> None:
    running = {0: {"status": "running", "pid": 1, "rank": 0, "world_size": 1}}
    status, reason, _ = command.combined(running, exit_code=0)
    assert status == "error" and "still running" not in reason
    assert "the command exited with code 0" in reason and "os._exit()" in reason and "gpubench.close()" in reason


def test_a_failing_torchrun_command_names_the_rank_and_its_own_error(tmp_path: Path) -> None:
    log = tmp_path / "log"
    error_file = tmp_path / "error.json"
    error_file.write_text(json.dumps({"message": {"message": "ValueError: rank one has bad data", "extraInfo": {}}}))
    root = (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n====\ntrain.py FAILED\n----\n"
        "Root Cause (first observed failure):\n[0]:\n  time      : 2026-12-07_03:30:24\n  host      : localhost\n"
        "  rank      : 1 (local_rank: 1)\n  exitcode  : 1 (pid: 10768)\n  error_file: {error_file}\n"
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n====\n"
    )
    log.write_text(root.format(error_file=error_file))
    assert command.outcome(ProcResult(1, 1.0), tmp_path, log, 60, None)[:2] == (
        "error",
        "the command exited with code 1: rank 1 failed (exit code 1): ValueError: rank one has bad data",
    )
    log.write_text("ValueError: rank one has bad data\n" + root.format(error_file="<N/A>"))  # no error file
    assert command.outcome(ProcResult(1, 1.0), tmp_path, log, 60, None)[1] == (
        "the command exited with code 1: rank 1 failed (exit code 1): ValueError: rank one has bad data"
    )


def test_a_matrix_command_that_is_empty_is_refused_before_any_work(tmp_path: Path) -> None:
    matrix = tmp_path / "m.toml"
    matrix.write_text("[scenarios.mine]\ncommand = []\n")
    with pytest.raises(BadInput, match=r"\[scenarios.mine\]: command = \[\] names no program"):
        load_matrix(str(matrix))
    done = gpubench_in_process("run", "--matrix", matrix, "--device", "cpu", "--out", tmp_path / "out")
    assert done.code == 2 and "command = [] names no program" in done.err and not (tmp_path / "out").exists()


def test_the_hf_callback_records_the_models_loss_of_each_step(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from bench.hook import hf

    ended: list[Any] = []
    monkeypatch.setattr(hf, "enabled", lambda: True)
    monkeypatch.setattr(hf, "begin", lambda: None)
    monkeypatch.setattr(hf, "end", lambda samples, loss=None: ended.append((samples, loss)) and False)

    class Model(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
            return {"loss": x.mean()}

    model = Model().train()
    args = type("Args", (), {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 2})()
    callback = hf.GpubenchCallback()
    callback.on_train_begin(args, None, None, model=model)
    callback.on_step_begin(args, None, None)
    model(torch.tensor([2.0]))  # two micro-batches: the step's loss is their mean, undivided
    model(torch.tensor([4.0]))
    callback.on_step_end(args, None, None)
    model(torch.tensor([9.0]))  # outside a step (an evaluation): not a training loss
    callback.on_train_end(args, None, None)
    ((samples, loss),) = ended
    assert samples == 8 and float(loss) == 3.0


def test_the_lightning_callback_runs_in_a_lightning_2_trainer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The documented `L.Trainer(callbacks=[GpubenchLightningCallback()])`, with the real package:
    without gpubench (the hook does nothing) and launched by it (a result with the window's figures)."""
    import lightning as L
    import torch

    from bench.hook.lightning import GpubenchLightningCallback

    class Tiny(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(8, 2)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            return torch.nn.functional.cross_entropy(self.layer(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    def fit() -> None:
        data = torch.utils.data.TensorDataset(torch.randn(24, 8), torch.randint(0, 2, (24,)))
        trainer = L.Trainer(
            callbacks=[GpubenchLightningCallback()],
            max_epochs=1,
            accelerator="cpu",
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            default_root_dir=tmp_path,
        )
        trainer.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=4))

    monkeypatch.delenv(protocol.DIR_VAR, raising=False)
    fit()  # without gpubench: it trains, the hook does nothing
    monkeypatch.setenv(protocol.DIR_VAR, str(tmp_path))
    monkeypatch.setenv(protocol.WARMUP_VAR, "1")
    monkeypatch.setattr(gpubench_hook, "_session", None)
    fit()
    result = json.loads(protocol.rank_file(tmp_path, 0).read_text())
    assert result["status"] == "ok", result
    figures = result["figures"]
    assert (figures["window_steps"], figures["window_samples"]) == (5, 20) and figures["final_loss"] > 0


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


# Scripts of users whose loops the hook must not count wrongly, run as one matrix of commands.
HONEST = {
    "nested": (
        "import bench.hook as g\nfor _ in range(4):\n    with g.step(samples=2), g.step(samples=2):\n        pass\n"
    ),
    "osexit": (
        "import os\nimport bench.hook as g\nfor _ in range(4):\n"
        "    with g.step(samples=2):\n        pass\nos._exit(0)\n"
    ),
    "apart": (
        "import os\nimport bench.hook as g\n"
        "for _ in range(9 if os.environ['RANK'] == '0' else 2):\n    with g.step(samples=2):\n        pass\n"
    ),
    "rankfails": (
        "import os, time\nimport bench.hook as g\n"
        "if os.environ['RANK'] == '1':\n    raise ValueError('rank one has bad data')\ntime.sleep(60)\n"
    ),
    "lightning": (
        "import lightning as L, torch\nfrom bench.hook.lightning import GpubenchLightningCallback\n"
        "class Tiny(L.LightningModule):\n"
        "    def __init__(self):\n        super().__init__()\n        self.layer = torch.nn.Linear(8, 2)\n"
        "    def training_step(self, batch, i):\n"
        "        return torch.nn.functional.cross_entropy(self.layer(batch[0]), batch[1])\n"
        "    def configure_optimizers(self):\n        return torch.optim.SGD(self.parameters(), lr=0.1)\n"
        "data = torch.utils.data.TensorDataset(torch.randn(24, 8), torch.randint(0, 2, (24,)))\n"
        "trainer = L.Trainer(callbacks=[GpubenchLightningCallback()], max_epochs=1, accelerator='cpu', logger=False,\n"
        "    enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)\n"
        "trainer.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=4))\n"
    ),
}
TORCHRUN = ("apart", "rankfails")


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """One `run --matrix` of the HONEST scripts (two of them under torchrun, 2 processes); their rows."""
    root = tmp_path_factory.mktemp("honest")
    python = json.dumps(sys.executable)
    lines = ["[base]", "warmup_steps = 1", "timeout_s = 240"]
    for name, text in HONEST.items():
        (root / f"train_{name}.py").write_text(text)  # not lightning.py: the script's folder comes first
        launcher = '"-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", ' if name in TORCHRUN else ""
        lines += [f"[scenarios.{name}]", f'command = [{python}, {launcher}"{root}/train_{name}.py"]']
    (root / "m.toml").write_text("\n".join(lines) + "\n")
    done = gpubench("run", "--matrix", root / "m.toml", "--device", "cpu", "--out", root / "out", timeout=900)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return {r["scenario"]: r for r in results(root / "out").to_dict("records")}


def test_the_hook_refuses_a_nested_step_and_an_os_exit_says_so(honest: dict[str, dict[str, Any]]) -> None:
    assert (honest["nested"]["status"], honest["nested"]["error"]) == ("error", protocol.NESTED)
    osexit = honest["osexit"]
    assert osexit["status"] == "error" and "still running" not in osexit["error"]
    assert "the command exited with code 0" in osexit["error"] and "os._exit()" in osexit["error"]


def test_torchrun_ranks_that_disagree_or_fail_are_named(honest: dict[str, dict[str, Any]]) -> None:
    apart = honest["apart"]
    assert apart["status"] == "error"
    assert apart["error"].startswith("the ranks timed different windows (rank 0: 8 steps in"), apart["error"]
    assert ", rank 1: 1 steps in " in apart["error"]
    fails = honest["rankfails"]
    assert (fails["status"], fails["error"]) == (
        "error",
        "the command exited with code 1: rank 1 failed (exit code 1): ValueError: rank one has bad data",
    )


def test_the_lightning_callback_times_a_lightning_2_fit(honest: dict[str, dict[str, Any]]) -> None:
    row = honest["lightning"]
    assert row["status"] == "ok", row["error"]
    assert (row["window_steps"], row["window_samples"]) == (5, 20) and row["final_loss"] > 0
