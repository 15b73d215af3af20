"""`gpubench run --require PATTERN` (bench/run/required.py): a required scenario's skipped row fails
the run with exit 5 and one line naming it and why; its row is still written; a pattern that
matches no scenario is bad input before any work."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import SHORT, error_lines, gpubench, gpubench_in_process, results, statuses, write_matrix

from bench.errors import BadInput, ExitCode
from bench.run.outcome import RunOutcome
from bench.run.required import check_patterns, judge_required, matches, message, skipped_required

TF32_ON_CPU = "tf32 is a CUDA matmul mode (Ampere or newer); it has no meaning on the CPU"
EIGHT_BIT = 'optimizer = "adamw_8bit" needs the bitsandbytes package (ImportError: no); pip install bitsandbytes'
ROWS = [
    {"scenario": "baseline", "repeat": 0, "status": "ok", "error": ""},
    {"scenario": "adam-8bit", "repeat": 0, "status": "skipped", "error": EIGHT_BIT},
    {"scenario": "combo-8bit", "repeat": 0, "status": "skipped", "error": EIGHT_BIT},
    {"scenario": "tf32", "repeat": 0, "status": "skipped", "error": TF32_ON_CPU},
    {"scenario": "adam-8bit", "repeat": 1, "status": "skipped", "error": EIGHT_BIT},
    {"scenario": "fp16", "repeat": 0, "status": "error", "error": "boom"},
]


def test_patterns_are_case_sensitive_globs_over_scenario_names() -> None:
    assert matches("combo-8bit", ["combo-*"]) and matches("tf32", ["*"]) and matches("fp16", ["bf16", "fp1?"])
    assert not matches("Combo-8bit", ["combo-*"]) and not matches("baseline", ["base"])


def test_a_pattern_that_matches_no_scenario_is_bad_input() -> None:
    check_patterns(["*", "combo-*", "tf32"], ["baseline", "combo-8bit", "tf32"], "matrix 'full'")
    check_patterns([], ["baseline"], "matrix 'full'")  # no --require: nothing required
    with pytest.raises(BadInput) as caught:
        check_patterns(["tf32", "comb-*"], ["baseline", "combo-8bit", "tf32"], "matrix 'full'")
    expected = "--require 'comb-*' matches no scenario of matrix 'full' (baseline, combo-8bit, tf32)"
    assert caught.value.message == expected


def test_the_skipped_required_scenarios_once_each_in_row_order_with_why() -> None:
    assert skipped_required(ROWS, ["*"]) == (("adam-8bit", EIGHT_BIT), ("combo-8bit", EIGHT_BIT), ("tf32", TF32_ON_CPU))
    assert skipped_required(ROWS, ["baseline", "fp16"]) == ()  # ok and failed rows are not skips
    assert skipped_required(ROWS, ["tf*"]) == (("tf32", TF32_ON_CPU),)
    assert message(skipped_required(ROWS, ["*"])) == (
        f"required by --require but skipped: adam-8bit, combo-8bit ({EIGHT_BIT}); tf32 ({TF32_ON_CPU})"
    )


@pytest.mark.parametrize(
    "code, patterns, expected",
    [
        (ExitCode.OK, ["*"], ExitCode.SKIPPED_REQUIRED),
        (ExitCode.FAILED, ["tf32"], ExitCode.SKIPPED_REQUIRED),  # the failed rows stay rows; 5 wins over 1
        (ExitCode.TIME_LIMIT, ["*"], ExitCode.TIME_LIMIT),  # not done: --resume finishes it
        (ExitCode.INTERRUPTED, ["*"], ExitCode.INTERRUPTED),
        (ExitCode.OK, ["baseline"], ExitCode.OK),
        (ExitCode.FAILED, [], ExitCode.FAILED),
    ],
)
def test_a_required_skip_fails_a_finished_run_only(code: ExitCode, patterns: list[str], expected: ExitCode) -> None:
    judged = judge_required(RunOutcome(ROWS, code, code is ExitCode.INTERRUPTED), patterns)
    assert judged.exit_code is expected and judged.rows is ROWS
    assert bool(judged.skipped_required) == any(matches(n, patterns) for n in ("adam-8bit", "combo-8bit", "tf32"))


def test_run_refuses_a_pattern_that_matches_nothing_before_any_work(tmp_path: Path) -> None:
    matrix = write_matrix(tmp_path / "m.toml", {"baseline": {}, "tf32": {"tf32": True}})
    out = tmp_path / "out"
    done = gpubench_in_process("run", "--matrix", matrix, "--out", out, "--require", "tf32,fp8*")
    assert (done.code, done.out) == (2, "")
    assert error_lines(done.err) == [
        "gpubench: error: --require 'fp8*' matches no scenario of matrix 'm' (baseline, tf32) "
        "(a pattern is a scenario name or a glob such as 'combo-*'; '*' requires every scenario)"
    ]
    only = gpubench_in_process("run", "--matrix", matrix, "--only", "baseline", "--out", out, "--require", "tf32")
    assert only.code == 2 and "--require 'tf32' matches no scenario of matrix 'm' with --only (baseline)" in only.err
    empty = gpubench_in_process("run", "--matrix", matrix, "--out", out, "--require", "")
    assert empty.code == 2 and "--require '' holds an empty scenario name" in empty.err
    assert not out.exists()  # refused before anything was created


@pytest.mark.slow
def test_a_required_row_skipped_on_the_cpu_exits_5_and_is_written(tmp_path: Path) -> None:
    matrix = write_matrix(tmp_path / "m.toml", {"baseline": {}, "tf32": {"tf32": True}}, base=SHORT)
    out = tmp_path / "out"
    cpu = ("--device", "cpu", "--launcher", "spawn")
    done = gpubench("run", "--matrix", matrix, *cpu, "--out", out, "--require", "*", timeout=300)
    assert done.returncode == 5, done.stderr
    line = f"required by --require but skipped: tf32 ({TF32_ON_CPU})"
    assert done.stderr.splitlines().count(line) == 1  # one line, on stderr; the baseline ran and is not named
    assert statuses(results(out)) == {"baseline": "ok", "tf32": "skipped"}  # nothing measured is lost
    assert "tf32" in done.stdout  # the summary table still shows every row

    # a resume judges the rows it keeps too: the skipped row is final, so it fails again, or passes
    # when only the scenario that ran is required
    again = gpubench("run", "--resume", out, "--require", "tf32", timeout=120)
    assert (again.returncode, again.stderr.splitlines().count(line)) == (5, 1), again.stderr
    assert gpubench("run", "--resume", out, "--require", "base*", timeout=120).returncode == 0
    # (without --require a skip is fine: test_a_required_skip_fails_a_finished_run_only)
    bad = gpubench("run", "--resume", out, "--require", "bf16", timeout=120)
    assert bad.returncode == 2 and f"--require 'bf16' matches no scenario of the run in {out}" in bad.stderr
