"""The two launchers (issue 4's overhead): `fork`, a fork server that imports torch and transformers
once per run and forks each worker, and `spawn`, a fresh interpreter per worker. Both give the same
rows; the fork server's workers are still separate processes in their own groups; a server that
cannot serve is replaced by `spawn` with a warning. Real subprocesses, tiny model, CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from harness import BASE, SHORT, gpubench, results, write_matrix

from bench.recipe.scenario import Scenario
from bench.run.childenv import worker_env
from bench.run.launcher import DEFAULT_LAUNCHER, ForkLauncher, WorkerJob, open_launcher

# A spawned worker costs ~9 s of CPU: the crash, killed at its first step, imports the lighter engine.
SCENARIOS = {"a": {}, "crash": {"inject_fault": "sigkill", "engine": "accelerate"}}
FIRST_CPU = min(os.sched_getaffinity(0))  # both runs pin their workers to it (--cpu-affinity)


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("launchers")
    matrix = write_matrix(tmp / "m.toml", SCENARIOS, base=SHORT)
    outs = {}
    for launcher in ("fork", "spawn"):
        outs[launcher] = tmp / launcher
        done = gpubench(
            "run",
            "--matrix",
            matrix,
            "--device",
            "cpu",
            "--launcher",
            launcher,
            "--out",
            outs[launcher],
            "--cpu-affinity",
            str(FIRST_CPU),
            timeout=300,
        )
        assert done.returncode == 1, done.stderr[-3000:]  # the crash scenario fails the run
    return outs


def test_fork_is_the_default_on_linux() -> None:
    expected = "fork" if sys.platform.startswith("linux") else "spawn"
    assert expected == DEFAULT_LAUNCHER


@pytest.mark.parametrize("launcher", ["fork", "spawn"])
def test_both_launchers_give_the_same_rows(both: dict[str, Path], launcher: str) -> None:
    frame = results(both[launcher]).set_index("scenario")
    assert dict(frame["status"]) == {"a": "ok", "crash": "crashed"}
    assert frame.loc["crash", "error"] == "worker killed by signal SIGKILL before writing a result"
    assert json.loads((both[launcher] / "env.json").read_text())["launcher"] == launcher
    # each worker is its own process, leading its own group (its pid file), never the runner
    pids = {int((both[launcher] / "work" / f"{s}-r0" / "pid").read_text()) for s in SCENARIOS}
    assert len(pids) == len(SCENARIOS)
    # --cpu-affinity: the fork server's children inherit its pinning, a spawned worker pins itself
    assert list(frame.loc[["a"], "cpu_affinity"]) == [str(FIRST_CPU)]
    assert json.loads((both[launcher] / "env.json").read_text())["cpu_affinity"] == str(FIRST_CPU)
    steps = [json.loads(frame.loc[s, "startup_breakdown"]) for s in ("a",)]
    if launcher == "fork":  # forked with the imports done: no import step of its own
        assert all("forked" in st and "imports" not in st for st in steps)
    else:
        assert all("imports" in st and "forked" not in st for st in steps)


def test_the_launchers_agree_on_the_training(both: dict[str, Path]) -> None:
    fork, spawn = (results(both[k]).set_index("scenario") for k in ("fork", "spawn"))
    for column in ("final_loss", "window_steps", "model_params", "flops_per_sample"):
        assert list(fork.loc[["a"], column]) == list(spawn.loc[["a"], column]), column


def _spec(tmp_path: Path) -> tuple[Path, Path]:
    sc = Scenario(name="solo", **{k: v for k, v in BASE.items() if k != "model"}, model="tiny")
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps(
            {"scenario": sc.settings(), "device": "cpu", "model": "tiny", "repeat": 0, "launched_at": time.time()}
        )
    )
    return spec, tmp_path / "result.json"


# A server that dies at once: test_a_fallback_is_warned_once_and_recorded_in_env_json, a whole run.
REFUSES = (
    'import sys, json; print(json.dumps({"ready": False, "error": "no fork here"}), flush=True); '
    'print(json.dumps({"error": "no fork here"}), flush=True); sys.stdin.read()'
)
# The spawned worker here: what `python -m bench.worker SPEC RESULT` leaves when it succeeds (a real
# one is spawned by the whole runs above and below; here it would cost ~9 s of CPU a job).
FAKE_WORKER = (
    "import json, sys; spec, result = sys.argv[1:]; json.load(open(spec)); "
    'open(result, "w").write(json.dumps({"status": "ok", "figures": {}, "worker": sys.argv[1:]}))'
)


@pytest.mark.parametrize("server", [REFUSES], ids=["server-refuses"])
def test_a_server_that_cannot_serve_is_replaced_by_spawn(
    tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench.run import launcher as launcher_mod

    monkeypatch.setattr(launcher_mod, "WORKER", [sys.executable, "-c", FAKE_WORKER])
    warnings: list[str] = []
    launcher = ForkLauncher(
        worker_env(None), tmp_path / "server.log", warnings.append, server_cmd=[sys.executable, "-c", server]
    )
    spec, result = _spec(tmp_path)
    second = tmp_path / "result2.json"
    launcher.prestart()  # started ahead (session._measure): a server that cannot serve is found at the first run
    try:
        done = launcher.run(WorkerJob(spec, result, 120, tmp_path / "w.log"))
        again = launcher.run(WorkerJob(spec, second, 120, tmp_path / "w2.log"))
    finally:
        launcher.close()
    assert done.returncode == 0 and again.returncode == 0, (tmp_path / "w.log").read_text()[-2000:]
    # both jobs went to a spawned worker, each with its own spec and result
    assert json.loads(result.read_text()) == {"status": "ok", "figures": {}, "worker": [str(spec), str(result)]}
    assert json.loads(second.read_text())["worker"] == [str(spec), str(second)]
    assert launcher.fallback_reason == "no fork here"
    assert len(warnings) == 1 and "each worker starts afresh (--launcher spawn)" in warnings[0]


# A fork server that serves each request itself (as FAKE_WORKER, naming the server in the result):
# with `--with PACKAGES` it says it preloaded only peft, whatever it was asked for.
SERVES = """
import json, os, sys
extra = "--with" in sys.argv
print(json.dumps({"ready": True, "imports_s": 0, "error": None, "preloaded": ["peft"] if extra else []}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    print(json.dumps({"pid": os.getpid()}), flush=True)
    with open(request["result"], "w") as f:
        json.dump({"status": "ok", "figures": {}, "worker": "with" if extra else "main"}, f)
    print(json.dumps({"pid": os.getpid(), "returncode": 0}), flush=True)
"""


def test_a_scenario_that_imports_peft_goes_to_the_server_that_preloaded_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run with peft or torchao scenarios starts one more server for each set of those packages
    its scenarios import (`--with` them, each its own log); a worker whose packages its server
    preloaded is forked there, one that needs a package its server did not preload starts afresh,
    with one warning a server and package; the others go to the main server."""
    from bench.run import launcher as launcher_mod

    monkeypatch.setattr(launcher_mod, "WORKER", [sys.executable, "-c", FAKE_WORKER])
    warnings: list[str] = []
    sets = [("peft",), ("torchao",), ("peft", "torchao")]
    launcher = ForkLauncher(
        worker_env(None), tmp_path / "fs.log", warnings.append, [sys.executable, "-c", SERVES], sets
    )
    assert {k: e.server_cmd[-2:] for k, e in launcher.extras.items()} == {
        ("peft",): ["--with", "peft"],
        ("torchao",): ["--with", "torchao"],
        ("peft", "torchao"): ["--with", "peft,torchao"],
    }
    spec, _ = _spec(tmp_path)
    jobs = {"none": (), "peft": ("peft",), "fp8": ("torchao",), "both": ("peft", "torchao"), "fp8-again": ("torchao",)}
    try:
        launcher.prestart()
        assert all(e.server is not None for e in launcher.extras.values())  # all started ahead
        done = {
            name: launcher.run(WorkerJob(spec, tmp_path / f"{name}.json", 120, tmp_path / f"{name}.log", imports=i))
            for name, i in jobs.items()
        }
    finally:
        launcher.close()
    assert all(d.returncode == 0 for d in done.values()), done
    by = {name: json.loads((tmp_path / f"{name}.json").read_text())["worker"] for name in jobs}
    assert by["none"] == "main" and by["peft"] == "with"
    for name in ("fp8", "both", "fp8-again"):  # torchao: not preloaded by their servers
        assert by[name] == [str(spec), str(tmp_path / f"{name}.json")], name
    assert len(warnings) == 2, warnings  # one a server, though two rows needed torchao alone
    assert "import torchao did not preload torchao" in warnings[0] and "fs-with-torchao.log" in warnings[0]
    assert "import peft,torchao did not preload torchao" in warnings[1] and "fs-with-peft-torchao.log" in warnings[1]
    assert launcher.server is None and all(e.server is None for e in launcher.extras.values())  # close ends all


def test_a_package_that_leaves_a_context_costs_only_its_own_scenarios_the_fork(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torchao's import asks triton for the device (a CUDA context: its server cannot fork, seen on an
    H100): the FP8 rows start afresh saying why, while the 8-bit optimizer's rows are still forked by
    their own server (with one server for every package, none of them was)."""
    from bench.run import launcher as launcher_mod

    monkeypatch.setattr(launcher_mod, "WORKER", [sys.executable, "-c", FAKE_WORKER])
    poisoned = SERVES.replace(
        '{"ready": True, "imports_s": 0, "error": None, "preloaded": ["peft"] if extra else []}',
        '{"ready": "torchao" not in sys.argv[-1], "imports_s": 0, "error": "a CUDA context" '
        'if "torchao" in sys.argv[-1] else None, "preloaded": sys.argv[-1].split(",") if extra else []}',
    )
    assert poisoned != SERVES
    warnings: list[str] = []
    sets = [("bitsandbytes",), ("torchao",)]
    launcher = ForkLauncher(
        worker_env(None), tmp_path / "fs.log", warnings.append, [sys.executable, "-c", poisoned], sets
    )
    assert sorted(launcher.extras) == sets
    spec, _ = _spec(tmp_path)
    try:
        for name, imports in (("adamw-8bit", ("bitsandbytes",)), ("fp8", ("torchao",))):
            done = launcher.run(
                WorkerJob(spec, tmp_path / f"{name}.json", 120, tmp_path / f"{name}.log", imports=imports)
            )
            assert done.returncode == 0
    finally:
        launcher.close()
    assert json.loads((tmp_path / "adamw-8bit.json").read_text())["worker"] == "with"
    assert json.loads((tmp_path / "fp8.json").read_text())["worker"] == [str(spec), str(tmp_path / "fp8.json")]
    assert warnings == [
        "the fork server of the scenarios that import torchao did not preload torchao (a CUDA context): "
        "their scenarios start afresh"
    ]


def test_a_server_with_packages_that_cannot_serve_says_why_and_its_rows_start_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The `--with` server's ready line says it cannot serve (an engine import created a CUDA
    context): its rows start afresh, the warning gives the server's own reason, the others are forked."""
    from bench.run import launcher as launcher_mod

    monkeypatch.setattr(launcher_mod, "WORKER", [sys.executable, "-c", FAKE_WORKER])
    unsafe = SERVES.replace(
        '{"ready": True, "imports_s": 0, "error": None,',
        '{"ready": not extra, "imports_s": 0, "error": "a CUDA context" if extra else None,',
    )
    warnings: list[str] = []
    launcher = ForkLauncher(
        worker_env(None), tmp_path / "fs.log", warnings.append, [sys.executable, "-c", unsafe], ["peft"]
    )
    spec, _ = _spec(tmp_path)
    try:
        for name, imports in (("lora", ("peft",)), ("base", ())):
            done = launcher.run(
                WorkerJob(spec, tmp_path / f"{name}.json", 120, tmp_path / f"{name}.log", imports=imports)
            )
            assert done.returncode == 0
    finally:
        launcher.close()
    assert json.loads((tmp_path / "lora.json").read_text())["worker"] == [str(spec), str(tmp_path / "lora.json")]
    assert json.loads((tmp_path / "base.json").read_text())["worker"] == "main"
    assert warnings == [
        "the fork server of the scenarios that import peft did not preload peft (a CUDA context): "
        "their scenarios start afresh"
    ]


# A package that creates a CUDA context on import (on the CPU: torch says one was created), one
# whose import fails, one that imports cleanly: the fork server preloads only the last.
FAKE_PACKAGES = {
    "makes_context": "import torch\ntorch.cuda.is_initialized = lambda: True\n",
    "fails": "raise ImportError('no such library')\n",
    "clean": "VALUE = 1\n",
}


@pytest.mark.parametrize("names", [("clean",), ("makes_context", "clean"), ("fails", "clean", "makes_context"), ()])
def test_the_server_preloads_only_what_imports_without_a_cuda_context(names: tuple[str, ...], tmp_path: Path) -> None:
    """Each `--with` package is tried in a forked child first: the server imports those that left
    no CUDA context, keeps serving, and says which it preloaded."""
    for name, text in FAKE_PACKAGES.items():
        (tmp_path / f"{name}.py").write_text(text)
    code = (
        "import json, sys; from bench.worker.forkserver import _preload; "
        f"unsafe, preloaded = _preload(['accelerate'], {list(names)!r}); import torch; "
        "print(json.dumps([unsafe, preloaded, sorted(n for n in sys.modules if n in "
        f"{list(FAKE_PACKAGES)!r}), torch.cuda.is_initialized()]))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    unsafe, preloaded, imported, initialized = json.loads(done.stdout.strip().splitlines()[-1])
    clean = ["clean"] if "clean" in names else []
    assert (unsafe, preloaded, imported, initialized) == (None, clean, clean, False)
    if "fails" in names:
        assert "importing fails failed: ImportError: no such library" in done.stderr
    if "makes_context" in names:  # the log says so (and, where torch has CUDA, which call made it)
        assert "importing makes_context created a CUDA context, first here:" in done.stderr


def test_the_first_cuda_init_is_recorded_with_the_call_that_made_it() -> None:
    """record_first_cuda_init: the stack of the first torch._C._cuda_init, naming its caller (what the
    fork server's log shows for a package that cannot be preloaded); a torch without CUDA: nothing."""
    from types import SimpleNamespace

    from bench.worker.cudafree import record_first_cuda_init

    calls: list[int] = []
    fake = SimpleNamespace(_C=SimpleNamespace(_cuda_init=lambda: calls.append(1)))
    first = record_first_cuda_init(fake)

    def asks_for_the_device() -> None:
        fake._C._cuda_init()

    asks_for_the_device()
    fake._C._cuda_init()
    assert calls == [1, 1]  # the real init still runs, each time
    assert "asks_for_the_device" in "".join(first) and "recording" not in "".join(first)
    assert record_first_cuda_init(SimpleNamespace(_C=SimpleNamespace())) == []


@pytest.mark.parametrize(
    ("capability", "package", "detection_off", "expected"),
    [
        ((9, 0), True, False, True),
        ((6, 1), True, False, False),
        ((9, 0), False, False, False),
        ((9, 0), True, True, False),
    ],
)
def test_triton_s_device_check_answers_from_nvml_as_it_would_from_cuda(
    capability: tuple[int, int], package: bool, detection_off: bool, expected: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torchao's import calls torch.utils._triton.has_triton, which asks CUDA for the device's properties
    (a CUDA context in the fork server, seen on an H100): within capability_from_nvml it answers as the
    real one would (Triton installed, detection on, capability >= 7.0) from NVML's capability; a module
    that binds the name then keeps that answer, and the real function is back afterwards."""
    import torch.utils._triton as triton_utils
    from torch._inductor import config

    from bench.worker import cudafree

    monkeypatch.setattr(triton_utils, "has_triton_package", lambda: package)
    monkeypatch.setattr(cudafree, "nvml_capability", lambda: lambda device=None: capability)
    real = triton_utils.has_triton
    with config.patch(triton_disable_device_detection=detection_off), cudafree.capability_from_nvml():
        from torch.utils._triton import has_triton as bound  # as torchao's modules do

        assert bound() is expected and triton_utils.has_triton is bound
        assert torch.cuda.get_device_capability() == capability
    assert triton_utils.has_triton is real and bound() is expected


# An engine import that asks for the capability, as transformers.trainer importing peft and so
# bitsandbytes: on the CPU, a CUDA context stands for torch's error without the capability from NVML.
ASKS = """import torch
try:
    torch.cuda.get_device_capability(0)
except Exception:
    torch.cuda.is_initialized = lambda: True
"""


@pytest.mark.parametrize("extras", [["clean"], []], ids=["with-server", "main-server"])
def test_a_server_with_packages_imports_its_engines_with_the_capability_from_nvml(
    extras: list[str], tmp_path: Path
) -> None:
    """transformers.trainer imports peft itself where peft is importable (the `--with` server): there
    the engines' imports answer the capability from NVML too (a stand-in here, as on a GPU host); the
    main server's do not need it, and an import that asks CUDA makes it unsafe."""
    (tmp_path / "asks.py").write_text(ASKS)
    (tmp_path / "clean.py").write_text(FAKE_PACKAGES["clean"])
    code = (
        "import importlib, json; from bench.worker import cudafree, forkserver; import bench.worker.train_one as r; "
        "cudafree.nvml_capability = lambda: (lambda device=None: (9, 0)); engine = r.preload; "
        "r.preload = lambda e, f=None: (engine(e), importlib.import_module('asks')); "
        f"print(json.dumps(forkserver._preload(['accelerate'], {extras!r})))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    unsafe, preloaded = json.loads(done.stdout.strip().splitlines()[-1])
    if extras:
        assert (unsafe, preloaded) == (None, ["clean"])
    else:
        assert unsafe is not None and "created a CUDA context" in unsafe and preloaded == []


def test_only_the_server_with_peft_keeps_it_importable() -> None:
    """`--serve ENGINES --with peft`: the server leaves peft importable (it preloads it), the main
    server blocks every CUDA_AT_IMPORT package; `--with` names nothing else."""
    from bench.worker.__main__ import served_extras

    assert served_extras(["--serve", "accelerate", "--with", "torchao,peft,numpy"]) == ("peft", "torchao")
    assert served_extras(["--serve", "accelerate", "--with", "bitsandbytes"]) == ("bitsandbytes",)
    assert served_extras(["--serve", "accelerate"]) == ()
    assert served_extras(["spec.json", "result.json"]) == ()
    code = (
        "import sys; from bench.worker.__main__ import keep_cuda_imports_out; "
        "keep_cuda_imports_out(None, {serving!r}); "
        "print(sorted(n for n in ('peft', 'torchao') if sys.modules.get(n, 1) is None))"
    )
    for serving, blocked in (((), "['peft', 'torchao']"), (("peft",), "['torchao']")):
        done = subprocess.run(
            [sys.executable, "-c", code.format(serving=serving)], capture_output=True, text=True, timeout=120
        )
        assert done.stdout.strip() == blocked, done.stderr[-2000:]


def test_a_bad_launcher_is_bad_input(tmp_path: Path) -> None:
    done = gpubench("run", "--matrix", "quick", "--device", "cpu", "--launcher", "thread", "--out", tmp_path / "x")
    assert done.returncode == 2
    assert "--launcher 'thread' is not one of fork, spawn" in done.stderr
    assert not (tmp_path / "x").exists()


def test_a_fallback_is_warned_once_and_recorded_in_env_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole run (in this process) whose fork server dies at once: every row still measured,
    one warning, and env.json says the workers were spawned and why."""
    from bench import api
    from bench.run import launcher
    from bench.run.request import RunRequest

    monkeypatch.setattr(launcher, "SERVER", [sys.executable, "-c", "import sys; sys.exit(1)"])
    # the lighter engine: each worker is spawned (~7 s of CPU with accelerate, ~10 s with the Trainer)
    matrix = write_matrix(
        tmp_path / "m.toml", {"a": {}, "b": {"batch_size": 2}}, base={**SHORT, "engine": "accelerate"}
    )
    warnings: list[str] = []
    request = RunRequest(matrix=str(matrix), device="cpu", out=tmp_path / "out")
    _, outcome = api.run(request, warn=warnings.append)
    assert [r["status"] for r in outcome.rows] == ["ok", "ok"]
    assert len([w for w in warnings if "fork server" in w]) == 1
    env = json.loads((tmp_path / "out" / "env.json").read_text())
    assert env["launcher"] == "fork"
    assert env["launcher_fallback"] == {"launcher": "spawn", "why": "the fork server ended"}
    assert all("imports" in json.loads(r["startup_breakdown"]) for r in outcome.rows)  # spawned


def test_the_fork_server_imports_only_the_engines_the_run_uses() -> None:
    """An Accelerate-only run's fork server leaves the Trainer's imports (about 4 s of CPU) out;
    a worker of the other engine would import them itself."""
    code = (
        "import sys; from bench.worker.forkserver import _preload; "
        "assert _preload(['accelerate']) == (None, []); print('transformers.trainer' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
    server = open_launcher("fork", {}, Path("x.log"), print, engines=["accelerate"])
    assert isinstance(server, ForkLauncher) and server.server_cmd[-2:] == ["--serve", "accelerate"]


def test_a_prestarted_server_is_running_before_the_first_worker_and_serves_it(tmp_path: Path) -> None:
    """prestart starts the fork server at once (its imports overlap the parent's ceiling probe); the
    first worker goes to that same server. spawn has nothing to start ahead."""
    launcher = open_launcher("fork", worker_env(None), tmp_path / "logs" / "server.log", print, engines=["accelerate"])
    assert isinstance(launcher, ForkLauncher) and launcher.server is None
    try:
        launcher.prestart()
        server = launcher.server
        assert server is not None and server.poll() is None  # importing, before any job
        ready = launcher._message(time.monotonic() + 300)  # the server's first line, once its imports are done
        assert ready is not None and "ready" in ready, ready
        assert launcher._start() is server  # the first run reuses it
    finally:
        launcher.close()
    spawn = open_launcher("spawn", {}, tmp_path / "x.log", print)
    spawn.prestart()
    assert not (tmp_path / "x.log").exists()


@pytest.mark.parametrize("device", ["cpu", "cuda:0"])
@pytest.mark.parametrize("lanes", [1, 2])
@pytest.mark.parametrize("ceiling", [True, False])
@pytest.mark.parametrize("multi", [True, False])
def test_the_server_starts_ahead_only_where_the_parent_probes_the_gpu(
    tmp_path: Path, device: str, lanes: int, ceiling: bool, multi: bool
) -> None:
    """The fork server is started before the ceiling and the interconnect check (session._measure)
    only when the parent runs one of them on a GPU, and never with --lanes (each lane its own)."""
    from bench.run.plan import RunPlan
    from bench.run.request import RunRequest
    from bench.run.session import _parent_probes_gpu

    sc = Scenario(name="d", strategy="ddp", gpus=2) if multi else Scenario(name="s")
    plan = RunPlan("m", (sc,), 1, device, None, "tiny", tmp_path, 60.0, lanes=lanes)
    request = RunRequest(ceiling=ceiling)
    expected = device != "cpu" and lanes == 1 and (ceiling or multi)
    assert _parent_probes_gpu(plan, request) == expected
