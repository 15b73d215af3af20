"""`benchmarks/interleaved.py`: the engine and the loop in one process, in alternating blocks.

The statistics are tested on made-up blocks (a drifting CPU, a real gap); the script end to end on
the CPU with the tiny model, where its figures mean nothing (the GPU figures are in
results/h200-bert-large/interleaved)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd
import pytest
from harness import REPO

SCRIPT = [sys.executable, str(REPO / "benchmarks" / "interleaved.py")]


@pytest.fixture(scope="module")
def il() -> Iterator[ModuleType]:
    """benchmarks/interleave_stats.py"""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import interleave_stats

        yield interleave_stats
    finally:
        sys.path.remove(str(REPO / "benchmarks"))


def blocks(speed_at: Any, a_factor: float, pairs: int = 40, seconds: float = 0.5) -> list[dict[str, Any]]:
    """Blocks as measure() records them, a b | b a | a b ...: each block's samples/s is the CPU's
    speed at its start (speed_at(i), i counting blocks) times a_factor for side a."""
    out, i = [], 0
    for pair in range(pairs):
        for side in ("a", "b") if pair % 2 == 0 else ("b", "a"):
            rate = speed_at(i) * (a_factor if side == "a" else 1.0)
            out.append(
                {"pair": pair, "side": side, "start_s": i * seconds, "seconds": seconds, "samples": rate * seconds}
            )
            i += 1
    return out


def test_alternating_units_cancel_a_drifting_cpu_and_find_a_real_gap(il: ModuleType) -> None:
    slowing = lambda i: 60.0 * 0.99**i  # noqa: E731 - 1% slower every block: 0.45x over the run
    same = il.summarize(blocks(slowing, 1.0))
    assert same["ratio"] == pytest.approx(1.0, abs=1e-9)  # a b b a: a linear (in log) drift cancels
    assert same["within_3pct"] is True and same["ci_low"] <= 1.0 <= same["ci_high"]
    # each pair alone blames whichever side ran first; only the units are fair
    assert same["ratio_a_first"] == pytest.approx(1 / 0.99) and same["ratio_b_first"] == pytest.approx(0.99)

    swinging = lambda i: 60.0 * (1.8 if (i // 2) % 3 == 0 else 1.0)  # noqa: E731 - 1.8x swings, pair by pair
    gap = il.summarize(blocks(swinging, 0.95))
    assert gap["ratio"] == pytest.approx(0.95, abs=1e-9) and gap["within_3pct"] is False
    assert gap["a_block_cv_pct"] > 30  # each side's blocks swing; the ratio does not
    assert gap["units"] == 20 and gap["pairs"] == 40


def test_collect_pools_the_units_of_every_run(il: ModuleType, tmp_path: Path) -> None:
    for run, factor, first in (("run1", 0.96, "b"), ("run2", 0.97, "a")):
        (tmp_path / run).mkdir()
        (tmp_path / run / "env.json").write_text(json.dumps({"gpu": {"uuid": f"GPU-{run}"}}))
        result = {"scenario": "fp16-b4", "kind": "engine", "sampler": True, "blocks": blocks(lambda i: 50.0, factor)}
        result |= {"built_first": first} if first == "a" else {}  # a result from before --build-first: b
        (tmp_path / run / "fp16-b4.json").write_text(json.dumps(result))
    frame = il.collect(tmp_path).set_index("run")
    assert frame.loc["run1", "gpu_uuid"] == "GPU-run1" and frame.loc["run2", "ratio"] == pytest.approx(0.97)
    assert frame.loc["run1", "built_first"] == "b" and frame.loc["run2", "built_first"] == "a"
    assert frame.loc["pooled", "units"] == 40 and frame.loc["pooled", "built_first"] == "a,b"
    assert frame.loc["pooled", "ratio"] == pytest.approx((0.96 * 0.97) ** 0.5)
    assert frame.loc["pooled", "processes"] == 2
    assert frame.loc["pooled", "process_ci_low"] <= frame.loc["pooled", "ci_low"]  # never narrower


def test_pooled_interval_widens_when_the_processes_disagree(il: ModuleType, tmp_path: Path) -> None:
    """Three processes, each steady in itself (0.95, 1.00, 1.05): the units alone put the pooled
    ratio within 3%; resampled by process, it is not, and the row says so."""
    for run, factor in (("run1", 0.95), ("run2", 1.0), ("run3", 1.05)):
        (tmp_path / run).mkdir()
        result = {"scenario": "bf16-b4", "kind": "engine", "sampler": True, "blocks": blocks(lambda i: 50.0, factor)}
        (tmp_path / run / "bf16-b4.json").write_text(json.dumps(result))
    pooled = il.collect(tmp_path).set_index("run").loc["pooled"]
    assert pooled["processes"] == 3 and pooled["units"] == 60
    assert pooled["ratio"] == pytest.approx((0.95 * 1.0 * 1.05) ** (1 / 3))
    assert pooled["ci_low"] >= 0.97 and pooled["ci_high"] <= 1.03  # the units alone: within 3%
    assert pooled["process_ci_low"] < 0.97 and pooled["process_ci_high"] > 1.03
    assert not pooled["within_3pct"]


def run(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [*SCRIPT, "--out", str(out), "--device", "cpu", *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_interleaved_runs_each_kind_in_both_build_orders_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "il"
    args = ["--only", "fp32-b4,tf32-b4", "--control", "fp32-b4", "--trackers", "fp32-b4", "--pairs", "8"]
    args += ["--accelerate-steps", "fp32-b4"]
    done = run(out, *args, "--block-steps", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    names = {p.name for p in out.glob("*.json")}
    stems = ("fp32-b4", "tf32-b4", "fp32-b4-control", "fp32-b4-trackers", "fp32-b4-accelerate-steps")
    for stem in stems:  # half the pairs in each order
        assert {f"{stem}.json", f"{stem}-a-first.json"} <= names
    table = pd.read_csv(out / "interleaved.csv")
    pooled = table[table["run"] == "pooled"].set_index("kind")
    assert sorted(pooled.index) == ["accelerate-steps", "control", "engine", "trackers"]
    assert set(pooled["built_first"]) == {"a,b"} and set(pooled["units"]) == {4}  # 2 processes x 4 pairs
    assert "CUDA" in table.dropna(subset=["skipped"]).set_index("scenario").loc["tf32-b4", "skipped"].iloc[0]
    engine = json.loads((out / "fp32-b4.json").read_text())
    assert engine["a"] == "the Accelerate engine" and engine["b"].startswith("the reference loop")
    assert engine["built_first"] == "b" and json.loads((out / "fp32-b4-a-first.json").read_text())["built_first"] == "a"
    assert [b["side"] for b in engine["blocks"][:4]] == ["a", "b", "b", "a"]
    assert len(engine["blocks"]) == 8 and all(b["seconds"] > 0 and b["samples"] == 4 for b in engine["blocks"])
    assert json.loads((out / "fp32-b4-trackers.json").read_text())["b"].startswith("the Accelerate engine without")
    steps = json.loads((out / "fp32-b4-accelerate-steps.json").read_text())
    assert steps["a"] == "the Accelerate engine" and "without accelerate's per-step code" in steps["b"]

    # run again: every result is kept, nothing runs
    before = {p.name: p.stat().st_mtime for p in out.glob("*.json")}
    again = run(out, *args)
    assert again.returncode == 0 and "+ " not in again.stderr
    assert {p.name: p.stat().st_mtime for p in out.glob("*.json")} == before


def test_interleaved_refuses_an_odd_number_of_pairs_and_an_unknown_scenario(tmp_path: Path) -> None:
    odd = run(tmp_path / "x", "--pairs", "3")
    assert odd.returncode == 2 and "--pairs must be even" in odd.stderr
    not_split = run(tmp_path / "x", "--pairs", "6")  # 3 pairs per build order
    assert not_split.returncode == 2 and "multiple of 4" in not_split.stderr
    assert run(tmp_path / "x", "--pairs", "6", "--build-first", "b", "--time-limit", "0").returncode == 4
    unknown = run(tmp_path / "x", "--only", "fp32-b5", "--time-limit", "0")
    assert unknown.returncode != 0 and "fp32-b5" in unknown.stderr and "fp32-b4" in unknown.stderr


def test_the_raw_accelerate_side_trains_the_engines_model_without_accelerates_per_step_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--accelerate-steps`: side b steps the engine's own prepared model, optimizer and data, and
    none of accelerate's per-step code runs in it (the engine's step, beside it, runs all of it)."""
    import dataclasses

    import torch

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import interleave_sides as sides

    from bench.worker import accelerate_engine
    from bench.worker.run import build_inputs

    sc = dataclasses.replace(sides.scenario("bf16-b4"), samples=16, seq_len=32, warmup_steps=1)
    inputs = build_inputs(sc, "tiny", torch.device("cpu"), tmp_path, {})
    engine = accelerate_engine.setup(inputs)
    inputs.clock.train_begin()
    assert hasattr(engine.model, "_original_forward")  # accelerate wrapped bf16's forward in autocast
    raw = sides.raw_accelerate_step(engine)

    calls: list[str] = []

    def counting(name: str, method: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return method(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(engine.model, "forward", counting("forward wrapper", engine.model.forward))
    for cls, name in [
        (type(engine.optimizer), "step"),
        (type(engine.optimizer), "zero_grad"),
        (type(engine.accelerator), "backward"),
        (type(engine.accelerator), "accumulate"),
        (type(engine.loader), "__iter__"),
    ]:
        monkeypatch.setattr(cls, name, counting(name, getattr(cls, name)))

    before = [p.detach().clone() for p in engine.optimizer.optimizer.param_groups[0]["params"][:3]]
    raw()
    raw()
    assert calls == []
    after = engine.optimizer.optimizer.param_groups[0]["params"][:3]
    assert any(not torch.equal(b, a) for b, a in zip(before, after, strict=True))  # it trained
    assert engine.inputs.losses.result()["loss_finite"]  # the raw steps tracked their losses

    engine.step(next(iter(engine.loader)))  # the engine's own step, for contrast
    assert {"forward wrapper", "step", "zero_grad", "backward", "accumulate", "__iter__"} <= set(calls)
