"""bench.api.run's GPU checks, with a fake GPU: a busy GPU warns, --exclusive refuses before running."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bench import api
from bench.errors import BadInput, ExitCode
from bench.recipe.scenario import Scenario
from bench.run import runner, session
from bench.run.launcher import SpawnLauncher
from bench.run.plan import RunPlan
from bench.run.request import RunRequest


@pytest.fixture
def fake_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A plan on a GPU that two other processes use; records whether the run started."""
    plan = RunPlan(
        "m",
        (Scenario(name="a", samples=16, seq_len=32, warmup_steps=1),),
        1,
        "cuda:0",
        "GPU-fake",
        "tiny",
        tmp_path / "out",
        60.0,
    )
    calls: list[str] = []
    monkeypatch.setattr(session, "prepare", lambda request, scratch: (plan, {"devices": [{}]}))
    monkeypatch.setattr(
        session,
        "gpu_in_use",
        lambda uuid, probe, warn=None: (
            {"name": "Fake GPU", "uuid": uuid},
            [{"pid": 123, "used_mb": 500.0}, {"pid": 456, "used_mb": None}],
        ),
    )

    def execute(
        plan: RunPlan, gpu_name: Any, reporter: Any = None, warn: Any = None, deadline: Any = None, launcher: Any = None
    ) -> runner.RunOutcome:
        calls.append(f"execute on {gpu_name}")
        assert launcher is not None  # started ahead of the ceiling (a GPU run), handed to execute
        return runner.RunOutcome([], ExitCode.OK, False)

    monkeypatch.setattr(session, "execute", execute)
    monkeypatch.setattr(session, "run_launcher", lambda plan, warn: SpawnLauncher({}))  # no real server here
    return calls


def test_exclusive_refuses_a_busy_gpu_before_anything_runs(fake_gpu: list[str], tmp_path: Path) -> None:
    with pytest.raises(BadInput) as info:
        api.run(RunRequest(exclusive=True))
    assert str(info.value) == "--exclusive: the GPU is in use by other processes: pid 123 (500 MB), pid 456 (0 MB)"
    assert fake_gpu == [] and not (tmp_path / "out").exists()


def test_a_busy_gpu_is_a_warning_and_is_recorded(fake_gpu: list[str], tmp_path: Path) -> None:
    warnings: list[str] = []
    api.run(RunRequest(), warn=warnings.append)
    assert warnings == [
        "the GPU is in use by other processes (pid 123 (500 MB), pid 456 (0 MB)); figures will be disturbed"
    ]
    assert fake_gpu == ["execute on Fake GPU"]
    env = (tmp_path / "out" / "env.json").read_text()
    assert '"pid": 123' in env and '"name": "Fake GPU"' in env


def test_a_broken_nvml_is_a_warning_and_the_gpu_comes_from_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.measure import nvml as nvml_mod

    def broken(uuid: str) -> None:
        raise RuntimeError("NVML Shared Library Not Found")

    monkeypatch.setattr(nvml_mod, "Nvml", broken)
    warnings: list[str] = []
    probe = {"devices": [{"uuid": "GPU-1", "name": "NVIDIA H200", "capability": "9.0", "total_memory_mb": 143771}]}
    gpu, procs = session.gpu_in_use("GPU-1", probe, warnings.append)
    assert procs == []
    assert gpu is not None and gpu["name"] == "NVIDIA H200"
    assert gpu["nvml"] == "unavailable: RuntimeError: NVML Shared Library Not Found"
    assert warnings == [
        "NVML is not usable (RuntimeError: NVML Shared Library Not Found); "
        "peak memory will come from torch's allocator only"
    ]


def test_env_json_says_when_the_checkout_differs_from_its_commit(tmp_path: Path) -> None:
    import subprocess

    from bench.run.envinfo import git_info

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    assert git_info(tmp_path)["commit"] is None and git_info(tmp_path)["dirty"] is None  # not a checkout
    git("init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git("add", "a.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    clean = git_info(tmp_path)
    assert clean["dirty"] is False and len(str(clean["commit"])) == 40
    (tmp_path / "a.py").write_text("x = 2\n")
    assert git_info(tmp_path)["dirty"] is True


def test_a_cpu_run_reads_torch_without_starting_it(tmp_path: Path) -> None:
    """--device cpu (and auto without a GPU driver): torch's version from its files, no child."""
    from importlib.metadata import version

    from bench.run import probe as probe_mod

    seen = probe_mod.probe("cpu", tmp_path)
    assert seen["torch"] == version("torch") and seen["devices"] == [] and not (tmp_path / "probe.log").exists()
    if probe_mod.no_gpu_driver():
        assert probe_mod.probe("auto", tmp_path) == seen


@pytest.mark.parametrize("ends", ["finished", "raised", "time-limited"])
def test_the_files_workers_share_are_deleted_when_the_run_ends_unless_it_is_to_be_resumed(
    fake_gpu: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ends: str
) -> None:
    """work/shared holds gigabytes (a QLoRA preset's random weights): gone after the run, even one
    that ends by an exception; kept when --time-limit stopped it, for the --resume it asks for (each
    resumed command built its own copy before: 77-86 s for llama-1b on the H200 host). The rest of
    the run's folder stays (a row was saved)."""

    def execute(plan: RunPlan, *args: Any, **kwargs: Any) -> runner.RunOutcome:
        (plan.shared_dir / "llama-1b-bfloat16-seed42").mkdir(parents=True)
        (plan.shared_dir / "llama-1b-bfloat16-seed42" / "model.safetensors").write_bytes(b"x" * 1000)
        plan.results_csv.write_text("a row\n")
        if ends == "raised":
            raise KeyboardInterrupt
        if ends == "time-limited":
            return runner.RunOutcome([], ExitCode.TIME_LIMIT, False, time_limited=True)
        return runner.RunOutcome([], ExitCode.OK, False)

    monkeypatch.setattr(session, "execute", execute)
    if ends == "raised":
        with pytest.raises(KeyboardInterrupt):
            api.run(RunRequest())
    else:
        api.run(RunRequest())
    kept = tmp_path / "out" / "work" / "shared" / "llama-1b-bfloat16-seed42" / "model.safetensors"
    assert kept.is_file() is (ends == "time-limited")
    assert (tmp_path / "out" / "env.json").is_file()


def test_the_cli_says_what_a_time_limited_run_keeps_for_its_resume(
    fake_gpu: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness import gpubench_in_process

    def execute(plan: RunPlan, *args: Any, **kwargs: Any) -> runner.RunOutcome:
        (plan.shared_dir / "llama-1b-bfloat16-seed42").mkdir(parents=True)
        (plan.shared_dir / "llama-1b-bfloat16-seed42" / "model.safetensors").write_bytes(b"x" * 2_500_000)
        return runner.RunOutcome([], ExitCode.TIME_LIMIT, False, time_limited=True)

    monkeypatch.setattr(session, "execute", execute)
    done = gpubench_in_process("run", "--time-limit", "60", "--no-report")
    assert done.code == int(ExitCode.TIME_LIMIT), done.err
    shared = tmp_path / "out" / "work" / "shared"
    said = " ".join(done.err.split())
    assert f"the random weights its workers share (2 MB, {shared}) are kept for it" in said, done.err


@pytest.mark.parametrize("existing", [False, True], ids=["new", "existing"])
def test_a_run_interrupted_before_its_first_row_leaves_its_out_folder_as_it_was(
    fake_gpu: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existing: bool
) -> None:
    """A Ctrl-C held until the first scenario would start: nothing measured, so neither what the
    run wrote (env.json, scenarios.json, logs, its lock file) nor the folders it made for --out stay;
    a folder that was there keeps what it held."""
    out = tmp_path / "runs" / "out"
    plan = session.prepare(RunRequest(), tmp_path)[0]  # the fixture's plan
    made = () if existing else (out, out.parent)
    out.mkdir(parents=True)  # as prepare's check of --out leaves it
    if existing:
        (out / "notes.txt").write_text("mine")
    monkeypatch.setattr(session, "prepare", lambda request, scratch: (replace(plan, out=out, made=made), {}))

    def execute(plan: RunPlan, *args: Any, **kwargs: Any) -> runner.RunOutcome:
        (plan.out / "logs").mkdir()
        (plan.out / "logs" / "forkserver.log").write_text("started\n")
        return runner.RunOutcome([], ExitCode.INTERRUPTED, True)

    monkeypatch.setattr(session, "execute", execute)
    _, outcome = api.run(RunRequest())
    assert outcome.discarded and outcome.exit_code == ExitCode.INTERRUPTED
    if existing:
        assert [p.name for p in out.iterdir()] == ["notes.txt"]
    else:
        assert not (tmp_path / "runs").exists()


def test_every_command_has_its_library_function_in_the_api() -> None:
    """bench.api is the one facade: each CLI command (history's subcommands each) names a callable
    of bench.api.__all__, and every command of the CLI is named (a new command without one fails)."""
    import typer

    from bench.cli import app

    def names(group: Any, prefix: str = "") -> set[str]:
        found: set[str] = set()
        for name, cmd in group.commands.items():
            if hasattr(cmd, "commands"):  # a group (typer's own click)
                found |= names(cmd, f"{prefix}{name} ")
            else:
                found.add(f"{prefix}{name}")
        return found

    assert names(typer.main.get_command(app)) == set(api.COMMANDS)
    for command, function in api.COMMANDS.items():
        assert function in api.__all__, command
        assert callable(getattr(api, function)), command
