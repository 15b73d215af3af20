"""gpubench recommend end to end on the CPU with tiny models, as a user runs it: real workers, the
memory model standing in for the cap, the finalists' loss judged, the certificate rerun by `run`."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

from harness import alive, children_of, finished, gpubench, results, start_gpubench, wait_for

from bench.results import read_results


def answered(out: Path, model: str, axes: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """recommend for a tiny decoder on the CPU at a 2 GB cap, racing `axes`: (the command, its answer)."""
    args = ["--model", model, "--seq-len", "32", "--global-batch", "8", "--device", "cpu", "--gpu-memory", "2GB"]
    args += ["--axes", axes, "--parity-steps", "12", "--budget", "10m"]
    done = gpubench("recommend", *args, "--out", out, "--format", "json", timeout=900)
    assert done.returncode == 0, done.stderr
    return done, json.loads(done.stdout)


def test_llama_tiny_gets_a_recipe_whose_certificate_run_reruns(tmp_path: Path) -> None:
    out = tmp_path / "rec"
    _, answer = answered(out, "llama-tiny", "checkpointing")
    assert answer == json.loads((out / "recommend.json").read_text(encoding="utf-8"))  # one figure everywhere
    assert answer["winner"] in {
        "fp32.b1x8.adamw",
        "fp32.b1x8.ckpt2.adamw",
        "fp32.b1x8.ckpt.adamw",
    }  # the plain micro-batch
    assert any("learnable proxy task (lm-synthetic" in n for n in answer["notes"])
    md = gpubench("report", out, "--format", "markdown")  # the report leads with the same answer
    assert md.returncode == 0 and f"**recommended (speed): {answer['winner']}" in md.stdout, md.stderr
    rows = read_results(out)
    winner = next(c for c in answer["candidates"] if c["name"] == answer["winner"])
    assert winner["parity"] == "equivalent"
    ok = rows[(rows["scenario"] == answer["winner"]) & (rows["status"] == "ok")]
    assert len(ok) == winner["probes"] >= 2  # every probe a results row, the round its repeat
    # as is: the certificate carries the probes' settings (the series --record stores)
    rerun = gpubench("run", "--matrix", out / "recommended.toml", "--out", tmp_path / "again", "--device", "cpu")
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
    # nothing runs out of memory uncapped: the largest micro-batch is raced, the smaller ones not measured
    outcome = {c["axes"]["batch"]: c["outcome"] for c in answer["candidates"]}
    assert outcome == {"b8x1": "raced", "b4x2": "skipped", "b2x4": "skipped", "b1x8": "skipped"}, outcome
    assert any("learnable proxy task (vision-synthetic" in n for n in answer["notes"])


def test_the_mixtral_style_moe_gets_a_recipe_and_every_note_reads_once(tmp_path: Path) -> None:
    """The MoE family through the whole search: its space (no Liger on the CPU, said once: a note read
    'liger: liger: a CUDA recipe'), no activation model (said), a winner judged equivalent."""
    done, answer = answered(tmp_path / "rec", "mixtral-tiny", "optimizer")
    assert sorted(c["name"].rsplit(".", 1)[1] for c in answer["candidates"]) == ["adafactor", "adamw"]
    assert any("no activations for the moe family" in n for n in answer["notes"]), answer["notes"]
    assert "liger: a CUDA recipe" in answer["notes"]
    assert not [n for n in answer["notes"] if n.split(": ")[0] == n.split(": ")[1]], answer["notes"]
    winner = next(c for c in answer["candidates"] if c["name"] == answer["winner"])
    assert winner["parity"] == "equivalent"
    # its peak is a lower bound: stored as one, never as a prediction (on an H100 qwen3's 9,159 MB sat in
    # the pred MB column beside a measured 20,048), and the table says >=
    assert winner["pred_peak_allocated_mb"] is None and winner["pred_peak_min_mb"] > 0
    rows = read_results(tmp_path / "rec")
    assert rows["pred_peak_allocated_mb"].isna().all() and rows["pred_peak_error_pct"].isna().all()
    counts = [line.split("]")[0].strip() for line in done.stderr.splitlines() if line.strip().startswith("[")]
    assert counts and all("/" not in c for c in counts), counts  # a race: no total it could pass


def test_record_stores_the_winner_and_resume_measures_nothing_twice(tmp_path: Path) -> None:
    """--record: the winner's and the plain recipe's probes go into the history (`history show`
    lists the winner). --resume with the same flags reuses every measured row (no new worker) and
    gives the same answer; with another flag it is refused in one line, before any work."""
    out, db = tmp_path / "rec", tmp_path / "history.sqlite"
    args = ["--model", "llama-tiny", "--seq-len", "16", "--global-batch", "2", "--device", "cpu", "--axes", "batch"]
    args += ["--gpu-memory", "2GB", "--probe-steps", "1", "--parity-steps", "4", "--finalists", "1"]
    args += ["--out", out, "--record", "--db", db, "--format", "json"]
    done = gpubench("recommend", *args, "--budget", "10m", timeout=900)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    winner = answer["winner"]
    assert [s["axes"] for s in answer["stages"]] == [["batch", "checkpointing", "optimizer"]]  # the memory stage
    recorded = read_results(out / "record")
    assert set(recorded["scenario"]) == {winner, "plain"} and (recorded["status"] == "ok").all()
    shown = gpubench("history", "show", "--db", db, "--scenario", winner)
    assert shown.returncode == 0 and winner in shown.stdout, shown.stderr
    before = read_results(out)

    again = gpubench("recommend", *args, "--budget", "10m", "--resume", timeout=900)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["winner"] == winner
    after = read_results(out)
    assert len(after) == len(before)  # every candidate, loss check and plain probe reused
    assert list(after["worker_wall_s"]) == list(before["worker_wall_s"])

    changed = [a if a != "2GB" else "4GB" for a in args]
    refused = gpubench("recommend", *changed, "--resume", timeout=300)
    assert refused.returncode == 2 and "made with --gpu-memory = '2GB', not '4GB'" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def test_an_exhaustive_search_stops_at_its_budget_and_resume_finishes_it(tmp_path: Path) -> None:
    """--exhaustive takes longer than one GPU sitting: its --budget ends the sitting between probes
    (exit 4, nothing judged, the resume command said) and --resume measures only what is missing."""
    out = tmp_path / "rec"
    common = ["--model", "llama-tiny", "--seq-len", "16", "--global-batch", "2", "--device", "cpu", "--axes", "batch"]
    common += ["--probe-steps", "1", "--parity-steps", "4", "--finalists", "1"]
    args = [*common, "--gpu-memory", "2GB", "--exhaustive", "--out", out, "--format", "json"]
    staged = [*common, "--gpu-memory", "2GB", "--format", "json"]  # the same question, not exhaustive
    first = gpubench("recommend", *args, "--budget", "1s", timeout=900)
    assert first.returncode == 4, first.stderr
    assert f"--out {out} --resume finishes it" in first.stderr
    early = gpubench("recommend", *staged, "--out", tmp_path / "early", "--twin", out, timeout=300)
    assert early.returncode == 2 and "the exhaustive search is unfinished" in early.stderr, early.stderr
    assert not (tmp_path / "early").exists()  # refused before any work
    answer = json.loads(first.stdout)
    assert answer["winner"] is None and answer["stopped"] == "the budget is spent"
    rows = read_results(out)
    probes = rows[~rows["scenario"].str.startswith("parity.")]
    assert len(probes) < 3 * len(answer["candidates"])  # stopped before its last probe
    again = gpubench("recommend", *args, "--budget", "10m", "--resume", timeout=900)
    assert again.returncode in (0, 1), again.stderr
    done = read_results(out)
    measured = done[~done["scenario"].str.startswith("parity.")]
    assert len(measured) == 3 * len(answer["candidates"])  # every candidate's 3 rounds, none twice
    kept = done.merge(rows[["scenario", "repeat", "worker_wall_s"]], on=["scenario", "repeat"])
    assert len(kept) == len(rows) >= 3  # the plain recipe's checks at least ran in the first sitting
    assert list(kept["worker_wall_s_x"]) == list(kept["worker_wall_s_y"])  # its rows reused, not rerun
    # the answer's time is the whole search's: the first sitting's (to the end of its last row) too
    final = json.loads(again.stdout)
    (first_s,) = final["earlier_sittings_s"]
    assert first_s >= float(rows["worker_wall_s"].max()) > 0
    assert final["search_s"] == final["wall_s"] + first_s
    # the staged search of the same question, judged on the finished twin's own probes
    judged = gpubench("recommend", *staged, "--out", tmp_path / "staged", "--twin", out, "--budget", "10m", timeout=900)
    assert judged.returncode in (0, 1), judged.stderr
    check = json.loads(judged.stdout)["twin"]
    assert check["twin"] == str(out) and check["best"] == final["winner"]
    assert (
        check["verdict"] in ("holds", "does not hold", "inconclusive") and check["twin_search_s"] == final["search_s"]
    )
    shown = gpubench("recommend", *common, "--gpu-memory", "2GB", "--out", tmp_path / "t", "--twin", out, timeout=900)
    assert f"exhaustive twin {out}: its best {final['winner']}" in shown.stdout, shown.stderr
    refused = gpubench("recommend", *common, "--gpu-memory", "4GB", "--out", tmp_path / "o", "--twin", out, timeout=300)
    assert refused.returncode == 2 and "made with --gpu-memory = '2GB', not '4GB'" in refused.stderr
    # the same question measured on another card: its best is that card's, refused before any work
    elsewhere = tmp_path / "h100"
    shutil.copytree(out, elsewhere)
    env = json.loads((elsewhere / "env.json").read_text()) | {"gpu": {"name": "NVIDIA H100 80GB HBM3"}}
    (elsewhere / "env.json").write_text(json.dumps(env), encoding="utf-8")
    other = gpubench("recommend", *staged, "--out", tmp_path / "x", "--twin", elsewhere, timeout=300)
    assert other.returncode == 2, other.stderr
    assert "measured on NVIDIA H100 80GB HBM3, and this search runs on the CPU" in other.stderr
    assert not (tmp_path / "x").exists()


def test_a_budget_the_loss_checks_use_up_says_what_it_went_on_and_what_would_race(tmp_path: Path) -> None:
    """mixtral-1b at --budget 3m on an H100: its three plain checks took 98 s, no probe ran, and the
    answer said only 'no recommendation'. Now a note says where the budget went and a budget that races."""
    out = tmp_path / "rec"
    args = ["--model", "llama-tiny", "--seq-len", "32", "--global-batch", "8", "--device", "cpu", "--gpu-memory", "2GB"]
    args += ["--axes", "optimizer", "--parity-steps", "12", "--budget", "5s"]
    done = gpubench("recommend", *args, "--out", out, "--format", "json", timeout=900)
    assert done.returncode == 1, done.stderr[-3000:]
    answer = json.loads(done.stdout)
    note = next(n for n in answer["notes"] if n.startswith("budget: the race measured nothing"))
    checks = re.search(r"plain recipe's 3 loss checks took (\d+) s of the 5 s budget and (\d+) s was kept", note)
    assert checks and int(checks[1]) > 0 and int(checks[2]) > 0, note
    assert re.search(r"about --budget \d+m lets the stage probe once$", note), note
    assert {c["outcome"] for c in answer["candidates"]} == {"skipped"}
    late = next(n for n in answer["notes"] if n.startswith("budget: the search took"))  # 5 s: the checks ran past
    assert re.search(r"--budget of 5 s: the race ended at \d+ s \(the plain recipe's checks.*ended past it\)$", late)


def test_ctrl_c_mid_race_exits_130_keeps_every_row_and_leaves_no_server_or_worker(tmp_path: Path) -> None:
    """Every fork server starts with the search (the one that preloads peft too): a Ctrl-C in the race
    ends them and their workers with the command, and the rows measured so far stay."""
    out = tmp_path / "rec"
    args = ["--model", "llama-tiny", "--seq-len", "32", "--global-batch", "8", "--device", "cpu", "--gpu-memory", "2GB"]
    args += ["--allow", "lora", "--axes", "precision,adapters", "--parity-steps", "12", "--budget", "10m"]
    proc = start_gpubench("recommend", *args, "--out", out, log_dir=tmp_path / "logs")
    try:
        # the race has started: a probe's row after the plain recipe's three checks
        wait_for("a probe's row", lambda: (f := finished(out)) is not None and len(f) >= 4, timeout=600, interval=0.05)
        below = wait_for("the fork servers", lambda: d if len(d := descendants(proc.pid)) >= 2 else set(), 60)
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=120) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = (tmp_path / "logs" / "stderr.txt").read_text()
    assert "Traceback" not in stderr
    assert wait_for("no survivor", lambda: not any(alive(pid) for pid in below), timeout=30)
    kept = results(out)  # valid, every measured row kept: the three checks and the probes before the Ctrl-C
    assert len(kept) >= 4 and set(kept["status"]) <= {"ok", "interrupted"}, kept[["scenario", "status"]]


def descendants(pid: int) -> set[int]:
    """The live processes below `pid` (its fork servers, their workers and reapers)."""
    found, todo = set(), [pid]
    while todo:
        kids = children_of(todo.pop())
        todo.extend(kids - found)
        found |= kids
    return found
