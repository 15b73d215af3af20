"""The charts as inline SVG: clean for embedding, every scenario labelled, failures kept visible."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from report_fixtures import H200_ENV, cpu_set, gpu_set, write_set

from bench.report import charts
from bench.report import content as report_data
from bench.report.content import Report

CHARTS = (charts.speed_chart, charts.memory_chart, charts.speed_memory_map)


def texts(svg: str) -> list[str]:
    """The text of every <text> element (svg.fonttype none keeps text as text)."""
    return [re.sub(r"<[^>]+>", "", t) for t in re.findall(r"<text\b[^>]*>(.*?)</text>", svg, re.DOTALL)]


@pytest.fixture
def gpu(tmp_path: Path) -> Report:
    return report_data.load(gpu_set(tmp_path))


@pytest.fixture
def cpu(tmp_path: Path) -> Report:
    return report_data.load(cpu_set(tmp_path))


@pytest.mark.parametrize("chart", CHARTS)
def test_svg_is_ready_to_inline(gpu: Report, chart: Callable[[Report], str]) -> None:
    svg = chart(gpu)
    assert svg.startswith('<svg role="img" aria-label=') and svg.rstrip().endswith("</svg>")
    assert re.match(r"<svg [^>]*><title>[^<]+</title>", svg)
    for banned in ("<?xml", "<!DOCTYPE", "<metadata", "xmlns", "http://", "https://", "<image", "<script"):
        assert banned not in svg, banned
    ids = re.findall(r'\bid="([^"]+)"', svg)
    assert len(ids) == len(set(ids)), "duplicate ids"
    prefix = ids[0].split("-")[0]
    assert all(i.startswith(prefix + "-") for i in ids)
    refs = re.findall(r'url\(#([^)]+)\)|href="#([^"]+)"', svg)
    assert refs and all((a or b) in ids for a, b in refs), "a reference to an id that is not there"


def test_chart_ids_differ_between_charts(gpu: Report) -> None:
    id_sets = [set(re.findall(r'\bid="([^"]+)"', chart(gpu))) for chart in CHARTS]
    assert not (id_sets[0] & id_sets[1]) and not (id_sets[1] & id_sets[2]) and not (id_sets[0] & id_sets[2])


def test_speed_chart_labels_bars_and_keeps_failed_rows(gpu: Report) -> None:
    svg = charts.speed_chart(gpu)
    words = texts(svg)
    for name in ("baseline", "fp16", "compile", "adafactor", "slowheavy", "flaky", "big-batch", "tf32"):
        assert name in words, name  # every scenario has its row, failed ones too
    assert "34.00  (baseline)" in words
    assert "52.50  (+54.4%)" in words
    assert "30.50  (−10.3%) (2 runs)  [1 of 3 repeats not ok]" in words  # 2 ok repeats: too few to tell
    assert any(w.startswith("OOM: no measurement (CUDA out of memory.") for w in words)
    assert any(w.startswith("SKIPPED: no measurement (tf32 is a CUDA matmul mode") for w in words)
    assert "samples/s (median over ok repeats; error bars: min to max over ok repeats)" in words
    assert svg.count('id="speed-LineCollection') == 6  # error bars: the six measured scenarios


def test_single_repeat_has_no_error_bars(cpu: Report) -> None:
    svg = charts.speed_chart(cpu)
    assert "LineCollection" not in svg
    assert "samples/s (median over ok repeats; one repeat)" in texts(svg)


def test_memory_chart_shows_each_api_on_gpu_and_rss_on_cpu(gpu: Report, cpu: Report) -> None:
    words = texts(charts.memory_chart(gpu))
    assert {"NVML per-process peak", "torch max reserved", "torch max allocated"} <= set(words)
    assert {"8,501", "7,801", "7,501"} <= set(words)  # baseline: NVML, reserved, allocated medians
    assert any(w.startswith("OOM: no measurement") for w in words)
    words = texts(charts.memory_chart(cpu))
    assert "peak RSS (getrusage)" in words and "478" in words
    assert "torch max reserved" not in words and "NVML per-process peak" not in words


def test_map_labels_every_point_and_marks_front_and_baseline(gpu: Report) -> None:
    words = texts(charts.speed_memory_map(gpu))
    assert {"compile  [front]", "fp16  [front]", "adafactor  [front]"} <= set(words)
    assert {"baseline", "flaky", "slowheavy"} <= set(words)
    assert not any(w.startswith(("slowheavy ", "baseline ", "flaky ")) for w in words)
    assert "big-batch" not in words and "tf32" not in words  # no measurement: not a point
    assert "faster, less memory than baseline" in words


def test_map_without_points(tmp_path: Path) -> None:
    rows = [{"scenario": "baseline", "repeat": 0, "status": "oom", "error": "out of memory"}]
    report = report_data.load(write_set(tmp_path / "r", rows, H200_ENV))
    assert "no scenario with both a speed and a memory figure" in texts(charts.speed_memory_map(report))
    assert any(w.startswith("OOM: no measurement") for w in texts(charts.speed_chart(report)))


def test_a_dollar_sign_is_not_mathtext(tmp_path: Path) -> None:
    rows = [{"scenario": "cost $5 $6", "repeat": 0, "status": "ok", "samples_per_s": 1.0, "peak_mem_mb": 2.0}]
    report = report_data.load(write_set(tmp_path / "r", rows, None))
    for chart in CHARTS:
        assert any("cost $5 $6" in w for w in texts(chart(report)))
