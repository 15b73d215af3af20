"""`gpubench run` end to end on the CPU: real worker subprocesses, the tiny model, a small workload.

One run of the quick matrix is shared by the tests of this module (each worker costs seconds)."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
from harness import BASE, SHORT, gpubench, leftover_temp_files, results, statuses, write_matrix

from bench import cpus
from bench.planner.matrix import load_matrix
from bench.recipe.scenario import Scenario
from bench.results import COLUMNS, ENV_JSON, PREDICTED_COLUMNS, RESULTS_CSV, SCENARIOS_JSON

pytestmark = pytest.mark.slow

# 12 samples: 3 optimizer steps of 4 samples (batch 4, or batch 1 x accumulation 4), 1 of them warm-up
QUICK = ["--matrix", "quick", "--device", "cpu", "--samples", "12", "--seq-len", "32", "--warmup-steps", "1"]


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("quick") / "run"
    done = gpubench("run", *QUICK, "--report", "--out", str(out), timeout=600)
    return done, out


def test_quick_run_exits_0_and_prints_a_summary(quick: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    done, out = quick
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert f"results: {out / RESULTS_CSV}" in done.stderr
    assert f"report:  {out / 'report.html'}" in done.stderr and (out / "report.html").is_file()
    assert "a smoke test of the harness, not findings about any hardware" in done.stderr  # on the CPU
    assert "quick on cpu (tiny)" in done.stdout
    spent = json.loads((out / ENV_JSON).read_text())["harness_time"]  # where the run's wall time went
    assert spent["rows"] == len(load_matrix("quick").names()) - 1  # tf32 is skipped: no training loop
    assert 0 < spent["window_s"] < spent["train_loop_s"] < spent["wall_s"]
    assert f"{spent['training_share']:.0%} of it in the training loops" in done.stderr
    # the rest told apart: the parent before and after the rows, the rows' own start and end, between
    parts = ("before_rows_s", "rows_startup_s", "rows_teardown_s", "between_rows_s", "after_rows_s")
    assert all(spent[k] >= 0 for k in parts) and spent["before_rows_s"] > 0 and spent["rows_startup_s"] > 0
    assert sum(spent[k] for k in parts) + spent["train_loop_s"] == pytest.approx(spent["wall_s"], abs=0.01)
    assert f"{spent['before_rows_s']:.1f} s before the first row" in done.stderr
    # ...and the time before the first row told apart (a CPU run measures no ceiling), the rows' wait
    # for the fork server, which the CPU run starts at its first row, within their start
    before = spent["before_rows"]
    assert set(before) == {"planning_s", "environment_s"} and all(v > 0 for v in before.values())
    assert sum(before.values()) <= spent["before_rows_s"]
    assert f"before the first row (planning {before['planning_s']:.1f} s, the environment" in done.stderr
    assert 0 < spent["rows_server_wait_s"] <= spent["rows_startup_s"]
    for name in load_matrix("quick").names():
        assert name in done.stdout


def test_profile_writes_a_trace_and_the_breakdown_and_the_gpu_columns_say_why_they_are_empty(
    tmp_path: Path,
) -> None:
    """16 samples of batch 4: 1 warm-up step, 2 timed, and the last one profiled (--profile 1)."""
    from bench.measure.gpuwatch import GpuProbe
    from bench.measure.kernels import COLUMNS as KERNELS

    matrix = write_matrix(tmp_path / "m.toml", {"baseline": {}}, base=BASE)
    out = tmp_path / "run"
    done = gpubench("run", "--matrix", matrix, "--device", "cpu", "--profile", "1", "--no-report", "--out", out)
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = results(out).to_dict("records")
    assert row["window_steps"] == 2 and row["prof_steps"] == 1
    trace = json.loads((out / "logs" / row["prof_trace"]).read_text())
    assert row["prof_trace"] == "baseline-r0.trace.json" and trace["traceEvents"]  # a Chrome/Perfetto trace
    assert all(row[c] >= 0 for c in KERNELS) and row["prof_gemm_ms"] > 0  # the CPU's matmul operators
    assert row["prof_step_ms"] > 0
    # on the CPU: every GPU figure empty (never zero), the reason in gpu_reason, no bound label
    empty = [c for c in GpuProbe.columns if c != "gpu_reason"]
    assert all(isinstance(row[c], float) and math.isnan(row[c]) for c in empty), {c: row[c] for c in empty}
    assert row["gpu_reason"] == "no GPU: the worker trains on cpu"
    assert math.isnan(row["energy_per_sample_j"]) and not isinstance(row["bound"], str)


def test_quick_run_rows_and_statuses(quick: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, out = quick
    assert (out / RESULTS_CSV).read_text().splitlines()[0] == ",".join(COLUMNS)
    frame = results(out)
    names = load_matrix("quick").names()
    assert list(frame["scenario"]) == names and list(frame["repeat"]) == [0] * len(names)
    expected = {name: "ok" for name in names} | {"tf32": "skipped"}
    assert statuses(frame) == expected
    by = frame.set_index("scenario")
    assert by.loc["tf32", "error"] == "tf32 is a CUDA matmul mode (Ampere or newer); it has no meaning on the CPU"
    assert math.isnan(by.loc["tf32", "samples_per_s"])
    ok = frame[frame["status"] == "ok"]
    assert (ok["samples_per_s"] > 0).all() and (ok["tokens_per_s"] == ok["samples_per_s"] * 32).all()
    assert (ok["window_steps"] == 2).all() and (ok["window_samples"] == 8).all()
    assert (ok["cpu_loop_start_ms"] > 0).all() and (ok["cpu_loop_end_ms"] > 0).all()  # the CPU probe ran
    assert (ok["step_time_p10_ms"] <= ok["step_time_p90_ms"]).all()
    assert (ok["model_resolved"] == "tiny").all() and (frame["device"] == "cpu").all()
    assert (ok["samples"] == 12).all() and (ok["seq_len"] == 32).all()
    assert (ok["peak_mem_source"] == "rss").all() and (ok["peak_mem_mb"] > 0).all()
    assert ok["loss_finite"].all() and (ok["nonfinite_losses"] == 0).all()
    assert (ok["exit_code"] == 0).all() and (ok["worker_wall_s"] >= ok["train_loop_s"]).all()
    assert ok["model_params"].nunique() == 1 and ok["model_params"].iloc[0] > 1e6
    assert by.loc["grad-accum", "batch_size"] == 1 and by.loc["grad-accum", "grad_accum_steps"] == 4
    assert by.loc["fp16", "precision"] == "fp16" and by.loc["accelerate", "engine"] == "accelerate"
    assert by.loc["workers", "dataloader_workers"] == 2


def test_quick_run_writes_predicted_columns(quick: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    frame = results(quick[1]).set_index("scenario")
    ok = frame[frame["status"] == "ok"]
    numeric = [c for c in PREDICTED_COLUMNS if c not in ("pred_peak_phase", "pred_peak_error_pct", "pred_peak_min_mb")]
    assert ok[numeric].notna().all().all() and (ok["pred_peak_allocated_mb"] > 0).all()
    assert ok["pred_peak_min_mb"].isna().all()  # BERT's activations are predicted: a peak, not a lower bound
    assert ok["torch_max_allocated_mb"].isna().all()  # no CUDA: nothing measured by torch
    assert ok["pred_peak_error_pct"].isna().all()  # so no error either
    assert frame.loc["baseline", "pred_autocast_copies_mb"] == 0 and frame.loc["fp16", "pred_autocast_copies_mb"] > 0


def test_quick_run_writes_report_html(quick: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    done, out = quick
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "<h1>gpubench report: quick on CPU</h1>" in html
    start = html.index('<section id="problems">')
    assert "tf32 is a CUDA matmul mode" in html[start : html.index("</section>", start)]
    # speed, loss curves, memory, speed vs memory
    assert html.count("<svg ") == 4 and "could not write the HTML report" not in done.stderr


def test_quick_run_env_json(quick: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, out = quick
    env = json.loads((out / ENV_JSON).read_text())
    assert env["device"] == "cpu" and env["gpu"] is None and env["matrix"] == "quick"
    assert env["command"] == "gpubench run " + " ".join([*QUICK, "--report", "--out", str(out)])
    assert env["packages"]["torch"] and env["packages"]["transformers"] and env["torch_build"]
    assert env["cpu_count"] >= 1 and env["python"].count(".") == 2
    assert env["gpu_processes_at_start"] == []
    assert env["inductor_cache"] == str((out / "work" / "inductor-cache").resolve())
    assert env["cpu_affinity"] is None  # not pinned: each row says which CPUs its worker had
    speed = env["cpu_speed"]  # the CPU-steadiness probe ran before the workers
    assert speed["passes"] >= 4 and 0 < speed["fastest_ms"] <= speed["median_ms"] <= speed["slowest_ms"]
    assert speed["p90_over_p10"] >= 1.0
    frame = results(out)
    assert set(frame.loc[frame["status"] == "ok", "cpu_affinity"]) == {cpus.current()}


def test_torch_compile_in_a_worker_caches_in_the_run_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What torch itself makes of the workers' environment, not only that a variable is set."""
    import sys

    from bench.run.childenv import worker_env

    code = "from torch._inductor.runtime.cache_dir_utils import cache_dir; print(cache_dir())"
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    env = worker_env(None, tmp_path / "run" / "work" / "inductor-cache")
    seen = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert seen.stdout.strip() == str(tmp_path / "run" / "work" / "inductor-cache"), seen.stderr[-2000:]
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))  # the user's own choice wins
    assert worker_env(None, tmp_path / "run")["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "mine")


def test_quick_run_scenarios_json_replays_the_run(quick: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, out = quick
    saved = json.loads((out / SCENARIOS_JSON).read_text())
    assert {k: saved[k] for k in ("matrix", "repeats", "device", "model", "timeout_s")} == {
        "matrix": "quick",
        "repeats": 1,
        "device": "cpu",
        "model": "tiny",
        "timeout_s": 1800.0,
    }
    # the fully resolved scenarios: the matrix with the command line's settings applied
    replay = [Scenario(**s) for s in saved["scenarios"]]
    expected = [s.replace(samples=12, seq_len=32, warmup_steps=1) for s in load_matrix("quick").scenarios]
    assert replay == expected


def test_quick_run_leaves_logs_and_no_temp_files(quick: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, out = quick
    names = load_matrix("quick").names()
    # adam-8bit imports bitsandbytes (it runs on the CPU too): a second server `--with` it, its own log
    assert sorted(p.name for p in (out / "logs").iterdir()) == sorted(
        [*(f"{n}-r0.log" for n in names), "forkserver.log", "forkserver-with-bitsandbytes.log"]
    )
    assert leftover_temp_files(out) == []


# -- a local checkpoint ---------------------------------------------------------------------------


def save_tiny_bert(directory: Path) -> int:
    """A small BertForSequenceClassification saved with save_pretrained (safetensors); its size."""
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(
        vocab_size=1000,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        num_labels=2,
    )
    model = BertForSequenceClassification(config)
    model.save_pretrained(directory)
    return sum(p.numel() for p in model.parameters())


def test_run_a_local_checkpoint(tmp_path: Path) -> None:
    checkpoint = tmp_path / "my-bert"
    params = save_tiny_bert(checkpoint)
    assert (checkpoint / "model.safetensors").is_file() and not list(checkpoint.glob("*.bin"))
    # one worker: spawned with the plain loop, it imports less than a fork server (both engines)
    matrix = write_matrix(
        tmp_path / "m.toml", {"baseline": {}, "fp16": {"precision": "fp16"}}, base={**SHORT, "engine": "accelerate"}
    )
    out = tmp_path / "out"
    done = gpubench(
        "run",
        "--matrix",
        matrix,
        "--model",
        checkpoint,
        "--only",
        "baseline",
        "--device",
        "cpu",
        "--launcher",
        "spawn",
        "--out",
        out,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    frame = results(out)
    assert statuses(frame) == {"baseline": "ok"}
    row = frame.iloc[0]
    assert row["model_resolved"] == str(checkpoint.resolve()) and row["model"] == str(checkpoint)
    assert row["model_params"] == params  # the checkpoint itself, not a preset
    assert not (out / "report.html").exists() and "report:" not in done.stderr  # --no-report (harness default)
    assert json.loads((out / SCENARIOS_JSON).read_text())["model"] == str(checkpoint.resolve())


LANES_ONLY = "baseline,fp16,tf32"


def test_a_lanes_run_writes_the_rows_of_a_plain_run(
    quick: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path
) -> None:
    """--lanes 2 on the CPU: two lane runs at once, their rows in one results.csv, as the plain run's."""
    _, plain = quick
    out = tmp_path / "lanes"
    done = gpubench("run", *QUICK, "--only", LANES_ONLY, "--lanes", "2", "--out", out, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    frame, reference = results(out), results(plain)
    reference = reference[reference["scenario"].isin(LANES_ONLY.split(","))]
    assert list(frame["scenario"]) == list(reference["scenario"]) == ["baseline", "fp16", "tf32"]
    assert statuses(frame) == statuses(reference)
    assert (out / RESULTS_CSV).read_text().splitlines()[0] == ",".join(COLUMNS)
    assert sorted(p.name for p in (out / "lanes").iterdir()) == ["lane-0", "lane-1"]
    lane0 = json.loads((out / "lanes" / "lane-0" / SCENARIOS_JSON).read_text())
    assert [s["name"] for s in lane0["scenarios"]] == ["baseline", "tf32"]  # dealt round-robin
    assert {f"{n}-r0.log" for n in LANES_ONLY.split(",")} <= {p.name for p in (out / "logs").iterdir()}
    assert json.loads((out / ENV_JSON).read_text())["lanes"]["lanes"] == 2
