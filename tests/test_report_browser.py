"""The HTML report in a real headless browser (Debian's chromium): it loads without console
errors, the DOM holds the report, and a screenshot of it is not blank.

Skipped only where chromium is missing and CI is not set; in CI (CI=true) a missing chromium fails.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from report_fixtures import SKIP_REASON, gpu_set

from bench.report.html import write_report

REPO = Path(__file__).resolve().parents[1]
TOOL = REPO / "tools" / "screenshot_report.py"


def load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("screenshot_report", TOOL)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tool = load_tool()
IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="module", autouse=True)
def chromium() -> str:
    path = tool.find_chromium()
    if path is None:
        if IN_CI:
            pytest.fail("chromium is missing in CI (CI is set): apt-get install chromium")
        pytest.skip("chromium is not installed (apt-get install chromium); CI is not set")
    return path


def colour_stats(png: Path) -> tuple[tuple[int, int], int, float]:
    """(size, distinct colours, share of pixels that are not the background colour)."""
    from PIL import Image

    with Image.open(png) as image:
        rgb = image.convert("RGB")
        size = rgb.size
        counts = rgb.getcolors(maxcolors=size[0] * size[1]) or []
    background = max(counts)[0]
    return size, len(counts), 1 - background / (size[0] * size[1])


def test_dom_has_the_report_and_no_console_errors(tmp_path: Path) -> None:
    html = write_report(gpu_set(tmp_path))
    dom, messages = tool.dump_dom(html)
    assert messages == []
    assert dom.count("<svg") == 3
    assert "<h1>gpubench report: full on NVIDIA H200</h1>" in dom
    assert "<h2>Failed and skipped scenarios</h2>" in dom and SKIP_REASON in dom
    assert dom.count("<tr") >= 1 + 8 + 1 + 3  # summary header + 8 scenarios, problems header + 3


def test_screenshot_tool_writes_a_non_blank_png(tmp_path: Path) -> None:
    directory, png = gpu_set(tmp_path), tmp_path / "report.png"
    done = subprocess.run(
        [sys.executable, str(TOOL), str(directory), str(png)], cwd=REPO, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    assert f"screenshot_report: wrote {png}" in done.stderr
    size, colours, ink = colour_stats(png)
    assert size == (1280, 2000)
    assert colours > 100, colours  # text antialiasing, bars, hatching
    assert ink > 0.03, ink
    assert not (directory / "report.html").exists()  # the tool leaves the result set alone


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """Controls: a script error is caught, and a blank page fails the non-blank check."""
    broken = tmp_path / "broken.html"
    broken.write_text("<!DOCTYPE html><title>x</title><script>undefinedFunction();</script>", encoding="utf-8")
    messages = tool.screenshot(broken, tmp_path / "broken.png", 400, 300)
    assert any("Uncaught ReferenceError: undefinedFunction is not defined" in m for m in messages)
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><title>blank</title>", encoding="utf-8")
    assert tool.screenshot(blank, tmp_path / "blank.png", 400, 300) == []
    _, colours, ink = colour_stats(tmp_path / "blank.png")
    assert colours <= 100 and ink <= 0.03
