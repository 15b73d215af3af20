"""`python -m validation.interleaved`: the engine and the loop in one process, in alternating
blocks, end to end on the CPU with the tiny model, where its figures mean nothing (the GPU figures
are in results/engine-vs-loop/interleaved). The statistics: test_interleave_stats.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from harness import REPO, write_matrix
from tvstub import real_torchvision, write_stub

pytestmark = pytest.mark.validation

SCRIPT = [sys.executable, "-m", "validation.interleaved"]
HANG_GUARD_S = 3600  # only a hang reaches this: the run below takes minutes even on a busy 2-core CPU


def run(out: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [*SCRIPT, "--out", str(out), "--device", "cpu", *args]
    return subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, timeout=HANG_GUARD_S, stdin=subprocess.DEVNULL, env=env
    )


def test_interleaved_runs_each_kind_in_both_build_orders_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "il"
    # kept small: each result is a process of its own (torch, transformers, two models); the A/A
    # control and the sampler's cost pair the loop with itself, which the engine kind already runs
    args = ["--only", "fp32-b4,tf32-b4", "--trackers", "fp32-b4", "--pairs", "8"]
    done = run(out, *args, "--block-steps", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    names = {p.name for p in out.glob("*.json")}
    for stem in ("fp32-b4", "tf32-b4", "fp32-b4-trackers"):  # half the pairs in each order
        assert {f"{stem}.json", f"{stem}-a-first.json"} <= names
    table = pd.read_csv(out / "interleaved.csv")
    pooled = table[table["run"] == "pooled"].set_index("kind")
    assert sorted(pooled.index) == ["engine", "trackers"]
    assert set(pooled["built_first"]) == {"a,b"} and set(pooled["units"]) == {4}  # 2 processes x 4 pairs
    assert "CUDA" in table.dropna(subset=["skipped"]).set_index("scenario").loc["tf32-b4", "skipped"].iloc[0]
    engine = json.loads((out / "fp32-b4.json").read_text())
    assert engine["a"] == "the Accelerate engine" and engine["b"].startswith("the reference loop")
    assert engine["built_first"] == "b" and json.loads((out / "fp32-b4-a-first.json").read_text())["built_first"] == "a"
    assert [b["side"] for b in engine["blocks"][:4]] == ["a", "b", "b", "a"]
    assert len(engine["blocks"]) == 8 and all(b["seconds"] > 0 and b["samples"] == 4 for b in engine["blocks"])
    for block in engine["blocks"]:  # traced: where each block's time went
        assert 0 < block["host_s"] <= block["seconds"] and block["thread_cpu_s"] > 0
        assert len(block["step_ms"]) == 1 and block["threads"] >= 1 and block["gc"] >= 0
    assert 0 < engine["summary"]["b_host_share"] <= 1 and engine["summary"]["a_step_p50_ms"] > 0
    # where the process's time went: each phase in order, adding up to the whole, the pairs within it
    phases = engine["phases_s"]
    assert list(phases) == ["torch_imported", "sides_built", "sampler_started", "pairs_done", "done", "total"]
    assert all(v >= 0 for v in phases.values())
    assert sum(v for k, v in phases.items() if k != "total") == pytest.approx(phases["total"], abs=0.01)
    assert phases["pairs_done"] >= sum(b["seconds"] for b in engine["blocks"])
    assert json.loads((out / "fp32-b4-trackers.json").read_text())["b"].startswith("the Accelerate engine without")

    # run again: every result is kept, nothing runs
    before = {p.name: p.stat().st_mtime for p in out.glob("*.json")}
    again = run(out, *args)
    assert again.returncode == 0 and "+ " not in again.stderr
    assert {p.name: p.stat().st_mtime for p in out.glob("*.json")} == before


def test_interleaved_refuses_an_odd_number_of_pairs_an_unknown_scenario_and_a_removed_kind(tmp_path: Path) -> None:
    odd = run(tmp_path / "x", "--pairs", "3")
    assert odd.returncode == 2 and "--pairs must be even" in odd.stderr
    not_split = run(tmp_path / "x", "--pairs", "6")  # 3 pairs per build order
    assert not_split.returncode == 2 and "multiple of 4" in not_split.stderr
    assert run(tmp_path / "x", "--pairs", "6", "--build-first", "b", "--time-limit", "0").returncode == 4
    unknown = run(tmp_path / "x", "--only", "fp32-b5", "--time-limit", "0")
    assert unknown.returncode == 2 and "fp32-b5" in unknown.stderr and "fp32-b4" in unknown.stderr
    assert unknown.stderr.startswith("validation.interleaved: error:")
    removed = run(tmp_path / "x", "--tracker-change", "fp16-b4")  # research, archived at lab-h200-2026-11
    assert removed.returncode == 2 and "unrecognized arguments: --tracker-change" in removed.stderr


def test_any_matrix_interleaves_its_engine_with_model_loop_and_a_fabric_row_with_fabrics_loop(tmp_path: Path) -> None:
    """--matrix: a Fabric ViT row against the talk's Fabric loop, an Accelerate row against the
    plain loop (validation/model_loop.py) and against the bare engine, a plain PyTorch row against the
    plain loop, one process each; a Trainer
    row is refused. The scenario's own window (longer than the interleaving's blocks, as
    fabric-vit's) is not used. A run cut by --time-limit tables what finished."""
    base = {"model": "vit-tiny", "batch_size": 2, "samples": 80, "seq_len": 32, "warmup_steps": 1, "window": 30}
    matrix = write_matrix(
        tmp_path / "m.toml",
        {
            "fab": {"engine": "fabric", "precision": "bf16-mixed"},
            "acc": {"engine": "accelerate"},
            "pt": {"engine": "torch"},
            "tr": {"engine": "trainer"},
        },
        base=base,
    )
    out = tmp_path / "il"
    common = ["--matrix", str(matrix), "--pairs", "4", "--build-first", "b", "--block-steps", "1"]
    done = run(out, *common, "--only", "fab,acc,pt", "--bare-engine", "acc", "--profile-block")
    assert done.returncode == 0, done.stderr[-3000:]
    fab, acc, pt, bare = (json.loads((out / f"{n}.json").read_text()) for n in ("fab", "acc", "pt", "acc-bare-engine"))
    assert (
        fab["a"] == "gpubench's fabric engine"
        and fab["b"] == "validation/model_loop.py's loop (Fabric's, as the talk's scripts)"
    )
    assert acc["a"] == "gpubench's accelerate engine" and acc["b"] == "validation/model_loop.py's loop"
    assert pt["a"] == "gpubench's torch engine" and pt["b"] == "validation/model_loop.py's loop"
    assert bare["a"].startswith("gpubench's accelerate engine without") and len(bare["blocks"]) == 8
    assert fab["matrix"] == str(matrix) and fab["precision"] == "bf16" and fab["loop_feed"] == "loader"
    assert len(fab["blocks"]) == 8 and all(b["seconds"] > 0 and b["samples"] == 2 for b in fab["blocks"])
    for side in ("a", "b"):  # --profile-block: one more block a side under torch.profiler, after the pairs
        profiled = fab["profile"][side]
        assert profiled["steps"] == 1  # the block's one step (at most PROFILE_STEPS)
        assert profiled["trace"] == f"fab-{side}.trace.json.gz" and (out / profiled["trace"]).stat().st_size > 0
        assert profiled["step_ms"] > 0 and profiled["cpu_ops_total_ms"] > 0 and profiled["cpu_ops"][0]["calls"] > 0
        assert set(profiled["kernels_ms"]) >= {"gemm", "optimizer", "idle"}
    table = pd.read_csv(out / "interleaved.csv")
    assert set(table["scenario"]) == {"fab", "acc", "pt"} and set(table["kind"]) == {"engine", "bare-engine"}
    assert table["profile_gap"].str.startswith("step a ").all()
    env = json.loads((out / "env.json").read_text())  # the machine, as a run writes it
    assert env["device"] == "cpu" and env["command"].startswith("python -m validation.interleaved --out")

    cut = tmp_path / "cut"  # fab finished, acc not started when the time ran out
    assert run(cut, *common, "--only", "fab", "--loop-feed", "slices").returncode == 0
    (cut / "interleaved.csv").unlink()
    assert run(cut, *common, "--only", "fab,acc", "--time-limit", "0").returncode == 4
    assert set(pd.read_csv(cut / "interleaved-partial.csv")["scenario"]) == {"fab"}
    assert not (cut / "interleaved.csv").exists()  # make bench takes that file as the part's end
    assert json.loads((cut / "fab.json").read_text())["loop_feed"] == "slices"
    refused = run(tmp_path / "x", "--matrix", str(matrix), "--only", "tr", "--pairs", "4", "--build-first", "b")
    assert (
        refused.returncode == 2
        and "interleaving needs one process, the accelerate or fabric or torch engine" in refused.stderr
    )


def test_torchvisions_vit_interleaves_with_the_same_loop_on_each_engine(tmp_path: Path) -> None:
    """fabric-vit's torchvision rows (`tv-plain`, `tv-fabric-bf16`) against their loops: the family's
    model on both sides (torchvision's own where it imports, else tests/tvstub.py's, on the
    children's PYTHONPATH), the torch engine against the plain loop and Fabric against Fabric's."""
    paths = [] if real_torchvision() else [str(write_stub(tmp_path / "stub"))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")])}
    base = {"model": "tv-vit-tiny", "batch_size": 2, "samples": 16, "warmup_steps": 1, "window": 4}
    tv = {"attn_implementation": "default"}  # torchvision's attention is nn.MultiheadAttention
    rows = {"tv-pt": {**tv, "engine": "torch", "precision": "fp32"}, "tv-fab": {**tv, "precision": "bf16-mixed"}}
    matrix = write_matrix(tmp_path / "m.toml", rows, base={**base, "engine": "fabric"})
    out = tmp_path / "il"
    done = run(out, "--matrix", str(matrix), "--only", "tv-pt,tv-fab", "--pairs", "2", "--build-first", "b",
               "--block-steps", "1", env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    pt, fab = (json.loads((out / f"{n}.json").read_text()) for n in ("tv-pt", "tv-fab"))
    assert pt["a"] == "gpubench's torch engine" and pt["b"] == "validation/model_loop.py's loop"
    assert fab["b"] == "validation/model_loop.py's loop (Fabric's, as the talk's scripts)"
    for result in (pt, fab):
        assert result["model"] == "tv-vit-tiny"
        assert len(result["blocks"]) == 4 and all(b["seconds"] > 0 and b["samples"] == 2 for b in result["blocks"])
    assert set(pd.read_csv(out / "interleaved.csv")["scenario"]) == {"tv-pt", "tv-fab"}


def test_the_sampler_helper_ends_on_its_command_while_a_forked_child_holds_its_pipe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A DataLoader worker forked after the sampler helper started holds its stdin pipe open, so the
    end of that pipe never reaches the helper: it ends on `exit` (the real helper, which opens NVML
    only when switched on, so it runs here), and a helper that does not is killed, not waited on
    for ever, so that the measured blocks are written."""
    import os
    import signal
    import time

    from validation import interleaved

    monkeypatch.setattr(interleaved, "ANSWER_TIMEOUT_S", 5.0)
    monkeypatch.setattr(interleaved, "HELPER_END_S", 5.0)
    helper = [*SCRIPT, "--sampler-helper", "GPU-none", "--pgid", str(os.getpgid(0))]
    deaf = [
        sys.executable,
        "-c",
        "import sys; print('ok', flush=True); sys.stdin.readline(); __import__('time').sleep(600)",
    ]
    for cmd, code in ((helper, 0), (deaf, -signal.SIGKILL)):
        switch = interleaved.SamplerSwitch("GPU-none", cmd=cmd)
        child = os.fork()
        if child == 0:  # a DataLoader worker: it inherits the write end of the helper's stdin
            time.sleep(120)
            os._exit(0)
        try:
            switch.close()
            assert switch.proc.returncode == code
        finally:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
