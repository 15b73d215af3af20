"""A row's record of what ran (bench/worker/what_ran.py, bench/run/command.py): the class built, its
task, family and token unit; a vision model's tokens and FLOPs from its own config and build (no
text seq_len); a FLOP gap as a note and no MFU past 25%; a command row without gpubench's defaults;
a model column, and no "vs base" across models."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from harness import gpubench, results, write_matrix

import bench.hook as gpubench_hook
from bench.measure import mfu
from bench.recipe.scenario import Scenario
from bench.report.table import summary_table
from bench.results import summarize
from bench.termtable import FitTable


def rendered(fit: FitTable, width: int = 200) -> str:
    from rich.console import Console

    console = Console(width=width, record=True, color_system=None)
    console.print(fit)
    return console.export_text()


@pytest.fixture(scope="module")
def vision(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """DINOv2 at 64 px / patch 8 and a ConvNeXt, both with seq_len = 512 (the issue's case), built
    from transformers' config classes (no preset): one real run on the CPU, ~40 s."""
    from transformers import ConvNextConfig, Dinov2Config

    root = tmp_path_factory.mktemp("vision")
    Dinov2Config(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=64,
        patch_size=8,
        num_labels=3,
        architectures=["Dinov2ForImageClassification"],
    ).save_pretrained(root / "dino")
    ConvNextConfig(
        hidden_sizes=[8, 16, 32, 64],
        depths=[1, 1, 1, 1],
        image_size=64,
        num_labels=3,
        architectures=["ConvNextForImageClassification"],
    ).save_pretrained(root / "convnext")
    base = {"samples": 8, "batch_size": 4, "warmup_steps": 1, "seq_len": 512}
    matrix = write_matrix(
        root / "m.toml",
        {"baseline": {"model": str(root / "dino")}, "cnn": {"model": str(root / "convnext")}},
        base=base,
    )
    done = gpubench("run", "--matrix", matrix, "--device", "cpu", "--out", root / "out", timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    return {"stdout": done.stdout, "rows": {r["scenario"]: r for r in results(root / "out").to_dict("records")}}


def test_a_vision_transformers_tokens_are_its_patches_and_class_token_not_seq_len(vision: dict[str, Any]) -> None:
    row = vision["rows"]["baseline"]
    assert row["status"] == "ok"
    assert (row["model_class"], row["model_family"], row["model_task"]) == (
        "Dinov2ForImageClassification",
        "generic",
        "image-classification",
    )
    assert row["token_unit"] == "image patches + class token"
    assert row["tokens_per_s"] / row["samples_per_s"] == pytest.approx((64 // 8) ** 2 + 1)  # not 512
    # the count from the model's own tokens agrees with FlopCounterMode's (it was 746M vs 48M at 512 tokens)
    assert abs(row["flops_check_gap_pct"]) < mfu.CHECK_NOTE_PCT
    assert row["flops_per_sample"] == pytest.approx(row["flops_generic_per_sample"])
    assert abs(row["flops_per_sample"] / row["flops_check_per_sample"] - 1) < 0.05


def test_a_cnn_has_no_tokens_and_its_flops_are_counted_from_the_built_model(vision: dict[str, Any]) -> None:
    row = vision["rows"]["cnn"]
    assert row["status"] == "ok" and row["model_class"] == "ConvNextForImageClassification"
    assert row["token_unit"] == "none" and math.isnan(row["tokens_per_s"])
    assert row["flops_source"] == mfu.COUNTED_SOURCE
    assert row["flops_per_sample"] == row["flops_check_per_sample"] > 0


def test_a_run_of_two_models_has_a_model_column_and_no_change_across_models(vision: dict[str, Any]) -> None:
    out = vision["stdout"]
    header = next(line for line in out.splitlines() if "scenario" in line and "status" in line)
    assert "model" in header
    cnn = next(line for line in out.splitlines() if line.startswith("│ cnn"))
    assert "convnext" in cnn and "%" not in cnn  # no vs base against DINOv2's baseline
    assert "vs base: only rows of the baseline's model (dino)" in " ".join(out.split())


def _rows(**by_scenario: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for name, figures in by_scenario.items():
        for repeat, sps in enumerate(figures.pop("sps")):
            rows.append(
                {
                    "scenario": name,
                    "repeat": repeat,
                    "status": "ok",
                    "error": "",
                    "samples_per_s": sps,
                    "peak_mem_mb": 100.0,
                    "peak_mem_source": "rss",
                    **figures,
                }
            )
    return pd.DataFrame(rows)


def test_vs_base_compares_only_rows_of_the_baselines_model() -> None:
    frame = _rows(
        baseline={"model_resolved": "tiny", "sps": [10.0, 10.0, 10.0]},
        same={"model_resolved": "tiny", "sps": [20.0, 20.0, 20.0]},
        other={"model_resolved": "llama-tiny", "sps": [40.0, 40.0, 40.0]},
    )
    s = summarize(frame).set_index("scenario")
    assert s.loc["same", "samples_per_s_vs_baseline_pct"] == pytest.approx(100.0)
    assert math.isnan(s.loc["other", "samples_per_s_vs_baseline_pct"])
    assert s.loc["other", "samples_per_s_vs_baseline_noise"] == ""
    assert list(s["model"]) == ["tiny", "tiny", "llama-tiny"]
    one_model = summarize(frame[frame["scenario"] != "other"])
    assert "model" not in rendered(summary_table(one_model)).split("\n")[1]  # the column only for several models


def test_a_flop_gap_over_5_percent_is_a_note_and_over_25_percent_leaves_mfu_empty() -> None:
    sc = Scenario(name="s", model="tiny", seq_len=32)
    worker = {"flops_check_per_sample": 1.1e9, "flops_check_gap_pct": 10.0, "model_params": 1000}
    near = mfu.figures(sc, "tiny", 4_000_000, 100.0, "NVIDIA H100 80GB HBM3", False, 1, worker)
    assert near["mfu"] is not None and near["mfu_note"] == ""
    assert near["flops_check_note"].startswith("FlopCounterMode counts +10.0%")
    far = mfu.figures(
        sc, "tiny", 4_000_000, 100.0, "NVIDIA H100 80GB HBM3", False, 1, {**worker, "flops_check_gap_pct": -93.6}
    )
    assert far["flops_per_sample"] is not None and far["peak_tflops"] is not None
    assert far["mfu"] is None and far["achieved_tflops"] is None and far["mfu_ceiling"] is None
    assert far["mfu_note"].startswith("FLOP counts disagree by -93.6% (over 25%)")
    frame = _rows(
        baseline={"sps": [10.0], "flops_check_gap_pct": 10.0},
        far={"sps": [10.0], "flops_check_gap_pct": -93.6},
        close={"sps": [10.0], "flops_check_gap_pct": 1.0},
    )
    text = " ".join(rendered(summary_table(summarize(frame))).split())
    assert "FLOP counts differ by +10.0%" in text and "FLOP counts differ by -93.6%" in text
    assert "+1.0%" not in text
    from bench.report.content import build

    notes = " ".join(build(frame, None, Path("results.csv")).notes)
    assert "baseline (FLOP counts differ by +10.0%" in notes and "far (FLOP counts differ by -93.6%" in notes
    assert "close (" not in notes


def test_the_hook_checks_what_a_script_reports_of_itself() -> None:
    gpubench_hook.settings(batch_size=4, learning_rate=3e-4, model="my-llama")  # not launched: checked only
    for bad in ({"bogus": 1}, {"batch_size": -1}, {"batch_size": True}, {"learning_rate": math.inf}, {"model": ""}):
        with pytest.raises(ValueError, match="bench.hook.settings"):
            gpubench_hook.settings(**bad)


SCRIPT = """
import torch
import bench.hook as gpubench

REPORT
model = torch.nn.Linear(8, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(4):
    with gpubench.step(samples=4) as s:
        loss = torch.nn.functional.cross_entropy(model(torch.randn(4, 8)), torch.tensor([0, 1, 2, 0]))
        loss.backward()
        opt.step()
        opt.zero_grad()
        s.loss = loss
"""


def test_a_command_row_holds_no_setting_the_script_did_not_have(tmp_path: Path) -> None:
    """A base that sets gpubench's model, batch and sequence: a command row takes none of them (nor
    the engines' default learning rate); what the script reports through the hook is its row's."""
    (tmp_path / "quiet.py").write_text(SCRIPT.replace("REPORT", ""))
    (tmp_path / "told.py").write_text(
        SCRIPT.replace("REPORT", 'gpubench.settings(batch_size=4, learning_rate=0.1, engine="plain torch")')
    )
    python = json.dumps(sys.executable)
    (tmp_path / "m.toml").write_text(
        '[base]\nwarmup_steps = 1\nbatch_size = 8\nseq_len = 256\nmodel = "tiny"\n'
        f'[scenarios.quiet]\ncommand = [{python}, "{tmp_path / "quiet.py"}"]\n'
        f'[scenarios.told]\ncommand = [{python}, "{tmp_path / "told.py"}"]\n'
    )
    done = gpubench("run", "--matrix", tmp_path / "m.toml", "--device", "cpu", "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {r["scenario"]: r for r in results(tmp_path / "out").to_dict("records")}
    quiet, told = rows["quiet"], rows["told"]
    for column in ("model", "task", "engine", "batch_size", "seq_len", "precision", "optimizer", "data"):
        assert pd.isna(quiet[column]), (column, quiet[column])
    for column in ("learning_rate", "effective_learning_rate", "effective_lr_schedule", "grad_accum_steps"):
        assert pd.isna(quiet[column]), (column, quiet[column])
    assert pd.isna(quiet["model_class"]) and pd.isna(quiet["token_unit"])
    assert (quiet["status"], quiet["warmup_steps"], quiet["window"], quiet["model_resolved"]) == (
        "ok",
        1,
        "epoch",
        "command",
    )
    assert (told["batch_size"], told["learning_rate"], told["effective_learning_rate"]) == (4, 0.1, 0.1)
    assert told["engine"] == "plain torch" and pd.isna(told["seq_len"]) and pd.isna(told["model"])


@pytest.mark.parametrize(
    ("config", "unit", "tokens"),
    [
        ("ViTConfig", "image patches + class token", 16 + 1),
        ("DeiTConfig", "image patches + class token", 16 + 2),  # the class and distillation tokens
        ("Dinov2WithRegistersConfig", "image patches + class token", 16 + 1 + 4),  # and its 4 registers
        ("ConvNextConfig", "none", None),  # a CNN: its patch_size is a stem, not tokens
    ],
)
def test_an_image_models_tokens_are_its_patches_and_the_tokens_its_embeddings_add(
    config: str, unit: str, tokens: int | None
) -> None:
    import torch
    import transformers

    from bench.worker import what_ran

    dims = (
        {"hidden_sizes": [8, 16, 32, 64], "depths": [1, 1, 1, 1]}
        if config == "ConvNextConfig"
        else {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}
    )
    arch = config.removesuffix("Config") + "ForImageClassification"
    cfg = getattr(transformers, config)(image_size=32, patch_size=8, num_labels=3, architectures=[arch], **dims)
    if config == "Dinov2WithRegistersConfig":
        cfg.num_register_tokens = 4
    with torch.device("meta"):
        model = transformers.AutoModelForImageClassification.from_config(cfg)
    assert what_ran.tokens(model, "image-classification", 512) == (unit, tokens)
    assert what_ran.tokens(model, "causal-lm", 512) == ("text tokens", 512)


def test_ranks_without_tokens_give_no_token_figure_not_zero() -> None:
    from bench.worker.ranks import combine_ranks

    rank = {"samples_per_s": 10.0, "window_s": 2.0, "window_samples": 20, "tokens_per_s": None}
    assert combine_ranks([dict(rank), dict(rank)], "trainer")["tokens_per_s"] is None
    counted = combine_ranks([{**rank, "tokens_per_s": 100.0}, {**rank, "tokens_per_s": 100.0}], "trainer")
    assert counted["tokens_per_s"] == pytest.approx(200.0)
