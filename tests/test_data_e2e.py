"""`gpubench run` on a data kind, end to end: one real run of two tiny Llama rows (the synthetic
language and a local text file shorter than one block), and the refusal of a missing file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from harness import gpubench, gpubench_in_process, write_matrix

from bench.results import RESULTS_CSV, read_results

pytestmark = pytest.mark.slow
BASE = {"model": "llama-tiny", "samples": 16, "seq_len": 32, "warmup_steps": 1, "batch_size": 4}
TEXT = "short text\n\nand more"  # 10 + 1 + 8 + 1 byte ids: one block of 32, 20 of them labelled


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    root = tmp_path_factory.mktemp("data-run")
    (root / "corpus.txt").write_text(TEXT, encoding="utf-8")
    matrix = write_matrix(
        root / "data.toml",
        {"synthetic": {"data": "lm-synthetic"}, "text": {"data": f"text:{root / 'corpus.txt'}"}},
        base=BASE,
    )
    out = root / "run"
    return gpubench("run", "--matrix", matrix, "--device", "cpu", "--out", out, timeout=600), out, root


def test_each_row_records_its_data_and_counts_the_labelled_tokens(
    run: tuple[subprocess.CompletedProcess[str], Path, Path],
) -> None:
    done, out, root = run
    assert done.returncode == 0, done.stderr[-3000:]
    rows = read_results(out / RESULTS_CSV).set_index("scenario")
    assert rows.loc["synthetic", "data"] == "lm-synthetic"
    assert rows.loc["text", "data"] == f"text:{root / 'corpus.txt'}"
    assert (rows["status"] == "ok").all() and (rows["tokenizer"].fillna("") == "").all()
    tokens = rows["tokens_per_s"] / rows["samples_per_s"]
    assert tokens["synthetic"] == pytest.approx(32)
    assert tokens["text"] == pytest.approx(20)  # the padding of the one block has no labels


def test_a_missing_data_file_exits_2_before_any_work(tmp_path: Path) -> None:
    matrix = write_matrix(tmp_path / "m.toml", {"gone": {"data": f"text:{tmp_path / 'gone.txt'}"}}, base=BASE)
    done = gpubench_in_process("run", "--matrix", matrix, "--device", "cpu", "--out", tmp_path / "out")
    assert done.code == 2
    assert (
        f"scenario 'gone': data = \"text:{tmp_path / 'gone.txt'}\": {tmp_path / 'gone.txt'} does not exist" in done.err
    )
    assert not (tmp_path / "out").exists()


def test_run_data_sets_every_scenarios_data_and_a_kind_of_another_task_exits_2(tmp_path: Path) -> None:
    done = gpubench_in_process("run", "--matrix", "quick", "--data", "lm-synthetic", "--device", "cpu")
    assert done.code == 2
    assert (
        "scenario 'baseline': data = \"lm-synthetic\": the lm-synthetic kind serves causal-lm, but tiny trains "
        "sequence-classification (for sequence-classification use one of random, cls-synthetic)"
    ) in done.err


def test_eval_samples_scores_each_model_on_held_out_rows_after_training(tmp_path: Path) -> None:
    """--eval N: a causal LM's next-token accuracy over the held-out rows' labelled tokens, an image
    classifier's top-1 over its rows; both in the row, the run table and the report."""
    vit = {"model": "vit-tiny", "engine": "torch", "data": "vision-synthetic", "batch_size": 8, "samples": 64}
    matrix = write_matrix(tmp_path / "m.toml", {"lm": {"data": "lm-synthetic"}, "vit": vit}, base=BASE)
    out = tmp_path / "run"
    done = gpubench("run", "--matrix", matrix, "--device", "cpu", "--eval", "16", "--out", out, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = read_results(out / RESULTS_CSV).set_index("scenario")
    assert (rows["status"] == "ok").all() and (rows["eval_samples"] == 16).all()
    assert rows.loc["lm", "eval_scored"] == 16 * (BASE["seq_len"] - 1)  # position t predicts token t + 1
    assert rows.loc["vit", "eval_scored"] == 16
    assert rows["eval_accuracy"].between(0, 1).all() and (rows["eval_loss"] > 0).all() and (rows["eval_s"] > 0).all()
    assert rows["eval_note"].isna().all()
    assert "held-out acc" in done.stdout
    report = gpubench_in_process("report", str(out), "--format", "markdown")
    assert report.code == 0 and "held-out accuracy (%)" in report.out
    again = gpubench_in_process("run", "--resume", str(out), "--eval", "8")  # named by its own flag
    assert again.code == 2 and "--eval would change the run's scenarios" in again.err


def test_eval_samples_on_random_data_exits_2_before_any_work(tmp_path: Path) -> None:
    done = gpubench_in_process("run", "--matrix", "quick", "--eval", "8", "--device", "cpu", "--out", tmp_path / "o")
    assert done.code == 2
    assert (
        "scenario 'baseline': eval_samples = 8 needs data with a held-out split; data = \"random\" has none" in done.err
    )
    assert not (tmp_path / "o").exists()
    cmd = gpubench_in_process("run", "--cmd", f"{sys.executable} -c pass", "--eval", "3", "--out", tmp_path / "c")
    assert cmd.code == 2 and "--cmd: --eval do not apply to a command" in cmd.err  # a script scores its own model
