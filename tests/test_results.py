"""results.csv: the locked column list, lossless round trips, atomic writes, bad files as BadInput."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from harness import leftover_temp_files
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import fsio
from bench.errors import BadInput
from bench.results import COLUMNS, STATUSES, read_results, summarize, to_frame, write_results

# The file format other tools read. Changing it is a deliberate act: update this list and docs.
EXPECTED_COLUMNS = [
    "scenario",
    "repeat",
    "status",
    "error",
    "description",
    "model",
    "task",
    "engine",
    "batch_size",
    "grad_accum_steps",
    "grad_checkpointing",
    "checkpoint_every",
    "precision",
    "tf32",
    "optimizer",
    "dataloader_workers",
    "pin_memory",
    "compile",
    "compile_scope",
    "attn_implementation",
    "data_source",
    "data",
    "tokenizer",
    "data_column",
    "samples",
    "seq_len",
    "warmup_steps",
    "window",
    "profile_steps",
    "profile_memory",
    "eval_samples",
    "compile_mode",
    "peft",
    "lora_rank",
    "lora_alpha",
    "lora_targets",
    "quantize_base",
    "liger",
    "fp8",
    "activation_offload",
    "experts_implementation",
    "seed",
    "learning_rate",
    "lr_schedule",
    "lr_warmup_steps",
    "loss_every_steps",
    "timeout_s",
    "memory_cap_mb",
    "gpus",
    "strategy",
    "zero_stage",
    "fsdp_sharding",
    "offload",
    "nnodes",
    "node_rank",
    "command",
    "tp",
    "cp",
    "dp_replicate",
    "dp_shard",
    "model_resolved",
    "device",
    "model_class",
    "model_family",
    "model_task",
    "token_unit",
    "samples_per_s",
    "tokens_per_s",
    "step_time_p10_ms",
    "step_time_median_ms",
    "step_time_p90_ms",
    "window_s",
    "window_steps",
    "window_samples",
    "window_ci_pct",
    "window_stop",
    "first_step_s",
    "warmup_s",
    "train_loop_s",
    "cpu_loop_start_ms",
    "cpu_loop_end_ms",
    "fp32_matmul_precision",
    "trainer_runtime_s",
    "trainer_samples_per_s",
    "world_size",
    "parallel_wrapper",
    "samples_per_s_per_gpu",
    "scaling_efficiency",
    "scaling_ref",
    "slowest_rank",
    "torch_max_allocated_sum_mb",
    "torch_max_reserved_sum_mb",
    "rss_peak_sum_mb",
    "nvml_process_peak_sum_mb",
    "gpu_peaks_mb",
    "rank_figures",
    "peak_mem_mb",
    "peak_mem_source",
    "nvml_process_peak_mb",
    "nvml_device_peak_mb",
    "nvml_idle_mb",
    "nvml_sample_hz",
    "torch_max_allocated_mb",
    "torch_max_reserved_mb",
    "rss_peak_mb",
    "torch_alloc_model_built_mb",
    "torch_alloc_after_forward_mb",
    "torch_alloc_after_backward_mb",
    "torch_alloc_after_optimizer_step_mb",
    "gpu_energy_j",
    "gpu_energy_source",
    "gpu_energy_sampled_j",
    "gpu_power_mean_w",
    "gpu_power_max_w",
    "gpu_power_limit_w",
    "gpu_power_capped_pct",
    "gpu_sm_clock_median_mhz",
    "gpu_sm_clock_min_mhz",
    "gpu_sm_clock_max_mhz",
    "gpu_clock_events",
    "gpu_activity_source",
    "gpu_sm_active_pct",
    "gpu_tensor_active_pct",
    "gpu_dram_bw_pct",
    "gpu_fp32_active_pct",
    "gpu_fp16_active_pct",
    "gpu_util_pct",
    "gpu_mem_util_pct",
    "gpu_samples",
    "gpu_sample_hz",
    "gpu_reason",
    "energy_per_sample_j",
    "energy_per_token_j",
    "samples_per_kwh",
    "bound",
    "bound_basis",
    "prof_steps",
    "prof_step_ms",
    "prof_gemm_ms",
    "prof_attention_ms",
    "prof_elementwise_ms",
    "prof_optimizer_ms",
    "prof_copy_ms",
    "prof_comm_ms",
    "prof_idle_ms",
    "prof_trace",
    "pred_weights_mb",
    "pred_autocast_copies_mb",
    "pred_grads_mb",
    "pred_optimizer_mb",
    "pred_optimizer_temp_mb",
    "pred_activations_mb",
    "pred_workspace_mb",
    "pred_peak_allocated_mb",
    "pred_peak_min_mb",
    "pred_peak_phase",
    "pred_peak_error_pct",
    "model_params",
    "trainable_params",
    "flops_per_sample",
    "flops_source",
    "flops_generic_per_sample",
    "flops_check_per_sample",
    "flops_check_gap_pct",
    "flops_check_note",
    "achieved_tflops",
    "peak_tflops",
    "mfu",
    "mfu_note",
    "peak_source",
    "ceiling_tflops",
    "mfu_ceiling",
    "lora_modules",
    "lora_layers",
    "effective_learning_rate",
    "effective_lr_schedule",
    "effective_lr_warmup_steps",
    "loss_accum_divided",
    "initial_loss",
    "final_window_loss",
    "eval_accuracy",
    "eval_loss",
    "eval_scored",
    "eval_s",
    "eval_note",
    "parity",
    "parity_delta",
    "parity_band",
    "parity_seeds",
    "parity_ref",
    "final_loss",
    "loss_finite",
    "nonfinite_losses",
    "worker_wall_s",
    "startup_s",
    "startup_breakdown",
    "teardown_breakdown",
    "overhead_s",
    "cpu_affinity",
    "exit_code",
    "started_at",
    "stderr_tail",
]


def row(scenario: str, repeat: int = 0, status: str = "ok", **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "scenario": scenario,
        "repeat": repeat,
        "status": status,
        "error": "",
        "batch_size": 4,
        "tf32": False,
        "precision": "fp32",
        "samples_per_s": 100.0,
        "peak_mem_mb": 500.0,
        "peak_mem_source": "rss",
        "final_loss": 0.5,
        "loss_finite": True,
    }
    return {**base, **extra}


def test_columns_are_locked() -> None:
    assert COLUMNS == EXPECTED_COLUMNS
    assert len(set(COLUMNS)) == len(COLUMNS)


def test_header_is_exactly_the_columns(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    write_results(path, [row("a", samples_per_s=1.0)])
    assert path.read_text().splitlines()[0] == ",".join(EXPECTED_COLUMNS)
    write_results(path, [])  # an empty run still writes a readable file
    assert path.read_text().splitlines() == [",".join(EXPECTED_COLUMNS)]
    assert len(read_results(path)) == 0


@given(st.text(min_size=1).filter(lambda k: k not in EXPECTED_COLUMNS))
def test_a_row_with_an_unknown_column_is_refused_and_nothing_is_written(key: str) -> None:
    """A worker figure missing from COLUMNS used to be dropped without a word."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "results.csv"
        with pytest.raises(ValueError, match="unknown column"):
            write_results(path, [row("a"), row("b", **{key: 1})])
        assert not path.exists()


FIGURES = st.floats(allow_nan=False, allow_infinity=False, min_value=1e-12, max_value=1e12)


@settings(max_examples=8)  # each example writes and reads a file: many figures in one file, few files
@given(st.lists(FIGURES, min_size=1, max_size=200))
def test_a_figure_reads_back_bit_for_bit(values: list[float]) -> None:
    """A resumed run reads results.csv and writes it again, so a writer that rounds or a reader that
    loses the last bit changes finished rows at each resume (seen on the H200 image's pandas 3.0.6 in
    the 16th-17th digit; pandas 3.1, which CI installs, reads them exactly)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "results.csv"
        write_results(path, [row(f"s{i}", samples_per_s=v, mfu=v / 1e13) for i, v in enumerate(values)])
        frame = read_results(path)
        assert list(frame["samples_per_s"]) == values
        assert list(frame["mfu"]) == [v / 1e13 for v in values]


def test_round_trip_keeps_every_value(tmp_path: Path) -> None:
    tail = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nRuntimeError: a, "b"\n'
    rows = [
        row("baseline", samples_per_s=123.456789, startup_breakdown=json.dumps({"imports": 1.5}), cpu_affinity="0"),
        row(
            "crash",
            status="crashed",
            error="worker killed by signal SIGKILL",
            samples_per_s=None,
            peak_mem_mb=None,
            final_loss=None,
            loss_finite=None,
            exit_code=-9,
            stderr_tail=tail,
        ),
        row("diverged", status="diverged", final_loss=math.nan, loss_finite=False, nonfinite_losses=4),
        row("fp16", tf32=True, precision="fp16", timeout_s=12.5),
        # names a CSV reader would otherwise take for missing values or numbers
        row("NA"),
        row("nan"),
        row("1"),
        row("None"),
    ]
    path = tmp_path / "results.csv"
    write_results(path, rows)
    frame = read_results(path)
    assert list(frame.columns) == EXPECTED_COLUMNS
    assert list(frame["scenario"]) == ["baseline", "crash", "diverged", "fp16", "NA", "nan", "1", "None"]
    by = {r["scenario"]: r for r in frame.to_dict("records")}
    assert by["baseline"]["samples_per_s"] == 123.456789
    assert json.loads(by["baseline"]["startup_breakdown"]) == {"imports": 1.5}
    assert by["baseline"]["cpu_affinity"] == "0"  # a CPU list, not the number 0.0
    assert by["crash"]["stderr_tail"] == tail
    assert by["crash"]["error"] == "worker killed by signal SIGKILL"
    assert by["crash"]["exit_code"] == -9
    assert math.isnan(by["crash"]["samples_per_s"]) and math.isnan(by["diverged"]["final_loss"])
    assert by["diverged"]["nonfinite_losses"] == 4
    assert by["fp16"]["tf32"] == True and by["baseline"]["tf32"] == False  # noqa: E712 (numpy bools)
    assert by["fp16"]["timeout_s"] == 12.5 and by["fp16"]["precision"] == "fp16"
    assert list(frame["repeat"]) == [0] * 8
    assert frame["samples_per_s"].dtype.kind == "f"


def test_a_result_directory_reads_its_results_csv(tmp_path: Path) -> None:
    write_results(tmp_path / "results.csv", [row("a")])
    assert list(read_results(tmp_path)["scenario"]) == ["a"]


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    for n in range(3):
        write_results(tmp_path / "results.csv", [row(f"s{i}") for i in range(n + 1)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv"]


def test_a_write_that_fails_keeps_the_old_file_and_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "results.csv"
    write_results(path, [row("a")])
    before = path.read_bytes()

    def interrupted_replace(src: Any, dst: Any) -> None:
        raise KeyboardInterrupt  # Ctrl-C at the worst moment

    monkeypatch.setattr(fsio.os, "replace", interrupted_replace)
    with pytest.raises(KeyboardInterrupt):
        write_results(path, [row("a"), row("b")])
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert leftover_temp_files(tmp_path) == []


def test_a_ctrl_c_while_the_temp_file_is_created_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second Ctrl-C of a run can land just after the temporary file was created and before
    its name was known to the writer (inside tempfile.mkstemp, as it once was): it must go too."""
    path = tmp_path / "results.csv"
    real_open = os.open

    def open_then_interrupted(file: Any, flags: int, mode: int = 0o777, **kw: Any) -> int:
        os.close(real_open(file, flags, mode, **kw))
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "open", open_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_results(path, [row("a")])
    monkeypatch.undo()
    assert leftover_temp_files(tmp_path) == [] and not path.exists()


def test_written_results_are_readable_by_everyone_the_umask_allows(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_results(tmp_path / "results.csv", [row("a")])
    finally:
        os.umask(old)
    assert (tmp_path / "results.csv").stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "the file is empty"),
        (
            "just some words\n",
            "not a gpubench results file (missing columns: scenario, repeat, status, samples_per_s, peak_mem_mb)",
        ),
        ('scenario,repeat,status,samples_per_s,peak_mem_mb\n"a,0,ok\n', "not a readable CSV"),
        (
            "scenario,repeat,status,samples_per_s,peak_mem_mb\na,0,ok,fast,1\n",
            "line 2: column 'samples_per_s' holds a non-numeric value 'fast'",
        ),
        (
            "scenario,repeat,status,samples_per_s,peak_mem_mb\na,0,great,1,1\n",
            "unknown status 'great' (known: " + ", ".join(STATUSES) + ")",
        ),
        (
            "scenario,repeat,status,samples_per_s,peak_mem_mb\na,0,ok,1,1\nb,0,ok,1,1\na,0,ok,2,1\n",
            "duplicate rows for scenario 'a' repeat 0",
        ),
    ],
)
def test_bad_files_are_bad_input_naming_the_file(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "results.csv"
    path.write_text(content)
    with pytest.raises(BadInput) as info:
        read_results(path)
    assert str(info.value).startswith(f"{path}: ")
    assert message in str(info.value)


def test_binary_and_missing_files_are_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    path.write_bytes(os.urandom(64) + b"\xff\xfe\x00" * 50)
    with pytest.raises(BadInput, match=str(path)):
        read_results(path)
    with pytest.raises(BadInput, match="no such results file"):
        read_results(tmp_path / "nothing")


def test_a_results_file_is_never_evaluated(tmp_path: Path) -> None:
    # A cell that would run code under eval() stays a string (and a numeric column rejects it).
    payload = "__import__('os').system('touch pwned')"
    path = tmp_path / "results.csv"
    write_results(path, [row("a", error=payload, startup_breakdown=payload)])
    frame = read_results(path)
    assert frame["error"][0] == payload and frame["startup_breakdown"][0] == payload
    path.write_text(f'scenario,repeat,status,samples_per_s,peak_mem_mb\na,0,ok,"{payload}",1\n')
    with pytest.raises(BadInput, match="non-numeric value"):
        read_results(path)
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


def test_summarize_medians_ok_repeats_and_reports_the_worst_status() -> None:
    frame = to_frame(
        [
            row("baseline", 0, samples_per_s=100.0),
            row("baseline", 1, samples_per_s=110.0),
            row("baseline", 2, samples_per_s=90.0),
            row("fp16", 0, samples_per_s=200.0, peak_mem_mb=250.0),
            row("fp16", 1, status="oom", error="CUDA out of memory", samples_per_s=None),
            row("tf32", 0, status="skipped", error="tf32 is a CUDA matmul mode", samples_per_s=None),
        ]
    )
    summary = summarize(frame).set_index("scenario")
    assert list(summary.index) == ["baseline", "fp16", "tf32"]
    assert summary.loc["baseline", "samples_per_s"] == 100.0
    assert summary.loc["baseline", "samples_per_s_cv_pct"] == pytest.approx(10.0)
    assert (summary.loc["fp16", "status"], summary.loc["fp16", "ok"], summary.loc["fp16", "repeats"]) == ("oom", 1, 2)
    assert summary.loc["fp16", "samples_per_s_vs_baseline_pct"] == pytest.approx(100.0)
    assert summary.loc["fp16", "peak_mem_mb_vs_baseline_pct"] == pytest.approx(-50.0)
    assert summary.loc["fp16", "error"] == "CUDA out of memory"
    assert summary.loc["tf32", "status"] == "skipped" and math.isnan(summary.loc["tf32", "samples_per_s"])


def test_summarize_says_what_each_change_vs_the_baseline_is_worth() -> None:
    speeds = {
        "baseline": ([100.0, 110.0, 90.0], 500.0),
        "clear": ([150.0, 160.0, 155.0], 500.0),  # every repeat beyond the baseline's range
        "noisy": ([95.0, 130.0, 120.0], 500.0),  # +20% by median, ranges overlap
        "pair": ([200.0, 210.0], 400.0),  # separate ranges, but two repeats
        "single": ([300.0], 400.0),
    }
    frame = to_frame(
        [
            row(name, r, samples_per_s=value, peak_mem_mb=mem + r)
            for name, (values, mem) in speeds.items()
            for r, value in enumerate(values)
        ]
    )
    summary = summarize(frame).set_index("scenario")
    assert summary["samples_per_s_vs_baseline_noise"].to_dict() == {
        "baseline": "",
        "clear": "beyond",
        "noisy": "within",
        "pair": "2 runs",
        "single": "1 run",
    }
    assert summary["peak_mem_mb_vs_baseline_noise"].to_dict() == {
        "baseline": "",
        "clear": "within",  # 500-502 against 500-502
        "noisy": "within",
        "pair": "2 runs",
        "single": "1 run",
    }
    failed = to_frame([row("baseline"), row("oom", status="oom", error="CUDA out of memory", samples_per_s=None)])
    assert summarize(failed).set_index("scenario").loc["oom", "samples_per_s_vs_baseline_noise"] == ""


@given(st.sampled_from(["peft", "liger", "lora_rank", "fp8", "compile_mode", "window", "strategy", "gpus"]))
def test_a_setting_written_before_it_existed_reads_as_its_default(key: str) -> None:
    """Rows from an older gpubench lack the newer fields (no column, or a blank cell in a file a
    resumed run rewrote); they ran with the default, and must compare equal to rows that say so."""
    from bench.recipe.scenario import Scenario

    default = getattr(Scenario(name="x"), key)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "results.csv"
        write_results(path, [row("a", **{key: default}), row("b")])  # b: the cell is blank
        lines = path.read_text().splitlines()
        assert read_results(path)[key].tolist() == [default, default]
        if isinstance(default, int) and not isinstance(default, bool):  # a number beside a blank
            write_results(path, [row("a", **{key: default + 1}), row("b")])
            assert [repr(v) for v in read_results(path)[key]] == [repr(default + 1), repr(default)]
        header = lines[0].split(",")
        at = header.index(key)
        dropped = [",".join(c for i, c in enumerate(line.split(",")) if i != at) for line in lines]
        path.write_text("\n".join(dropped) + "\n")  # a file from before the column existed
        assert read_results(path)[key].tolist() == [default, default]
