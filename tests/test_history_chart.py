"""bench.history.chart: the terminal sparkline, its marker line, and the SVG file."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from bench.errors import BadInput
from bench.history.chart import marker_line, sparkline, write_svg
from bench.history.check import Mark, Point, Series
from bench.history.library import SeriesView


def test_sparkline_scales_from_lowest_to_highest() -> None:
    assert sparkline([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]) == "▁▂▃▄▅▆▇█"
    assert sparkline([10.0, 20.0, 10.0]) == "▁█▁"


def test_sparkline_leaves_a_gap_for_missing_values_and_copes_with_flat_series() -> None:
    assert sparkline([1.0, None, math.nan, 2.0]) == "▁  █"
    assert sparkline([5.0, 5.0]) == "▅▅"
    assert sparkline([None, None]) == "  "
    assert sparkline([]) == ""


def test_marker_line_marks_flagged_accepted_noisy_and_missing_points() -> None:
    flags = ["within", "beyond", "accepted", "noisy", "no value", "failed", "improvement"]
    assert marker_line([Mark(i, "samples_per_s", f) for i, f in enumerate(flags)]) == " !|?x! "


def view() -> SeriesView:
    t0 = datetime(2026, 11, 1, 2)
    points = tuple(
        Point(i, t0 + timedelta(days=i), "ok", {"samples_per_s": v}, {}) for i, v in enumerate([100.0, 80.0, 80.0])
    )
    marks = (
        Mark(0, "samples_per_s", "no baseline", value=100.0),
        Mark(1, "samples_per_s", "accepted", value=80.0, baseline=100.0, note="accepted: torch upgrade"),
        Mark(2, "samples_per_s", "beyond", value=80.0, baseline=80.0),
    )
    series = Series("0123456789abcdef", "bf16", "NVIDIA H200", "bert-large", {}, points)
    return SeriesView(series, "samples_per_s", marks, points)


def test_write_svg_draws_the_series_with_its_accepted_step(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "chart.svg"
    write_svg([view()], path, "bf16: samples_per_s")
    svg = path.read_text()
    assert "<svg" in svg and "bf16: samples_per_s" in svg
    assert "torch upgrade" in svg and "NVIDIA H200, bert-large [01234567]" in svg
    assert not list(tmp_path.glob(".*tmp"))  # written atomically


def test_write_svg_wants_an_svg_file(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"name the file \*\.svg"):
        write_svg([view()], tmp_path / "chart.png", "x")
    assert not (tmp_path / "chart.png").exists()
