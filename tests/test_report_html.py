"""The HTML report built from fixture result sets: self-contained, complete, escaped."""

from __future__ import annotations

import copy
import json
import re
from html import escape
from html.parser import HTMLParser
from pathlib import Path

import pytest
from report_fixtures import (
    CRASH_ERROR,
    H200_ENV,
    OOM_ERROR,
    SKIP_REASON,
    cpu_set,
    gpu_row,
    gpu_set,
    scaling_sets,
    write_set,
)

from bench.report.content import load_many
from bench.report.html import REPORT_HTML, write_report
from bench.results import CPU_NOTE

VOID = {"meta", "br", "hr", "img", "input", "link", "col", "wbr", "area", "base", "source"}
SVG_VOID_OK = {"path", "use", "rect", "stop", "circle", "ellipse", "line", "polyline", "polygon"}
MAX_BYTES = 5 * 1024 * 1024


class TagChecker(HTMLParser):
    """Records unbalanced tags and the text of the sections."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in VOID | SVG_VOID_OK:
            self.errors.append(f"self-closed <{tag}/>")

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
            return
        self.stack.pop()


def section(html: str, section_id: str) -> str:
    match = re.search(rf'<section id="{section_id}">(.*?)</section>', html, re.DOTALL)
    assert match, section_id
    return match.group(1)


def table_rows(html: str) -> dict[str, list[str]]:
    """Summary rows by scenario: the text of each cell."""
    rows = {}
    for tr in re.findall(r"<tr(?: class=\"baseline\")?>(.*?)</tr>", section(html, "summary"), re.DOTALL):
        cells = [re.sub(r"<[^>]+>", " ", c).split() for c in re.findall(r"<td[^>]*>(.*?)</td>", tr)]
        if cells:
            rows[cells[0][0]] = [" ".join(c) for c in cells]
    return rows


@pytest.fixture
def gpu_html(tmp_path: Path) -> str:
    path = write_report(gpu_set(tmp_path))
    assert path == tmp_path / "h200" / REPORT_HTML
    return path.read_text(encoding="utf-8")


def test_self_contained_and_small(gpu_html: str) -> None:
    assert gpu_html.startswith("<!DOCTYPE html>")
    assert not re.search(r"https?://", gpu_html)
    assert not re.search(r"<script|<link|<iframe|<img|<object|<embed|@import|\bsrc=", gpu_html, re.I)
    assert set(re.findall(r"url\((.)", gpu_html)) <= {"#"}  # only references inside the page
    assert set(re.findall(r'href="(.)', gpu_html)) <= {"#"}
    assert len(gpu_html.encode()) < MAX_BYTES
    assert len(gpu_html.encode()) < 400_000  # a regression guard well under the limit
    assert "@media print" in gpu_html


def test_well_formed_with_unique_ids(gpu_html: str) -> None:
    checker = TagChecker()
    checker.feed(gpu_html)
    checker.close()
    assert checker.errors == [] and checker.stack == []
    ids = re.findall(r'\bid="([^"]+)"', gpu_html)
    assert len(ids) == len(set(ids))


def test_header_shows_the_environment(gpu_html: str) -> None:
    header = gpu_html[gpu_html.index("<header>") : gpu_html.index("</header>")]
    assert "<h1>gpubench report: full on NVIDIA H200</h1>" in header
    for label, value in (
        ("GPU", "NVIDIA H200 (143,771 MB, compute capability 9.0)"),
        ("driver", "580.159.04"),
        ("CUDA runtime", "13.0"),
        ("torch", "2.11.0 (build 2.11.0+cu130)"),
        ("transformers", "5.17.0"),
        ("bitsandbytes", "0.50.2"),
        ("date", "2026-11-29 10:00 UTC"),
        ("command", "<code>gpubench run --matrix full --repeats 3</code>"),
        ("git commit", "<code>0123456789abcdef</code>"),
    ):
        assert f"<dt>{label}</dt><dd>{value}</dd>" in header, label


def test_summary_table(gpu_html: str) -> None:
    rows = table_rows(gpu_html)
    assert list(rows) == ["baseline", "fp16", "compile", "adafactor", "slowheavy", "flaky", "big-batch", "tf32"]
    # scenario, what, status, ok/runs, samples/s, spread, CV, vs base, peak MB, vs base,
    # reserved, allocated, MFU
    assert rows["baseline"] == [
        "baseline baseline",
        "baseline run",
        "ok",
        "3 / 3",
        "34.00",
        "33.00–35.00",
        "±2.9%",
        "ref",
        "8,501",
        "ref",
        "7,801",
        "7,501",
        "34.0%",
    ]
    assert rows["fp16"][:10] == [
        "fp16 front",
        "fp16 run",
        "ok",
        "3 / 3",
        "52.50",
        "52.00–53.00",
        "±1.0%",
        "+54.4%",
        "7,601",
        "−10.6%",
    ]
    assert rows["flaky"][2:6] == ["crashed", "2 / 3", "30.50", "30.00–31.00"]
    assert rows["big-batch"][2:] == ["oom", "0 / 3"] + ["–"] * 9
    assert [name for name, cells in rows.items() if cells[0].endswith(" front")] == ["fp16", "compile", "adafactor"]
    head = section(gpu_html, "summary")
    for header in (
        "samples/s<br><small>median</small>",
        "spread<br><small>min–max</small>",
        "peak MB<br><small>nvml-process</small>",
        "torch MB<br><small>max reserved</small>",
        "MFU",
    ):
        assert header in head


def test_failed_and_skipped_are_listed_with_reasons(gpu_html: str) -> None:
    problems = section(gpu_html, "problems")
    assert "<h2>Failed and skipped scenarios</h2>" in problems
    for name, status, count, reason in (
        ("flaky", "crashed", "1 of 3", CRASH_ERROR),
        ("big-batch", "oom", "3 of 3", OOM_ERROR),
        ("tf32", "skipped", "3 of 3", SKIP_REASON),
    ):
        assert re.search(
            rf"<td>{name}</td><td class=\"status-\w+\">{status}</td>"
            rf"<td class=\"num\">{count}</td><td class=\"reason\">{re.escape(reason)}",
            problems,
        ), name
    assert "&lt;frame&gt; at 0x0" in problems  # the stderr tail, escaped
    findings = section(gpu_html, "findings")
    assert "Without a full measurement: flaky (crashed), big-batch (oom), tf32 (skipped)" in findings


def test_changes_within_the_noise_are_tagged_and_those_beyond_are_plain(tmp_path: Path, gpu_html: str) -> None:
    rows = [
        {"scenario": name, "repeat": r, "status": "ok", "samples_per_s": value, "peak_mem_mb": 100.0 + r}
        for name, values in {"baseline": [20.1, 27.6, 14.2], "bf16": [33.0, 19.0, 29.5]}.items()
        for r, value in enumerate(values)
    ]
    html = write_report(write_set(tmp_path / "r", rows, None)).read_text(encoding="utf-8")
    assert table_rows(html)["bf16"][7] == "+46.8% (noise)"
    assert "(noise): within the noise, the min–max ranges over repeats overlap the baseline" in html
    assert "(1 run)" not in html
    assert table_rows(gpu_html)["compile"][7] == "+105.9%"  # every repeat beyond the baseline's range
    assert "(noise)" not in section(gpu_html, "summary") and '<p class="caveat">' not in gpu_html  # a GPU run


def test_three_charts_inline(gpu_html: str) -> None:
    assert gpu_html.count("<svg ") == 3
    for title in (
        "Samples per second per scenario",
        "Peak memory per scenario",
        "Speed versus peak memory per scenario",
    ):
        assert f'<svg role="img" aria-label="{title}"' in gpu_html
    assert "fp16  [front]" in gpu_html and "slowheavy  [front]" not in gpu_html
    assert "Error bars span the slowest to the fastest ok repeat." in gpu_html
    assert "Not shown (no measurement): big-batch, tf32." in gpu_html


def test_cpu_single_repeat_report(tmp_path: Path) -> None:
    html = write_report(cpu_set(tmp_path)).read_text(encoding="utf-8")
    rows = table_rows(html)
    assert rows["baseline"] == [
        "baseline baseline",
        "baseline on the CPU",
        "ok",
        "1 / 1",
        "76.10",
        "ref",
        "576",
        "ref",
    ]  # no spread, torch or MFU columns
    assert rows["accelerate"][0] == "accelerate front"
    assert rows["accelerate"][5:] == ["+50.2% (1 run)", "478", "−17.0% (1 run)"]  # one repeat: cannot tell
    assert "(1 run): too few repeats to tell a change from noise" in section(html, "summary")
    header = html[html.index("<header>") : html.index("</header>")]
    caveat = f'<p class="caveat">{escape(CPU_NOTE[0].upper() + CPU_NOTE[1:])}.</p>'
    assert caveat in header and header.index(caveat) < header.index('<dl class="env">')
    assert html.count("smoke test of the harness") == 1
    assert "<dt>GPU</dt><dd>none (CPU run)</dd>" in html
    assert "one repeat per scenario: no spread to show" in html
    assert "One repeat per scenario: no error bars." in html
    assert "CPU run: the only memory figure is the worker&#x27;s peak resident set size" in html
    assert "tf32 is a CUDA matmul mode" in section(html, "problems")


def test_everything_from_the_results_is_escaped(tmp_path: Path) -> None:
    evil = "<img src=x onerror=alert(1)>"
    rows = [
        {
            "scenario": "baseline",
            "repeat": 0,
            "status": "ok",
            "samples_per_s": 1.0,
            "peak_mem_mb": 1.0,
            "description": "<b>bold</b>",
        },
        {
            "scenario": evil,
            "repeat": 0,
            "status": "error",
            "error": "bad <script>alert(2)</script>",
            "stderr_tail": "</pre><script>alert(3)</script>",
        },
    ]
    env = {"command": "gpubench run --out '<x>'", "gpu": {"name": "<GPU & co>"}, "packages": {}}
    html = write_report(write_set(tmp_path / "r", rows, env)).read_text(encoding="utf-8")
    assert "<img" not in html and "<script" not in html and "<b>bold" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "bad &lt;script&gt;alert(2)&lt;/script&gt;" in html
    assert "&lt;GPU &amp; co&gt;" in html and "--out &#x27;&lt;x&gt;&#x27;" in html


def test_without_env_json(tmp_path: Path) -> None:
    rows = [{"scenario": "baseline", "repeat": 0, "status": "ok", "samples_per_s": 1.0, "peak_mem_mb": 1.0}]
    directory = write_set(tmp_path / "r", rows, None)
    html = write_report(directory / "results.csv").read_text(encoding="utf-8")
    assert "<dt>environment</dt><dd>unknown: no env.json beside the results</dd>" in html
    assert "<h1>gpubench report: r on unknown device</h1>" in html


def test_output_path_and_atomic_write(tmp_path: Path) -> None:
    directory = cpu_set(tmp_path)
    target = tmp_path / "out" / "custom.html"
    assert write_report(directory, target) == target
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert not (directory / REPORT_HTML).exists()
    assert not [p for p in target.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_run_from_an_edited_checkout_says_so(tmp_path: Path) -> None:
    out = gpu_set(tmp_path)
    env = json.loads((out / "env.json").read_text())
    env["git"]["dirty"] = True
    (out / "env.json").write_text(json.dumps(env))
    html = write_report(out).read_text(encoding="utf-8")
    assert "<dd><code>0123456789abcdef</code> (tracked files edited since this commit)</dd>" in html


def test_scaling_section_for_two_directories(tmp_path: Path) -> None:
    out = write_report(scaling_sets(tmp_path), tmp_path / "scaling.html")
    html = out.read_text(encoding="utf-8")
    scaling = section(html, "scaling")
    assert "<h2>Scaling with the number of GPUs</h2>" in scaling
    assert scaling.count("<svg ") == 2  # samples/s and efficiency: one workload
    assert 'aria-label="Samples per second against the number of GPUs"' in scaling
    assert 'aria-label="Scaling efficiency against GPUs"' in scaling
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", tr) for tr in re.findall(r"<tr>(.*?)</tr>", scaling)]
    assert [c for c in cells if c] == [  # the lines in the order their rows come
        ["fsdp full", "1", "81.00", "3", "1.00", "–", "one-gpu/fsdp"],
        ["fsdp full", "2", "141.00", "3", "0.87", "–", "two-gpus/fsdp"],
        ["ddp", "1", "101.00", "3", "1.00", "–", "single"],
        ["ddp", "2", "191.00", "3", "0.95", "–", "ddp"],
    ]
    assert f"rows pooled from 2 result directories: {tmp_path / 'one-gpu'}, {tmp_path / 'two-gpus'}" in html
    checker = TagChecker()
    checker.feed(html)
    assert checker.errors == [] and checker.stack == []


def test_no_scaling_section_without_a_strategy_at_two_gpu_counts(tmp_path: Path) -> None:
    one_gpu, _ = scaling_sets(tmp_path)
    html = write_report(one_gpu).read_text(encoding="utf-8")  # fsdp on 1 GPU only
    assert '<section id="summary">' in html
    assert 'id="scaling"' not in html and "Scaling with the number of GPUs" not in html


def test_pooled_runs_name_the_cards_of_one_model_they_came_from(tmp_path: Path) -> None:
    other = copy.deepcopy(H200_ENV)
    other["gpu"]["uuid"] = "GPU-0860ed39-170c"
    a = write_set(tmp_path / "a", [gpu_row("s", r, 100.0 + r, 9000.0) for r in range(3)], H200_ENV)
    b = write_set(tmp_path / "b", [gpu_row("s", r, 90.0 + r, 9000.0) for r in range(3)], other)
    c = write_set(tmp_path / "c", [gpu_row("s", r, 95.0 + r, 9000.0) for r in range(3)], H200_ENV)
    two_cards = load_many([a, b]).notes[0]
    assert two_cards.endswith(
        f"; on 2 cards of that model (GPU-1, GPU-0860ed39), each with its own host; the environment shown is {a}'s"
    )
    assert load_many([a, c]).notes[0].endswith(f"2 result directories: {a}, {c}; the environment shown is {a}'s")
