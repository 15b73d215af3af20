"""`gpubench compare` through the CLI: output formats, options, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import harness
import pytest
import typer
from compare_support import BAD_RESULT_FILES, env
from typer.testing import CliRunner

from bench.cli import compare_cmd
from bench.compare.comparison import ROW_COLUMNS
from bench.errors import IncomparableRuns
from bench.results import CPU_NOTE

REPO = Path(__file__).resolve().parents[1]
H200: dict[str, Any] = env()
A100 = {**H200, "gpu": {**H200["gpu"], "name": "NVIDIA A100-SXM4-80GB"}}


def reps(scenario: str, speeds: list[float], mem: float = 1000.0) -> list[dict[str, Any]]:
    return [
        {
            "scenario": scenario,
            "repeat": i + 1,
            "status": "ok",
            "samples_per_s": s,
            "peak_mem_mb": mem,
            "step_time_median_ms": 8000.0 / s,
            "final_loss": 2.5,
            "error": "",
        }
        for i, s in enumerate(speeds)
    ]


def write_run(directory: Path, rows: list[dict[str, Any]], env: dict | None = H200) -> Path:
    return harness.write_run(directory, rows, env)


BASE = reps("baseline", [100.0, 100.5, 99.5]) + reps("fp16", [200.0, 201.0, 199.0], mem=800.0)
SLOWER = reps("baseline", [90.0, 90.4, 89.6]) + reps("fp16", [200.0, 201.0, 199.0], mem=800.0)


@pytest.fixture
def runs(tmp_path: Path) -> dict[str, Path]:
    return {
        "base": write_run(tmp_path / "base", BASE),
        "same": write_run(tmp_path / "same", BASE),
        "slower": write_run(tmp_path / "slower", SLOWER),
        "fewer": write_run(tmp_path / "fewer", BASE[:3]),
        "a100": write_run(tmp_path / "a100", BASE, A100),
    }


def make_app() -> typer.Typer:
    """compare alone, as bench.cli wires it (a callback keeps `compare` a subcommand)."""
    app = typer.Typer()

    @app.callback()
    def _root() -> None: ...

    compare_cmd.register(app)
    return app


def invoke(*args: str | Path) -> Any:
    return CliRunner().invoke(make_app(), ["compare", *map(str, args)], terminal_width=200)


def gpubench(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """The real console entry point, in a subprocess (no shell)."""
    command = [sys.executable, "-c", "from bench.cli import main; main()", *map(str, args)]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)


# -- CliRunner: output and options ---------------------------------------------------------------
def test_identical_runs_exit_0_with_a_table(runs: dict[str, Path]) -> None:
    result = invoke(runs["base"], runs["same"])
    assert result.exit_code == 0, result.output
    assert "samples/s" in result.stdout  # the table's label for samples_per_s
    assert "PASS (exit 0): unchanged 6" in result.stdout


def test_slowdown_exits_1_and_names_the_regression(runs: dict[str, Path]) -> None:
    result = invoke(runs["base"], runs["slower"])
    assert result.exit_code == 1
    line = next(x for x in result.stdout.splitlines() if "baseline" in x and "samples/s" in x)
    assert "-10.0%" in line and "regression" in line and "80.0 → 88.9" in line  # the step times beside
    assert "FAIL (exit 1): REGRESSION 1, unchanged 5" in result.stdout


def test_one_repeat_against_three_says_it_judged_by_the_threshold_alone(tmp_path: Path, runs: dict[str, Path]) -> None:
    once = write_run(tmp_path / "once", reps("baseline", [90.0]) + reps("fp16", [200.0], mem=800.0))
    result = invoke(runs["base"], once)
    assert result.exit_code == 1
    assert result.stdout.splitlines()[-1] == (
        "FAIL (exit 1): REGRESSION 1, unchanged 5 (judged by the threshold alone: under 3 ok repeats a side)"
    )


def test_two_cpu_runs_headline_a_smoke_comparison(tmp_path: Path) -> None:
    cpu = env(None)
    base, slower = write_run(tmp_path / "base", BASE, cpu), write_run(tmp_path / "slower", SLOWER, cpu)
    result = invoke(base, slower)
    assert result.exit_code == 1  # the gate's policy stands
    assert result.stderr.startswith(f"gpubench: note: {CPU_NOTE}\n")
    last = result.stdout.splitlines()[-1]
    assert last == "CPU smoke comparison, not a verdict on hardware (exit 1): regression 1, unchanged 5"
    assert "FAIL" not in result.stdout and "REGRESSION" not in result.stdout
    markdown = invoke(base, slower, "--format", "markdown").stdout
    assert markdown.startswith("## ⚠️ gpubench compare: CPU smoke comparison, not a verdict on hardware (exit 1): ")
    assert f"- {CPU_NOTE}" in markdown and markdown.count("smoke test of the harness") == 1


def test_host_rss_is_shown_not_gated_and_a_gpu_memory_still_is(tmp_path: Path) -> None:
    """An A/A on the CPU: the worker's peak RSS moved 11% between two runs of the same matrix (issue
    58), which the 2% memory threshold, a GPU memory's, failed. RSS is shown with its change and
    the verdict `not gated`, the note says why, and the gate passes; NVML's peak still gates."""

    def rows(mem: float, source: str) -> list[dict[str, Any]]:
        return [{**r, "peak_mem_source": source} for r in reps("baseline", [100.0, 100.5, 99.5], mem=mem)]

    cpu = env(None)
    base, rerun = (
        write_run(tmp_path / "a", rows(1000.0, "rss"), cpu),
        write_run(tmp_path / "b", rows(1110.0, "rss"), cpu),
    )
    result = invoke(base, rerun)
    assert result.exit_code == 0, result.output
    line = next(x for x in result.stdout.splitlines() if "peak MB" in x)
    assert "+11.0%" in line and "not gated" in line, result.stdout
    assert "host RSS: shown, not gated" in result.stdout
    assert result.stdout.splitlines()[-1].endswith("(exit 0): unchanged 2, not gated 1")
    data = json.loads(invoke(base, rerun, "--format", "json").stdout)
    memory = next(r for r in data["rows"] if r["metric"] == "peak_mem_mb")
    assert memory["verdict"] == "not gated" and memory["note"].startswith("host RSS")
    gpu_base = write_run(tmp_path / "c", rows(1000.0, "nvml-process"))
    gpu_new = write_run(tmp_path / "d", rows(1110.0, "nvml-process"))
    gated = invoke(gpu_base, gpu_new)
    assert gated.exit_code == 1 and "regression" in next(x for x in gated.stdout.splitlines() if "peak MB" in x)


@pytest.mark.slow
def test_a_cpu_run_compared_with_its_rerun_exits_0(tmp_path: Path) -> None:
    """The same matrix run twice on the CPU (real workers), then compared: exit 0, the memory rows
    `not gated`. The speed threshold is set out of reach: a busy 2-core machine's speed moves by
    more than 5% between two runs, and that gate is the CPU smoke comparison's policy, not RSS's."""
    matrix = harness.write_matrix(tmp_path / "m.toml", {"baseline": {}, "small": {"batch_size": 2}}, base=harness.SHORT)
    for out in ("a", "b"):
        done = harness.gpubench("run", "--matrix", matrix, "--device", "cpu", "--out", tmp_path / out)
        assert done.returncode == 0, done.stderr[-2000:]
    compared = harness.gpubench("compare", tmp_path / "a", tmp_path / "b", "--threshold", "1000", "--format", "json")
    assert compared.returncode == 0, compared.stdout[-3000:] + compared.stderr[-2000:]
    memory = [r for r in json.loads(compared.stdout)["rows"] if r["metric"] == "peak_mem_mb"]
    assert len(memory) == 2 and {r["verdict"] for r in memory} == {"not gated"}


def test_results_csv_paths_work_like_directories(runs: dict[str, Path]) -> None:
    result = invoke(runs["base"] / "results.csv", runs["slower"] / "results.csv")
    assert result.exit_code == 1


def test_threshold_option_raises_the_speed_threshold(runs: dict[str, Path]) -> None:
    assert invoke(runs["base"], runs["slower"], "--threshold", "15").exit_code == 0


def test_memory_threshold_option(tmp_path: Path, runs: dict[str, Path]) -> None:
    bigger = write_run(tmp_path / "bigger", reps("baseline", [100.0, 100.5, 99.5], mem=1050.0))
    base = write_run(tmp_path / "base1", BASE[:3])
    assert invoke(base, bigger).exit_code == 1
    assert invoke(base, bigger, "--memory-threshold", "10").exit_code == 0


def test_missing_scenario_and_allow_missing(runs: dict[str, Path]) -> None:
    assert invoke(runs["base"], runs["fewer"]).exit_code == 1
    allowed = invoke(runs["base"], runs["fewer"], "--allow-missing")
    assert allowed.exit_code == 0
    assert "missing" in allowed.stdout


def test_gpu_mismatch_raises_and_can_be_allowed(runs: dict[str, Path]) -> None:
    refused = invoke(runs["base"], runs["a100"])
    assert isinstance(refused.exception, IncomparableRuns)  # main() turns it into exit 3
    allowed = invoke(runs["base"], runs["a100"], "--allow-env-mismatch", "--format", "json")
    assert allowed.exit_code == 0
    assert json.loads(allowed.stdout)["env_differences"][0] == {
        "key": "gpu.name",
        "base": "NVIDIA H200",
        "new": "NVIDIA A100-SXM4-80GB",
    }


def test_settings_mismatch_raises_and_can_be_allowed(tmp_path: Path, runs: dict[str, Path]) -> None:
    longer = write_run(tmp_path / "longer", [{**r, "samples": 2048} for r in BASE])
    shorter = write_run(tmp_path / "shorter", [{**r, "samples": 512} for r in BASE])
    refused = invoke(shorter, longer)
    assert isinstance(refused.exception, IncomparableRuns)  # main() turns it into exit 3
    assert refused.exception.message.startswith("scenarios were measured differently (baseline: samples 512 -> 2048")
    allowed = invoke(shorter, longer, "--allow-env-mismatch")
    assert allowed.exit_code == 0
    assert "note: scenarios were measured differently" in allowed.stderr
    assert "settings differ: samples 512 -> 2048" in allowed.stdout


def test_detect_says_how_many_repeats_each_scenario_needs(tmp_path: Path) -> None:
    loud = write_run(tmp_path / "loud", reps("quiet", [100.0, 100.5, 99.5]) + reps("loud", [100.0, 90.0, 110.0]))
    result = invoke("--detect", "5%", loud)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert any(line.split() == ["│", "quiet", "│", "3", "│", "0.5%", "│", "5.0%", "│", "3", "│"] for line in lines)
    assert any("loud" in line and "more than 50" in line for line in lines)
    data = json.loads(invoke("--detect", "20", loud, "--format", "json").stdout)
    assert list(data) == [
        "schema", "target_pct", "alpha", "power", "threshold_pct", "family", "sources", "note", "rows"
    ]  # fmt: skip
    assert data["schema"] == "gpubench.compare-plan/1" and data["family"] == 2
    # loud: spread 0.1003; at 6 a side (t10(1 - 0.05/4) + t10(0.8)) x 0.1003 x sqrt(2/6) = 0.203: 18.4%;
    # at 5 a side (df 8) 20.6%, beyond the 20% asked for
    assert [(r["scenario"], r["repeats_needed"]) for r in data["rows"]] == [("quiet", 3), ("loud", 6)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--detect", "five"], "'five' is not a number of percent"),
        (["--detect", "0"], "'0' must lie above 0"),
        ([], "give the new run too (or --detect PCT)"),
    ],
)
def test_detect_and_new_are_checked(runs: dict[str, Path], args: list[str], message: str) -> None:
    result = invoke(runs["base"], *args)
    assert result.exit_code == 2
    assert message in result.output


def test_json_keys_are_locked(runs: dict[str, Path]) -> None:
    result = invoke(runs["base"], runs["slower"], "--format", "json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert list(data) == [
        "schema",
        "exit_code",
        "base",
        "new",
        "method",
        "alpha",
        "power",
        "min_repeats",
        "thresholds_pct",
        "allow_missing",
        "counts",
        "env_differences",
        "setting_differences",
        "notes",
        "rows",
    ]
    assert data["schema"] == "gpubench.compare/2"
    assert data["exit_code"] == 1
    assert list(data["base"]) == ["path", "gpu"]
    assert data["thresholds_pct"] == {"samples_per_s": 5.0, "peak_mem_mb": 2.0, "energy_per_sample_j": 5.0}
    assert data["counts"] == {"regression": 1, "unchanged": 5}
    assert all(list(r) == ROW_COLUMNS for r in data["rows"])
    assert ROW_COLUMNS == [
        "scenario",
        "metric",
        "base",
        "new",
        "change_pct",
        "base_step_ms",
        "new_step_ms",
        "threshold_pct",
        "detectable_pct",
        "spread_pct",
        "base_n",
        "new_n",
        "p_value",
        "p_holm",
        "verdict",
        "base_status",
        "new_status",
        "note",
    ]
    first = data["rows"][0]
    assert first == {
        "scenario": "baseline",
        "metric": "samples_per_s",
        "base": 100.0,
        "new": 90.0,
        "change_pct": -10.0,
        "base_step_ms": 80.0,
        "new_step_ms": pytest.approx(88.889, abs=1e-3),
        "threshold_pct": 5.0,
        "detectable_pct": 5.0,
        "spread_pct": pytest.approx(0.473, abs=1e-3),
        "base_n": 3,
        "new_n": 3,
        "p_value": pytest.approx(5.37e-6, rel=1e-2),
        "p_holm": pytest.approx(2 * 2 * 5.37e-6, rel=1e-2),  # Holm over 2 scenarios, x 2 quantities
        "verdict": "regression",
        "base_status": "ok",
        "new_status": "ok",
        "note": "",
    }
    assert data["rows"][2]["p_value"] is None  # final_loss: no test; NaN becomes null


def test_csv_format(runs: dict[str, Path]) -> None:
    result = invoke(runs["base"], runs["slower"], "--format", "csv")
    lines = result.stdout.splitlines()
    assert lines[0] == ",".join(ROW_COLUMNS)
    assert lines[1].startswith("baseline,samples_per_s,100.0,90.0,-10.0,80.0,88.88")
    assert lines[1].endswith(",regression,ok,ok,") and len(lines[1].split(",")) == len(ROW_COLUMNS)
    assert len(lines) == 7


def test_markdown_to_a_file(tmp_path: Path, runs: dict[str, Path]) -> None:
    out = tmp_path / "summary.md"
    result = invoke(runs["base"], runs["slower"], "--format", "markdown", "--output", out)
    assert result.exit_code == 1
    assert result.stdout == ""
    text = out.read_text()
    assert text.startswith("## ❌ gpubench compare: FAIL (exit 1): REGRESSION 1, unchanged 5\n")
    cells = "| baseline | samples_per_s | 100.00 | 90.00 | -10.0% | 80.0 → 88.9 | 3/3 | 0.5% | 5.0% | 0.000 |"
    assert f"{cells} **regression** |" in text
    assert "Holm" in text
    assert f"wrote {out}" in result.stderr


def test_help_lists_exit_codes_and_an_example() -> None:
    result = CliRunner().invoke(make_app(), ["compare", "--help"])
    assert result.exit_code == 0
    for text in (
        "Examples:",
        "gpubench compare baselines/h200 results/nightly",
        "gpubench compare --detect 5 results/guide-table/full",
        "Exit codes:",
        "0  no regression",
        "1  a regression, a new failure or a missing scenario",
        "2  bad input",
        "3  incomparable runs",
    ):
        assert text in result.stdout, text


# -- the real entry point: exit codes and one-line errors ----------------------------------------
# `python -m bench` for the first two; bench.cli.main in this process for each bad input file (the
# same function, without a new interpreter: ~1.3 s of CPU each).
def test_entry_point_regression_exits_1(runs: dict[str, Path]) -> None:
    done = gpubench("compare", runs["base"], runs["slower"], "--format", "json")
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["counts"] == {"regression": 1, "unchanged": 5}


def test_entry_point_gpu_mismatch_exits_3(runs: dict[str, Path]) -> None:
    done = gpubench("compare", runs["base"], runs["a100"])
    assert done.returncode == 3
    assert done.stdout == ""
    assert done.stderr == (
        "gpubench: error: the runs come from different devices: "
        f"{runs['base'] / 'results.csv'} on NVIDIA H200, {runs['a100'] / 'results.csv'} on "
        "NVIDIA A100-SXM4-80GB (compare runs from the same GPU model, or pass "
        "--allow-env-mismatch)\n"
    )
    allowed = gpubench("compare", runs["base"], runs["a100"], "--allow-env-mismatch")
    assert allowed.returncode == 0, allowed.stderr


@pytest.mark.parametrize(
    ("text", "problem"), [pytest.param(None, "no such results file", id="missing"), *BAD_RESULT_FILES]
)
def test_entry_point_bad_input_exits_2_with_one_line(
    tmp_path: Path, runs: dict[str, Path], text: str | None, problem: str
) -> None:
    bad = tmp_path / "bad" / "results.csv"
    if text is not None:
        bad.parent.mkdir()
        bad.write_text(text)
    done = harness.gpubench_in_process("compare", runs["base"], bad)
    assert done.code == 2
    assert done.out == ""
    assert done.err == f"gpubench: error: {bad}: {problem}\n"


def test_two_profiled_runs_name_the_kernel_categories_behind_a_slow_down(tmp_path: Path) -> None:
    """`run --profile` gives each row its kernel time per step by category (prof_*_ms); compare puts
    the slow-down of a row profiled on both sides on the categories that moved, in every format."""
    kernels = {"gemm": 30.0, "attention": 5.0, "elementwise": 10.0, "optimizer": 3.0, "copy": 1.0, "comm": 0.0}

    def profiled(rows: list[dict[str, Any]], **moved: float) -> list[dict[str, Any]]:
        ms = kernels | {"idle": 1.0} | moved
        return [r | {f"prof_{k}_ms": v for k, v in ms.items()} | {"prof_steps": 2} for r in rows]

    base = write_run(tmp_path / "base", profiled(BASE))
    slower = write_run(tmp_path / "slower", profiled(SLOWER[:3], optimizer=8.0, idle=4.0) + profiled(SLOWER[3:]))
    said = "profiled step +8.0 ms: +5.0 ms optimizer, +3.0 ms idle"
    for fmt in ("table", "markdown", "json"):
        done = gpubench("compare", base, slower, "--format", fmt)
        assert done.returncode == 1, done.stderr
        assert said in " ".join(done.stdout.split()), (fmt, done.stdout[-2000:])
