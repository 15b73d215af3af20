"""The markdown report: locked output, aligned tables, units in headers, escaped cells."""
# ruff: noqa: E501  (the locked markdown has long lines)

from __future__ import annotations

from pathlib import Path

from report_fixtures import CPU_ENV, H200_ENV, cpu_set, gpu_set, write_set

from bench.report import content as report_data
from bench.report import markdown as report_md
from bench.results import CPU_NOTE

SMALL = """\
## gpubench report: full on NVIDIA H200

NVIDIA H200 · driver 580.159.04 · CUDA 13.0 · torch 2.11.0 · transformers 5.17.0 · bitsandbytes 0.50.2 · 2026-11-29 10:00 UTC

Command: `gpubench run --matrix full --repeats 3`

| Scenario   | Status | ok/runs | samples/s | Δ samples/s (%) | Peak mem (MB, nvml-process) | Δ peak mem (%) | MFU (%) |
|:-----------|:-------|--------:|----------:|----------------:|----------------------------:|---------------:|--------:|
| baseline ★ | ok     |     1/1 |     10.00 |             ref |                       1,000 |            ref |    25.0 |
| a\\|b ◆     | ok     |     1/1 |     12.50 |   +25.0 (1 run) |                         900 |  −10.0 (1 run) |    30.0 |
| big        | oom    |     0/1 |         – |               – |                           – |              – |       – |

★ baseline · ◆ Pareto front (no other scenario is both faster and lighter) · medians over ok repeats · Δ: change vs baseline; (1 run): too few repeats to tell a change from noise

### Findings

- Fastest: one repeat: cannot tell differences from noise; the best figure: a\\|b at 12.50 samples/s (+25.0% vs baseline).
- Lowest peak memory: one repeat: cannot tell differences from noise; the best figure: a\\|b at 900 MB (−10.0% vs baseline).
- Not beaten on both speed and memory by any other scenario (Pareto front): a\\|b.
- Without a full measurement: big (oom); see the list of failed and skipped scenarios.
- _one repeat per scenario: no spread to show (run with --repeats 3 for error bars, to tell differences from noise, and for significance tests in gpubench compare)_

### Failed and skipped

| Scenario | Status | Repeats not ok | Reason                                        |
|:---------|:-------|---------------:|:----------------------------------------------|
| big      | oom    |         1 of 1 | CUDA out of memory \\| tried 2 GiB second line |
"""


def small_set(tmp_path: Path) -> Path:
    rows = [
        {
            "scenario": "baseline",
            "repeat": 0,
            "status": "ok",
            "samples_per_s": 10.0,
            "peak_mem_mb": 1000.0,
            "peak_mem_source": "nvml-process",
            "mfu": 0.25,
        },
        {
            "scenario": "a|b",
            "repeat": 0,
            "status": "ok",
            "samples_per_s": 12.5,
            "peak_mem_mb": 900.0,
            "peak_mem_source": "nvml-process",
            "mfu": 0.3,
        },
        {"scenario": "big", "repeat": 0, "status": "oom", "error": "CUDA out of memory | tried 2 GiB\nsecond line"},
    ]
    return write_set(tmp_path / "small", rows, H200_ENV)


def tables(text: str) -> list[list[str]]:
    out: list[list[str]] = []
    previous = ""
    for line in text.splitlines():
        if line.startswith("|"):
            if not previous.startswith("|"):
                out.append([])
            out[-1].append(line)
        previous = line
    return out


def test_locked_output(tmp_path: Path) -> None:
    assert report_md.render(report_data.load(small_set(tmp_path))) == SMALL


def test_tables_line_up_with_numbers_right_aligned(tmp_path: Path) -> None:
    text = report_md.render(report_data.load(gpu_set(tmp_path)))
    summary, problems = tables(text)
    assert summary[0] == (
        "| Scenario    | Status  | ok/runs | samples/s | CV (%) | Δ samples/s (%) "
        "| Peak mem (MB, nvml-process) | Δ peak mem (%) | MFU (%) |"
    )
    assert summary[1].split("|")[1:-1] == [":" + "-" * 12, ":" + "-" * 8] + [
        "-" * n + ":" for n in (8, 10, 7, 16, 28, 15, 8)
    ]
    for table in (summary, problems):
        assert len({len(line) for line in table}) == 1, table
    assert "| baseline ★  | ok      |     3/3 |     34.00 |    2.9 |             ref |" in summary[2]
    assert "| compile ◆   | ok      |     3/3 |     70.00 |    1.4 |          +105.9 |" in summary[4]
    assert summary[-2].startswith("| big-batch   | oom     |     0/3 |         – |")
    assert len(summary) == 2 + 8 and len(problems) == 2 + 3


def test_findings_and_problems_sections(tmp_path: Path) -> None:
    text = report_md.render(report_data.load(gpu_set(tmp_path)))
    findings = text[text.index("### Findings") : text.index("### Failed and skipped")]
    assert "- Biggest speed-up at a memory cost: compile (+105.9% speed, +41.2% memory)." in findings
    assert (
        "- Not beaten on both speed and memory by any other scenario (Pareto front): fp16, compile, adafactor."
        in findings
    )
    assert "| flaky     | crashed |         1 of 3 | worker exited with signal 11 (SIGSEGV)" in text


def test_cpu_run_drops_unknown_columns(tmp_path: Path) -> None:
    text = report_md.render(report_data.load(cpu_set(tmp_path)))
    header = tables(text)[0][0]
    assert "MFU" not in header and "CV" not in header and "Peak mem (MB, rss)" in header
    lines = text.splitlines()
    assert lines[2] == f"> **{CPU_NOTE[0].upper()}{CPU_NOTE[1:]}.**", "CPU figures say what they are, first"
    assert lines[4] == "CPU · torch 2.11.0 · transformers 5.17.0 · bitsandbytes 0.50.2 · 2026-11-29 10:00 UTC"
    assert text.count("smoke test of the harness") == 1
    assert CPU_ENV["command"] in text


def test_markup_in_names_is_escaped(tmp_path: Path) -> None:
    rows = [
        {"scenario": "base_*line*", "repeat": 0, "status": "ok", "samples_per_s": 1.0, "peak_mem_mb": 1.0},
        {"scenario": "<b>x</b>", "repeat": 0, "status": "ok", "samples_per_s": 2.0, "peak_mem_mb": 2.0},
    ]
    text = report_md.render(report_data.load(write_set(tmp_path / "r", rows, None)))
    assert "base\\_\\*line\\* ★" in text and "\\<b\\>x\\</b\\> ◆" in text
    assert "Environment unknown (no env.json beside `" in text
