"""`gpubench predict` through the CLI, and the predicted columns of a real (CPU) run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from harness import gpubench
from typer.testing import CliRunner

from bench.cli import predict_cmd
from bench.planner.matrix import load_matrix
from bench.predict import printout
from bench.results import write_results

FULL = load_matrix("full").names()


def invoke(*args: str) -> Any:
    app = typer.Typer()
    predict_cmd.register(app)
    app.command("unused")(lambda: None)  # two commands, so `predict` is a subcommand as in gpubench
    return CliRunner().invoke(app, ["predict", *args], catch_exceptions=False)


def as_json(*args: str) -> dict[str, Any]:
    result = invoke(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_table_has_a_row_per_scenario() -> None:
    result = invoke("--matrix", "full", "--model", "bert-large")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    for name in FULL:
        assert any(line.startswith(f"│ {name} ") for line in lines), name
    assert "context 750 MB assumed (no --calibrate" in result.stdout
    assert "fits" not in result.stdout  # no --gpu-memory: no fit column
    # the caveats are notes, on stderr like every command's; the document stays on stdout
    assert "note:" not in result.stdout
    assert "gpubench: note: adam-8bit: the Trainer keeps 32-bit states for nn.Embedding weights" in result.stderr


def test_csv_and_markdown_hold_a_record_per_scenario(tmp_path: Path) -> None:
    args = ("--matrix", "full", "--model", "bert-large", "--only", "baseline,fp16", "--gpu-memory", "24GB")
    table = invoke(*args, "--format", "csv").stdout.splitlines()
    assert table[0] == ",".join(printout.RECORD_COLUMNS)
    assert [line.split(",")[0] for line in table[1:]] == ["baseline", "fp16"]
    assert table[1].endswith(",backward,activations,7906.5,True")
    out = tmp_path / "predict.md"
    written = invoke(*args, "--format", "markdown", "-o", str(out))
    assert written.stdout == "" and f"gpubench: wrote {out}" in written.stderr
    markdown = out.read_text()
    assert markdown.startswith("## gpubench predict: full") and "| baseline | 335143938 |" in markdown


def test_json_is_locked() -> None:
    data = as_json("--matrix", "full", "--model", "bert-large", "--only", "baseline,fp16")
    assert list(data) == ["schema", "matrix", "unit", "calibration", "gpu_memory_mb", "scenarios"]
    assert data["schema"] == "gpubench.predict/1"
    base, fp16 = data["scenarios"]
    assert list(base) == [
        "scenario",
        "model",
        "params",
        "terms_mb",
        "phases_mb",
        "peak_mb",
        "peak_phase",
        "peak_term",
        "need_mb",
        "fits",
        "measured_mb",
        "predicted_counterparts_mb",
        "notes",
    ]
    assert list(base["terms_mb"]) == [
        "weights",
        "autocast_copies",
        "grads",
        "optimizer",
        "optimizer_temp",
        "activations",
        "workspace",
    ]
    assert base["params"] == 335_143_938
    assert base["peak_mb"] == max(base["phases_mb"].values())
    assert base["terms_mb"]["autocast_copies"] == 0 and fp16["terms_mb"]["autocast_copies"] > 500
    assert fp16["terms_mb"]["activations"] < base["terms_mb"]["activations"]


def test_gpu_memory_marks_what_fits() -> None:
    data = as_json("--matrix", "full", "--model", "bert-large", "--gpu-memory", "6GiB")
    fits = {s["scenario"]: s["fits"] for s in data["scenarios"]}
    assert data["gpu_memory_mb"] == 6144
    # need = predicted peak + the assumed 750 MB context: only Adafactor and 8-bit Adam with
    # checkpointing (peaks near 3.3 and 4.1 GB) and plain Adafactor (4.6 GB) fit in 6 GB
    assert {name for name, ok in fits.items() if ok} == {"adafactor", "combo-adafactor", "combo-8bit"}
    for s in data["scenarios"]:
        assert s["need_mb"] == pytest.approx(s["peak_mb"] + 750)
    table = invoke("--matrix", "full", "--model", "bert-large", "--gpu-memory", "6GiB").stdout
    assert "fits 6,144" in table


def test_model_and_overrides_change_the_prediction() -> None:
    large = as_json("--only", "baseline", "--model", "bert-large")["scenarios"][0]
    base = as_json("--only", "baseline", "--model", "bert-base")["scenarios"][0]
    short = as_json("--only", "baseline", "--model", "bert-large", "--seq-len", "128")["scenarios"][0]
    assert base["params"] == 109_483_778 and base["peak_mb"] < large["peak_mb"]
    # SDPA keeps no s x s tensor: activations scale with the sequence length
    assert short["terms_mb"]["activations"] == pytest.approx(large["terms_mb"]["activations"] / 4, rel=1e-3)
    assert short["terms_mb"]["weights"] == large["terms_mb"]["weights"]


def _calibration_run(path: Path) -> Path:
    """A results dir as an H200 run of bert-large baseline would write it."""
    row = {
        "scenario": "baseline",
        "repeat": 0,
        "status": "ok",
        "samples_per_s": 33.8,
        "peak_mem_mb": 8528.0,
        "model_resolved": "bert-large",
        "engine": "trainer",
        "batch_size": 4,
        "grad_accum_steps": 1,
        "grad_checkpointing": False,
        "precision": "fp32",
        "optimizer": "adamw",
        "compile": False,
        "attn_implementation": "default",
        "seq_len": 512,
        "nvml_process_peak_mb": 8528.0,
        "torch_max_reserved_mb": 7786.0,
        "torch_max_allocated_mb": 7158.56,
        "torch_alloc_model_built_mb": 1279.25,
        "torch_alloc_after_forward_mb": 4502.08,
        "torch_alloc_after_backward_mb": 2623.52,
        "torch_alloc_after_optimizer_step_mb": 5182.01,
    }
    write_results(path / "results.csv", [row])
    (path / "env.json").write_text(json.dumps({"gpu": {"name": "NVIDIA H200"}}))
    return path


def test_calibrate_measures_context_and_shows_measured_terms(tmp_path: Path) -> None:
    cal = _calibration_run(tmp_path)
    data = as_json("--only", "baseline,fp16", "--model", "bert-large", "--calibrate", str(cal), "--gpu-memory", "24GB")
    base, fp16 = data["scenarios"]
    assert data["calibration"]["measured"] is True and data["calibration"]["context_mb"] == 742
    assert base["need_mb"] == pytest.approx(base["peak_mb"] + 742 + (7786 - 7158.56))
    assert base["measured_mb"]["peak"] == 7158.56
    assert abs(base["predicted_counterparts_mb"]["peak"] / 7158.56 - 1) < 0.01
    assert fp16["measured_mb"] == {}  # the calibration run has no fp16 row
    table = invoke("--only", "baseline", "--model", "bert-large", "--calibrate", str(cal)).stdout
    assert "measured in" in table and "NVIDIA H200" in table
    assert "7,157 / 7,159 (-0.0%)" in table


def test_calibration_of_another_setup_is_not_compared(tmp_path: Path) -> None:
    cal = _calibration_run(tmp_path)
    data = as_json("--only", "baseline", "--model", "bert-base", "--calibrate", str(cal))
    assert data["scenarios"][0]["measured_mb"] == {}


def test_help_has_an_example() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    assert "gpubench predict --matrix full --model bert-large --gpu-memory 24GB" in result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--gpu-memory", "24XB"], "gpubench: error: --gpu-memory '24XB' is not a memory size"),
        (["--model", "gpt-7"], "gpubench: error: unknown model 'gpt-7'"),
        (["--only", "nope"], "gpubench: error: --only: no scenario 'nope'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    done = gpubench("predict", "--matrix", "full", *args, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith(message)
    assert len(done.stderr.strip().splitlines()) == 1
    assert done.stdout == ""


def test_a_prediction_without_activations_says_so_in_every_format() -> None:
    """A family with no activation model (bench.memory.states): the terms it leaves out read
    "not predicted" (null, empty), the peak is marked as a lower bound, and fitting is unknown."""
    from bench.families.bert.dims import BertDims, buffer_bytes, param_tensors
    from bench.families.memory_model import load_dims
    from bench.memory.states import predict_states_only
    from bench.predict.measured import assumed, predicted_counterparts
    from bench.predict.predictions import PredictReport, ScenarioMemory, fits_in
    from bench.recipe.scenario import Scenario
    from bench.termtable import stdout_console

    sc = Scenario(name="states-only", model="bert-base", samples=64, warmup_steps=1)
    d = load_dims("bert-base")
    assert isinstance(d, BertDims)
    p = predict_states_only(sc, param_tensors(d), buffers=buffer_bytes(d))
    need = p.peak / 2**20 + 750.0
    row = ScenarioMemory(sc, "bert-base", p, need, fits_in(need, 81559.0, False), {}, predicted_counterparts(p))
    report = PredictReport("m", assumed(), 81559.0, (row,))
    assert row.fits is None and fits_in(need, 1.0, False) is False and fits_in(need, 81559.0, True) is True
    (record,) = printout.records(report)
    assert record["activations_mb"] is None and record["autocast_copies_mb"] is None
    assert record["weights_mb"] > 0
    csv_row = printout.to_csv(report).splitlines()[1].split(",")
    assert csv_row[printout.RECORD_COLUMNS.index("activations_mb")] == ""
    (data,) = printout.to_data(report)["scenarios"]
    assert data["terms_mb"]["activations"] is None and data["predicted_counterparts_mb"] == {}
    assert any(note.startswith("activations not predicted") for note in data["notes"])
    console = stdout_console(200)
    with console.capture() as captured:
        printout.print_report(report, console)
    line = next(text for text in captured.get().splitlines() if "states-only" in text)
    assert line.count("not predicted") == 2 and f">={p.peak / 2**20:,.0f}" in line and "unknown" in line
