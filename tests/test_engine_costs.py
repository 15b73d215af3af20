"""`benchmarks/engine_costs.py`: what each piece of the Accelerate engine's step costs the host.

Run end to end on the CPU with the tiny model, where its figures mean nothing (the GPU figures are
in results/h200-bert-large/engine-costs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from harness import REPO

SCRIPT = [sys.executable, str(REPO / "benchmarks" / "engine_costs.py")]


def run(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [*SCRIPT, "--out", str(out), *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)


def test_engine_costs_times_every_piece_and_adds_up_each_share(tmp_path: Path) -> None:
    out = tmp_path / "costs"
    done = run(out, "--only", "fp32-b4,bf16-b4", "--device", "cpu", "--rounds", "3", "--calls", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    results = {n: json.loads((out / f"{n}-costs.json").read_text()) for n in ("fp32-b4", "bf16-b4")}
    for result in results.values():
        pieces = result["pieces"]
        assert set(pieces) == {
            "loader", "loop batch", "lomo check", "signature", "outputs fp32",
            "accumulate", "loss / steps", "loss tracker", "step clock",
        }  # fmt: skip
        assert all(p["p10_us"] <= p["median_us"] <= p["p90_us"] and p["median_us"] > 0 for p in pieces.values())
        share = {"accelerate": 0.0, "gpubench": 0.0}
        for piece, who in (
            ("loader", "accelerate"),
            ("loop batch", "accelerate"),
            ("lomo check", "accelerate"),
            ("signature", "accelerate"),
            ("outputs fp32", "accelerate"),
            ("accumulate", "accelerate"),
            ("loss / steps", "accelerate"),
            ("loss tracker", "gpubench"),
            ("step clock", "gpubench"),
        ):
            share[who] += pieces[piece]["per_step"] * pieces[piece]["median_us"]
        extra = result["extra_us"]
        assert extra["accelerate"] == pytest.approx(share["accelerate"]) and extra["gpubench"] == pytest.approx(
            share["gpubench"]
        )
        assert extra["total"] == pytest.approx(share["accelerate"] + share["gpubench"])
        assert pieces["loop batch"]["per_step"] == -1 and pieces["lomo check"]["per_step"] == 2
    # accelerate converts the outputs to fp32 under mixed precision only
    assert results["fp32-b4"]["pieces"]["outputs fp32"]["per_step"] == 0
    assert results["bf16-b4"]["pieces"]["outputs fp32"]["per_step"] == 1
    assert "lomo check" in done.stdout  # each scenario's table is printed
    table = pd.read_csv(out / "engine-costs.csv")
    totals = table[table["piece"] == "extra per step: total"].set_index("scenario")["median_us"]
    assert totals.to_dict() == pytest.approx({n: r["extra_us"]["total"] for n, r in results.items()})

    # run again: finished scenarios are kept
    before = {p.name: p.stat().st_mtime for p in out.glob("*.json")}
    again = run(out, "--only", "fp32-b4,bf16-b4", "--device", "cpu")
    assert again.returncode == 0 and again.stderr.count("finished, skipped") == 2
    assert {p.name: p.stat().st_mtime for p in out.glob("*.json")} == before


def test_engine_costs_refuses_an_unknown_scenario_in_one_line(tmp_path: Path) -> None:
    done = run(tmp_path / "x", "--only", "fp16-b5", "--device", "cpu")
    assert done.returncode == 2 and done.stderr.startswith("engine_costs.py: error:")
    assert "fp16-b5" in done.stderr and "fp16-b4" in done.stderr


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_engine_costs_without_a_gpu_says_how_to_run_it_on_the_cpu(tmp_path: Path) -> None:
    done = run(tmp_path / "x", "--only", "fp16-b4")
    assert done.returncode == 2 and "--device cpu" in done.stderr and len(done.stderr.strip().splitlines()) == 1
