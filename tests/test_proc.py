"""Process launching: argument lists, timeouts that kill the whole process group, Ctrl-C policy,
and the safety rules (no shell, no eval, safetensors only) checked on the sources themselves."""

from __future__ import annotations

import ast
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from harness import REPO, alive, wait_for

from bench.run.proc import Interrupts, run_subprocess, tail

# A child that starts a grandchild (as a dataloader worker would), writes both PIDs, and sleeps.
FAMILY = """
import os, signal, subprocess, sys, time
if len(sys.argv) > 2 and sys.argv[2] == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
open(sys.argv[1], "w").write(f"{os.getpid()} {grandchild.pid}")
print("family started", flush=True)
time.sleep(300)
"""


def family(tmp_path: Path, *extra: str) -> list[str]:
    return [sys.executable, "-c", FAMILY, str(tmp_path / "pids"), *extra]


def family_pids(tmp_path: Path) -> list[int]:
    text = wait_for(
        "the child's pid file", lambda: (tmp_path / "pids").is_file() and (tmp_path / "pids").read_text(), timeout=20
    )
    return [int(p) for p in text.split()]


def test_exit_code_and_log(tmp_path: Path) -> None:
    started: list[int] = []
    result = run_subprocess(
        [sys.executable, "-c", "import sys; print('hello'); sys.exit(3)"],
        timeout_s=30,
        log_path=tmp_path / "logs" / "x.log",
        on_start=started.append,
    )
    assert result.returncode == 3 and not result.timed_out and not result.interrupted
    assert (tmp_path / "logs" / "x.log").read_text() == "hello\n"
    assert len(started) == 1 and result.wall_s > 0


def test_arguments_reach_the_child_verbatim_without_a_shell(tmp_path: Path) -> None:
    tricky = "$(touch pwned); `touch pwned` 'quoted' \"double\" *"
    result = run_subprocess(
        [sys.executable, "-c", "import sys; print(sys.argv[1])", tricky], timeout_s=30, log_path=tmp_path / "a.log"
    )
    assert result.returncode == 0
    assert (tmp_path / "a.log").read_text() == tricky + "\n"
    assert not (REPO / "pwned").exists() and not Path("pwned").exists()


def test_timeout_kills_the_child_and_its_children(tmp_path: Path) -> None:
    result: list = []
    thread = threading.Thread(
        target=lambda: result.append(
            run_subprocess(family(tmp_path), timeout_s=3, log_path=tmp_path / "f.log", grace_s=2)
        )
    )
    thread.start()
    pids = family_pids(tmp_path)
    assert all(alive(p) for p in pids)  # the grandchild really existed
    thread.join(timeout=30)
    (outcome,) = result
    assert outcome.timed_out and outcome.returncode == -signal.SIGTERM
    assert wait_for("the family to die", lambda: not any(alive(p) for p in pids), timeout=5)


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    start = time.monotonic()
    result = run_subprocess(family(tmp_path, "ignore-term"), timeout_s=2, log_path=tmp_path / "f.log", grace_s=1)
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    assert result.timed_out and result.returncode == -signal.SIGKILL
    assert time.monotonic() - start < 10
    assert wait_for("the family to die", lambda: not any(alive(p) for p in pids), timeout=5)


def test_ctrl_c_while_waiting_kills_the_group_and_reports_interrupted(tmp_path: Path) -> None:
    def press_ctrl_c() -> None:
        family_pids(tmp_path)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=press_ctrl_c).start()
    result = run_subprocess(family(tmp_path), timeout_s=60, log_path=tmp_path / "f.log")
    assert result.interrupted and not result.timed_out
    pids = family_pids(tmp_path)
    assert wait_for("the family to die", lambda: not any(alive(p) for p in pids), timeout=5)


# A child that starts one grandchild in its process group and one in a session of its own (a
# daemon's way out of the group), writes the three pids, then exits at once or sleeps.
ESCAPES = """
import os, subprocess, sys, time
sleep = [sys.executable, "-c", "import time; time.sleep(300)"]
kids = [subprocess.Popen(sleep), subprocess.Popen(sleep, start_new_session=True)]
open(sys.argv[1] + ".tmp", "w").write(" ".join(str(p) for p in [os.getpid(), *(k.pid for k in kids)]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
if sys.argv[2] == "sleep":
    time.sleep(300)
"""


def test_what_a_child_left_running_ends_before_its_exit_is_returned(tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", ESCAPES, str(tmp_path / "pids"), "exit"]
    result = run_subprocess(cmd, timeout_s=60, log_path=tmp_path / "x.log")
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    try:
        assert result.returncode == 0 and not result.timed_out
        assert [p for p in pids if alive(p)] == []  # the reaper ended both before it exited
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_sigkilled_parent_takes_its_childs_whole_tree_with_it(tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", ESCAPES, str(tmp_path / "pids"), "sleep"]
    parent_code = (
        "import sys; from pathlib import Path; from bench.run.proc import run_subprocess; "
        f"run_subprocess({cmd!r}, timeout_s=600, log_path=Path({str(tmp_path / 'x.log')!r}))"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], cwd=REPO)
    pids: list[int] = []
    try:
        pids = [int(p) for p in family_pids(tmp_path)]
        assert len(pids) == 3 and all(alive(p) for p in pids)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=30)
        assert wait_for("the tree to die", lambda: not any(alive(p) for p in pids), timeout=10)
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if parent.poll() is None:
            parent.kill()


def test_interrupts_hold_a_press_outside_a_wait_and_raise_on_the_second() -> None:
    before = signal.getsignal(signal.SIGINT)
    with Interrupts() as ctrl_c:
        os.kill(os.getpid(), signal.SIGINT)  # e.g. while a row is being saved
        time.sleep(0.05)
        assert ctrl_c.requested  # held, not raised
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
    assert signal.getsignal(signal.SIGINT) is before


def test_a_held_press_stops_the_next_worker_at_once(tmp_path: Path) -> None:
    with Interrupts() as ctrl_c:
        os.kill(os.getpid(), signal.SIGTERM)  # SIGTERM counts like Ctrl-C
        time.sleep(0.05)
        start = time.monotonic()
        result = run_subprocess(
            [sys.executable, "-c", "import time; time.sleep(60)"],
            timeout_s=60,
            log_path=tmp_path / "x.log",
            interrupts=ctrl_c,
        )
    assert result.interrupted and time.monotonic() - start < 10


def test_tail_reads_the_end_of_a_log(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_text("a" * 100 + "THE END")
    assert tail(path, 7) == "THE END"
    assert tail(tmp_path / "missing.log") == ""


# -- safety, checked on the sources --------------------------------------------------------------

SOURCES = sorted((REPO / "bench").rglob("*.py"))
# every subprocess started outside the product too: validation scripts, make bench, tools
OUTSIDE = sorted([*(REPO / "validation").rglob("*.py"), *(REPO / "tools").rglob("*.py")])


def calls(tree: ast.AST) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


def dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


# the one unpickler: CIFAR-10's python batches through a find_class that admits numpy arrays only
# (tests/test_datakinds.py feeds it a pickle that would run code)
PICKLE_ALLOWED = {"bench/planner/datareaders.py": ("import pickle",)}


def test_no_shell_eval_or_pickle_anywhere_in_bench() -> None:
    assert len(SOURCES) > 20
    offences = []
    for path in SOURCES:
        text = path.read_text()
        allowed = PICKLE_ALLOWED.get(str(path.relative_to(REPO)), ())
        for word in ("shell=True", "os.system", "os.popen", "import pickle", "pickle.load", "torch.load("):
            if word in text and word not in allowed:
                offences.append(f"{path.relative_to(REPO)}: {word}")
        for call in calls(ast.parse(text)):
            name = dotted(call.func)
            if name in ("eval", "exec", "os.system", "os.popen") or name.startswith("os.exec"):
                offences.append(f"{path.relative_to(REPO)}:{call.lineno}: {name}()")
            for kw in call.keywords:
                if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                    offences.append(f"{path.relative_to(REPO)}:{call.lineno}: shell=")
    assert offences == []


def test_every_blocking_subprocess_call_has_a_timeout() -> None:
    found = []
    for path in SOURCES + OUTSIDE:
        for call in calls(ast.parse(path.read_text())):
            name = dotted(call.func)
            if name in ("subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output"):
                found.append(name)
                assert any(kw.arg == "timeout" for kw in call.keywords), f"{path}:{call.lineno}: {name} without timeout"
            if name == "subprocess.Popen" and path in SOURCES:  # only the one helper starts children
                assert path.name in ("proc.py", "reaper.py"), f"{path}:{call.lineno}: Popen outside bench/run/proc.py"
    assert found  # the check saw something


def test_local_checkpoints_load_without_remote_code_and_from_safetensors_only() -> None:
    tree = ast.parse((REPO / "bench" / "worker" / "model.py").read_text())
    loads = [c for c in calls(tree) if dotted(c.func).endswith("from_pretrained")]
    assert loads
    for call in loads:
        kwargs = {kw.arg: kw.value for kw in call.keywords}
        assert isinstance(kwargs.get("trust_remote_code"), ast.Constant) and kwargs["trust_remote_code"].value is False
        assert isinstance(kwargs.get("use_safetensors"), ast.Constant) and kwargs["use_safetensors"].value is True
