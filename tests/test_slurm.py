"""`gpubench run --launcher slurm`: the sbatch script (pure, always), and a real single-node Slurm
(.ci/slurm-local.sh, started by .ci/run) when GPUBENCH_TEST_SLURM=1: a two-scenario matrix to `ok`
rows, the job cancelled after its first row, and `--resume` finishing it."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
from harness import SHORT, gpubench, gpubench_in_process, results, start_gpubench, statuses, wait_for, write_matrix

from bench.run.slurm_script import SlurmOptions, Step, render

ARGV = ["/venv/python", "-m", "bench", "run", "--no-report"]


def script(options: SlurmOptions, steps: list[Step]) -> str:
    return render(options, "gpubench-m", steps, ARGV, Path("/out/slurm"), Path("/work dir"))


def test_the_script_asks_for_what_the_options_say_and_runs_one_step_per_scenario() -> None:
    text = script(
        SlurmOptions(partition="gpu", account="lab", time="02:00:00", gpus_per_node=8),
        [Step("baseline", Path("/out/slurm/steps/baseline")), Step("fp16", Path("/out/slurm/steps/fp16"))],
    )
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    for line in ("#SBATCH --partition=gpu", "#SBATCH --account=lab", "#SBATCH --time=02:00:00",
                 "#SBATCH --gpus-per-node=8", "#SBATCH --nodes=1", "#SBATCH --output=/out/slurm/job-%j.log",
                 "#SBATCH --chdir=\"/work dir\""):  # fmt: skip
        assert line in lines
    steps = [shlex.split(line.split(" || ")[0]) for line in lines if line.startswith("srun ")]
    assert steps == [
        ["srun", "--nodes=1", "--ntasks=1", *ARGV, "--resume", f"/out/slurm/steps/{name}"]
        for name in ("baseline", "fp16")
    ]
    assert 'HEAD_NODE="$(scontrol show hostnames "$SLURM_NODELIST" | head -n 1)"' in lines
    assert lines[-1].startswith("exit 0")


def test_no_option_no_sbatch_line() -> None:
    text = script(SlurmOptions(), [Step("a", Path("/s/a"))])
    assert not any(w in text for w in ("--partition", "--account", "--time=", "--gpus-per-node"))


def test_a_multi_node_step_runs_torchrun_on_every_node_with_slurms_rank_and_first_host() -> None:
    (line,) = [
        ln
        for ln in script(SlurmOptions(nodes=2), [Step("ddp", Path("/s/ddp"), 2)]).splitlines()
        if ln.startswith("srun ")
    ]
    words = shlex.split(line.split(" || ")[0].replace('"$HEAD_NODE:$RDZV_PORT"', "HEAD:PORT"))
    assert words[:6] == ["srun", "--nodes=2", "--ntasks-per-node=1", "bash", "-c", words[5]]
    assert words[6:9] == ["gpubench-step", "/s/ddp", "HEAD:PORT"] and words[9:] == ARGV
    assert '--resume "$shard/node-$SLURM_NODEID" --node-rank "$SLURM_NODEID"' in words[5]
    # the wrapper, run by bash as srun would on node 1: gpubench's argv after it, no word split
    env = {**os.environ, "SLURM_NODEID": "1"}
    done = subprocess.run(["bash", "-c", words[5], "x", "/s/ddp", "h:1", "echo", "a b"], env=env,
                          capture_output=True, text=True, timeout=10)  # fmt: skip
    assert done.stdout.split("\n")[0] == "a b --resume /s/ddp/node-1 --node-rank 1 --rdzv-endpoint h:1"


def test_dry_run_writes_the_script_and_the_shards_and_submits_nothing(tmp_path: Path) -> None:
    matrix = write_matrix(tmp_path / "m.toml", {"first": {}, "second": {"batch_size": 2}}, base=SHORT)
    out = tmp_path / "run"
    done = gpubench_in_process("run", "--launcher", "slurm", "--matrix", matrix, "--device", "cpu",
                               "--out", out, "--partition", "debug", "--print-script")  # fmt: skip
    assert done.code == 0, done.err
    assert done.out == (out / "slurm" / "job-1.sbatch").read_text()
    assert "#SBATCH --partition=debug" in done.out and done.out.count("\nsrun ") == 2
    plan = json.loads((out / "slurm" / "steps" / "second" / "scenarios.json").read_text())
    assert [s["name"] for s in plan["scenarios"]] == ["second"] and plan["device"] == "cpu"
    assert not (out / "slurm" / "jobs.json").exists() and not (out / "results.csv").exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--lanes", "2"], "--lanes with --launcher slurm"),
        (["--node-rank", "1"], "--node-rank with --launcher slurm"),
        (["--time-limit", "60"], "--time-limit with --launcher slurm"),
    ],
)
def test_what_slurm_refuses(tmp_path: Path, args: list[str], says: str) -> None:
    done = gpubench_in_process("run", "--launcher", "slurm", "--matrix", "quick", "--out", tmp_path / "r", *args)
    assert done.code == 2 and says in done.err


def test_slurm_options_without_the_slurm_launcher_are_refused(tmp_path: Path) -> None:
    done = gpubench_in_process("run", "--matrix", "quick", "--partition", "gpu", "--out", tmp_path / "r")
    assert done.code == 2 and "--partition without --launcher slurm" in done.err


slurm = pytest.mark.skipif(
    os.environ.get("GPUBENCH_TEST_SLURM") != "1",
    reason="needs a running Slurm: GPUBENCH_TEST_SLURM=1 (.ci/run starts one with .ci/slurm-local.sh)",
)


@slurm
def test_a_matrix_through_slurm_cancelled_and_resumed(tmp_path: Path) -> None:
    matrix = write_matrix(tmp_path / "m.toml", {"first": {}, "second": {"batch_size": 2, "samples": 32}}, base=SHORT)
    out = tmp_path / "run"
    parent = start_gpubench("run", "--launcher", "slurm", "--matrix", matrix, "--device", "cpu", "--out", out,
                            log_dir=tmp_path / "logs")  # fmt: skip
    try:
        wait_for("the first scenario's row", lambda: (out / "results.csv").is_file(), timeout=240, interval=0.5)
        (job,) = [j["job_id"] for j in json.loads((out / "slurm" / "jobs.json").read_text())]
        subprocess.run(["scancel", job], check=True, timeout=30)
        assert parent.wait(timeout=240) == 130
    finally:
        parent.kill()
    err = (tmp_path / "logs" / "stderr.txt").read_text()
    assert f"submitted Slurm job {job}: 2 step(s)" in err
    assert f"finish the run with `gpubench run --launcher slurm --resume {out}`" in err
    assert statuses(results(out))["first"] == "ok" and statuses(results(out)).get("second") != "ok"
    done = gpubench("run", "--launcher", "slurm", "--resume", out, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    frame = results(out)
    assert list(frame["scenario"]) == ["first", "second"] and statuses(frame) == {"first": "ok", "second": "ok"}
    assert "submitted Slurm job" in done.stderr and "1 step(s)" in done.stderr  # only the unfinished one
    env = json.loads((out / "env.json").read_text())
    assert [j["job_id"] for j in env["slurm"]["jobs"]][0] == job and len(env["slurm"]["jobs"]) == 2
    assert (out / "logs" / "second-r0.log").is_file()


# -- Slurm's commands found before anything is written or submitted ---------------------------------
def fake_slurm(bin_dir: Path, tools: dict[str, str]) -> str:
    """A PATH of fake Slurm commands (each a shell script body); the python running the tests stays."""
    bin_dir.mkdir(exist_ok=True)
    for name, body in tools.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return str(bin_dir)


SUBMITS = 'echo "$@" > "$(dirname "$0")/submitted"; echo 4242'


@pytest.mark.parametrize(
    ("tools", "says"),
    [
        ({}, "sbatch, squeue, scancel not found on PATH"),
        ({"sbatch": SUBMITS, "scancel": "true"}, "squeue not found on PATH"),
        ({"sbatch": SUBMITS, "squeue": "true"}, "scancel not found on PATH"),
    ],
    ids=["no-slurm", "no-squeue", "no-scancel"],
)
def test_a_missing_slurm_command_is_refused_before_anything_is_written_or_submitted(
    tools: dict[str, str], says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", fake_slurm(tmp_path / "bin", tools))
    matrix = write_matrix(tmp_path / "m.toml", {"first": {}}, base=SHORT)
    out = tmp_path / "new" / "run"
    args = ("run", "--launcher", "slurm", "--matrix", matrix, "--device", "cpu", "--out", out)
    for _ in range(2):  # the same command is refused the same way again: nothing was left behind
        done = gpubench_in_process(*args)
        assert done.code == 2, done.err
        assert says in done.err and "(it needs sbatch, squeue, scancel)" in done.err
        assert not (tmp_path / "new").exists() and not (tmp_path / "bin" / "submitted").exists()


def test_a_job_sbatch_refuses_leaves_nothing_and_the_same_command_runs_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refuses = 'echo "sbatch: error: invalid partition specified: nope" >&2; exit 1'
    monkeypatch.setenv("PATH", fake_slurm(tmp_path / "bin", {"sbatch": refuses, "squeue": "true", "scancel": "true"}))
    matrix = write_matrix(tmp_path / "m.toml", {"first": {}}, base=SHORT)
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "notes.txt").write_text("mine")
    for out in (tmp_path / "new" / "run", tmp_path / "kept"):
        args = ("run", "--launcher", "slurm", "--matrix", matrix, "--device", "cpu", "--out", out)
        for _ in range(2):
            done = gpubench_in_process(*args, "--partition", "nope")
            assert done.code == 2, done.err
            assert "invalid partition specified: nope" in done.err and "already holds" not in done.err
    assert not (tmp_path / "new").exists()
    assert sorted(p.name for p in (tmp_path / "kept").iterdir()) == ["notes.txt"]  # what was there stays
