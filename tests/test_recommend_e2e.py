"""gpubench recommend end to end on the CPU with tiny models, as a user runs it: real workers, the
memory model standing in for the cap, the finalists' loss judged, the certificate rerun by `run`."""

from __future__ import annotations

import json
from pathlib import Path

from harness import gpubench

from bench.results import read_results


def test_llama_tiny_gets_a_recipe_whose_certificate_run_reruns(tmp_path: Path) -> None:
    out = tmp_path / "rec"
    args = ["--model", "llama-tiny", "--seq-len", "32", "--global-batch", "8", "--device", "cpu"]
    args += ["--gpu-memory", "2GB", "--axes", "checkpointing", "--parity-steps", "12", "--budget", "10m"]
    done = gpubench("recommend", *args, "--out", out, "--format", "json", timeout=900)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer == json.loads((out / "recommend.json").read_text(encoding="utf-8"))  # one figure everywhere
    assert answer["winner"] in {"fp32.b8x1.adamw", "fp32.b8x1.ckpt2.adamw", "fp32.b8x1.ckpt.adamw"}
    assert any("learnable proxy task (lm-synthetic" in n for n in answer["notes"])
    rows = read_results(out)
    winner = next(c for c in answer["candidates"] if c["name"] == answer["winner"])
    assert winner["parity"] == "equivalent"
    ok = rows[(rows["scenario"] == answer["winner"]) & (rows["status"] == "ok")]
    assert len(ok) == winner["probes"] >= 2  # every probe a results row, the round its repeat
    again = ["--out", tmp_path / "again", "--device", "cpu", "--samples", "16", "--warmup-steps", "1"]
    rerun = gpubench("run", "--matrix", out / "recommended.toml", *again)
    assert rerun.returncode == 0, rerun.stderr
    assert sorted(read_results(tmp_path / "again")["scenario"]) == sorted(["plain", answer["winner"]])


def test_a_vit_gets_a_recipe_and_is_told_its_probes_were_not_capped_on_the_cpu(tmp_path: Path) -> None:
    """The memory model has no activations for ViT: on the CPU nothing stands in for an out-of-memory
    at the cap, and the answer says so (prune by the lower bound alone: tests/test_recommend.py)."""
    out = tmp_path / "rec"
    args = ["--model", "vit-tiny", "--global-batch", "8", "--device", "cpu", "--axes", "batch"]
    args += ["--gpu-memory", "2GB", "--parity-steps", "8", "--budget", "10m", "--finalists", "1"]
    done = gpubench("recommend", *args, "--out", out, "--format", "json", timeout=900)
    assert done.returncode in (0, 1), done.stderr
    answer = json.loads((out / "recommend.json").read_text(encoding="utf-8"))
    assert any("no probe stands in for an out-of-memory" in n for n in answer["notes"])
    assert {c["outcome"] for c in answer["candidates"]} <= {"raced", "eliminated"}
    assert any("learnable proxy task (vision-synthetic" in n for n in answer["notes"])
