"""Nothing a run starts outlives it (docs/running.md, "What gpubench guarantees": Processes): for
each launcher (fork, spawn, torchrun, `--cmd`, `--cmd` with torchrun, Slurm with fake commands) a
SIGKILLed `gpubench run` leaves no process behind, and a `--cmd` script's own children end with its row when it exits.

Every process below gpubench is noted while the scenario runs (the /proc tree, and the pids the
scripts write of the children they start, one of them in a session of its own as a daemon's
would be); after the kill, or the run's end, none may be alive."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

import pytest
from harness import SHORT, alive, gpubench, start_gpubench, wait_for, write_matrix

pytestmark = pytest.mark.slow

# Starts a child in its process group and one in a session of its own, writes their pids and its
# own to PIDS.RANK, then sleeps (or exits at once with "exit").
FAMILY = """
import os, subprocess, sys, time
code = "import time; time.sleep(300)"
kids = [subprocess.Popen([sys.executable, "-c", code]),
        subprocess.Popen([sys.executable, "-c", code], start_new_session=True)]
pids = " ".join(str(p) for p in [os.getpid(), *(k.pid for k in kids)])
path = sys.argv[1] + "." + os.environ.get("RANK", "0")
open(path + ".tmp", "w").write(pids)
os.rename(path + ".tmp", path)
if sys.argv[2:] != ["exit"]:
    time.sleep(300)
"""


def tree(root: int) -> set[int]:
    """Every live process below `root`."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if fields[0] != "Z":
                    children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        for kid in children.get(todo.pop(), ()):
            found.add(kid)
            todo.append(kid)
    return found


def written(marks: Path, ranks: int) -> set[int]:
    files = [marks.with_name(f"{marks.name}.{r}") for r in range(ranks)]
    if not all(f.is_file() for f in files):
        return set()
    return {int(p) for f in files for p in f.read_text().split()}


def kill_all(pids: set[int]) -> None:
    for pid in pids:  # whatever the outcome: end what the test saw, by pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def family_script(tmp_path: Path) -> Path:
    script = tmp_path / "family.py"
    script.write_text(FAMILY)
    return script


def run_args(tmp_path: Path, kind: str) -> tuple[list[str], int]:
    """`gpubench run`'s arguments for a scenario of this kind that runs until killed; how many
    processes write a pid file (0: a built-in worker, seen through the /proc tree alone)."""
    marks = tmp_path / "pids"
    family = [sys.executable, str(family_script(tmp_path)), str(marks)]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    if kind == "cmd":
        return ["--cmd", " ".join(family)], 1
    if kind == "cmd-torchrun":
        return ["--cmd", " ".join([*torchrun, *family[1:]])], 2
    base = {**SHORT, "engine": "accelerate", "inject_fault": "hang", "timeout_s": 600}
    scenario = {"dataloader_workers": 2} if kind in ("fork", "spawn") else {"strategy": "ddp", "gpus": 2}
    matrix = write_matrix(tmp_path / "m.toml", {"hang": scenario}, base=base)
    launcher = ["--launcher", kind] if kind in ("fork", "spawn") else ["--skip-preflight"]
    return ["--matrix", str(matrix), *launcher], 0


def busy(root: int, kind: str) -> bool:
    """Whether the hanging built-in scenario's processes are all up below gpubench."""
    lines = []
    for pid in tree(root):
        with contextlib.suppress(OSError):
            lines.append(Path(f"/proc/{pid}/cmdline").read_bytes())
    workers = [c for c in lines if b"bench.worker" in c and b"spec.json" in c]
    if kind == "torchrun":
        return len(workers) >= 3  # torchrun and its two ranks
    return len(tree(root)) >= (5 if kind == "fork" else 4)  # (server,) reaper, worker, 2 loader workers


@pytest.mark.parametrize("kind", ["fork", "spawn", "torchrun", "cmd", "cmd-torchrun"])
def test_a_sigkilled_gpubench_leaves_no_process_behind(tmp_path: Path, kind: str) -> None:
    args, writers = run_args(tmp_path, kind)
    run = start_gpubench("run", *args, "--device", "cpu", "--out", tmp_path / "out", log_dir=tmp_path / "parent")
    seen: set[int] = set()
    try:

        def up() -> bool:
            if run.poll() is not None:
                raise AssertionError((tmp_path / "parent" / "stderr.txt").read_text()[-3000:])
            if writers:
                return bool(written(tmp_path / "pids", writers))
            return busy(run.pid, kind)

        wait_for(f"the {kind} scenario's processes", up, timeout=300, interval=0.2)
        seen = tree(run.pid) | written(tmp_path / "pids", writers)
        assert len(seen) >= 3
        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=30)
        left = wait_for_none(seen)
        assert not left, f"still alive after the parent was SIGKILLed: {left}"
    finally:
        kill_all(seen | tree(run.pid))
        if run.poll() is None:
            run.kill()


def wait_for_none(pids: set[int], timeout: float = 20) -> set[int]:
    with contextlib.suppress(AssertionError):
        wait_for("no survivor", lambda: not any(alive(p) for p in pids), timeout=timeout)
    return {p for p in pids if alive(p)}


def test_a_commands_children_end_with_it_when_it_exits_normally(tmp_path: Path) -> None:
    script = family_script(tmp_path)
    done = gpubench(
        "run",
        "--cmd",
        f"{sys.executable} {script} {tmp_path / 'pids'} exit",
        "--device",
        "cpu",
        "--out",
        tmp_path / "o",
    )
    pids = written(tmp_path / "pids", 1)
    try:
        assert len(pids) == 3, done.stderr[-3000:]
        assert not {p for p in pids if alive(p)}  # ended with the row, before gpubench exited
    finally:
        kill_all(pids)


def test_a_sigkilled_gpubench_under_slurm_leaves_no_slurm_command_behind(tmp_path: Path) -> None:
    """Slurm with a fake sbatch (it takes the job) and a fake squeue that does not answer (a
    controller that hangs): gpubench SIGKILLed while it waits leaves no squeue running."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tools = {
        "sbatch": "echo 4242",
        "squeue": f'echo $$ > "{tmp_path}/squeue.pid.tmp"; mv "{tmp_path}/squeue.pid.tmp" "{tmp_path}/squeue.pid"; '
        "exec sleep 300",
        "scancel": "true",
    }
    for name, body in tools.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    matrix = write_matrix(tmp_path / "m.toml", {"first": {}}, base=SHORT)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    run = start_gpubench(
        "run", "--launcher", "slurm", "--matrix", matrix, "--device", "cpu", "--out", tmp_path / "out",
        log_dir=tmp_path / "parent", env=env,
    )  # fmt: skip
    pid_file = tmp_path / "squeue.pid"
    squeue = 0
    try:

        def asked() -> bool:
            if run.poll() is not None:
                raise AssertionError((tmp_path / "parent" / "stderr.txt").read_text()[-3000:])
            return pid_file.is_file()

        wait_for("gpubench to ask squeue", asked, timeout=120, interval=0.2)
        squeue = int(pid_file.read_text())
        assert alive(squeue)
        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=30)
        wait_for("the squeue gpubench started to end", lambda: not alive(squeue), timeout=30, interval=0.2)
    finally:
        kill_all({squeue} - {0})
        with contextlib.suppress(ProcessLookupError):
            run.kill()
