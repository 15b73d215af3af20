"""`validation/power.py`: the power study's noise model, read from the published H200 sets, and its
nights judged exactly as `gpubench compare` judges them. Pure and fast: part of the default suite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from harness import REPO, write_run

from bench.compare.comparison import compare
from validation import power

LAUNCH_BOUND = {"grad-accum", "grad-ckpt", "fp16", "bf16", "tf32", "combo-fp16", "combo-adafactor", "combo-8bit"}


@pytest.fixture(scope="module")
def published() -> power.Noise:
    return power.load_noise(REPO / power.RESULTS, power.MATRIX_SET, power.NOISE_SETS)


def test_the_published_sets_give_thirteen_rows_in_two_classes(published: power.Noise) -> None:
    assert [r.name for r in published.rows][:4] == ["baseline", "grad-accum", "grad-ckpt", "fp16"]
    assert len(published.rows) == 13
    assert {r.name for r in published.rows if r.row_class == "launch-bound"} == LAUNCH_BOUND
    assert published.sources == ("aa/a", "aa/b", "full", "launchers/fork", "launchers/spawn")
    sets = {r.name: r.sets for r in published.rows}
    assert (sets["baseline"], sets["fp16"], sets["tf32"], sets["compile"]) == (3, 5, 5, 1)
    assert published.offset_sd["compute-bound"] == pytest.approx(0.0143, abs=5e-4)  # baseline's 3 runs
    assert published.offset_sd["launch-bound"] == 0.0  # their run means vary no more than their repeats say


def frame(night: power.Night, names: list[str], repeats: int) -> pd.DataFrame:
    rows = [
        {"scenario": name, "repeat": k, "status": "ok", "samples_per_s": speeds[k], "peak_mem_mb": mems[k], "error": ""}
        for name, speeds, mems in zip(names, *night, strict=True)
        for k in range(repeats)
    ]
    return pd.DataFrame(rows)


def test_a_night_is_judged_by_the_study_as_compare_judges_it(tmp_path: Path, published: power.Noise) -> None:
    rng = np.random.default_rng(7)
    names = [r.name for r in published.rows]
    base, new = power.night(published, rng, 3), power.night(published, rng, 3)
    new[0][0] = new[0][0] * 0.7  # baseline 30% slower: at least one regression to agree on
    outcome = power.gate(base, new, power.Thresholds())
    result = compare(frame(base, names, 3), frame(new, names, 3), None, None)
    speed = result.rows[result.rows["metric"] == "samples_per_s"]
    assert list(speed["scenario"]) == names
    assert list(speed["verdict"]) == outcome.speed
    assert list(speed["detectable_pct"]) == pytest.approx(outcome.detectable)
    assert outcome.speed[0] == "regression" and outcome.failed and result.exit_code == 1


def test_the_study_catches_a_halving_and_counts_its_nights(published: power.Noise) -> None:
    result = power.study(published, power.Setup(3), trials=26, slowdowns=[50.0], seed=1)
    assert result.caught[50.0]["baseline"] == result.caught[50.0]["compile"] == 1.0
    assert 0.0 <= result.aa_failed <= 0.25
    assert result.detectable["baseline"] == pytest.approx(5.0, abs=1.0)
    assert result.detectable["fp16"] > 25.0  # launch-bound: what 3 repeats cannot see is printed


def settings_rows(scenario: str, speeds: list[float], **settings: Any) -> list[dict[str, Any]]:
    return [
        {"scenario": scenario, "repeat": k, "status": "ok", "samples_per_s": v, "peak_mem_mb": 1000.0, "error": ""}
        | {"batch_size": 4, "precision": "fp32", "samples": 512, **settings}
        for k, v in enumerate(speeds)
    ]


def test_offsets_come_from_set_means_and_sets_measured_otherwise_are_left_out(tmp_path: Path) -> None:
    steady = [100.0, 101.0, 99.0]
    write_run(tmp_path / "full", settings_rows("a", steady) + settings_rows("b", steady, batch_size=1), None)
    shifted = settings_rows("a", [v * 1.2 for v in steady]) + settings_rows("b", steady, batch_size=1, samples=64)
    write_run(tmp_path / "other", shifted, None)
    noise = power.load_noise(tmp_path, "full")
    rows = {r.name: r for r in noise.rows}
    assert (rows["a"].row_class, rows["a"].sets) == ("compute-bound", 2)
    assert (rows["b"].row_class, rows["b"].sets) == ("launch-bound", 1)  # 64 samples: not the same scenario
    assert noise.offset_sd["compute-bound"] == pytest.approx(np.log(1.2) / np.sqrt(2), abs=0.01)
    assert noise.offset_sd["launch-bound"] == 0.0


def test_main_prints_both_tables(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, published: power.Noise
) -> None:
    read: list[tuple[Path, str, tuple[str, ...]]] = []
    monkeypatch.setattr(
        power, "load_noise", lambda results, matrix_set, sets: read.append((results, matrix_set, sets)) or published
    )
    args = ["--results", "elsewhere", "--sets", "a,b/c", "--trials", "13", "--repeats", "3", "--threshold", "5"]
    assert power.main([*args, "--slowdown", "10", "--format", "markdown"]) == 0
    assert read == [(Path("elsewhere"), "guide-table/full", ("a", "b/c"))]
    out = capsys.readouterr().out
    assert "| repeats a side | threshold | A/A nights failing | class |" in out
    assert "| scenario | class | sets | spread | detectable at 3 | 10% caught at 3 |" in out
    assert "| fp16 | launch-bound | 5 | 12.1% |" in out


@pytest.mark.parametrize("args", [["--repeats", "0"], ["--repeats", "2.5"], ["--slowdown", "x"], ["--trials", "0"]])
def test_bad_arguments_exit_2(args: list[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        power.main(args)
    assert caught.value.code == 2
