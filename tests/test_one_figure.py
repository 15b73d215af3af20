"""One stored figure, shown the same everywhere: over generated result directories (scenarios of one
or two models, repeats, failed repeats), every output that shows a scenario's samples/s, peak memory,
change vs the baseline, status or model shows the figure of the stored rows: the run table (and
`report --format table`), `report` as markdown, JSON, CSV and HTML, `compare` and `history`.

The expected figures are computed here from the rows themselves (the median over the ok repeats;
a change only against a baseline of the same model), not by the code under test."""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path
from typing import Any

import pandas as pd
from compare_support import env as cpu_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.compare.comparison import Thresholds, compare
from bench.compare.tables import to_data as compare_data
from bench.fmt import MINUS, fmt_num, pct
from bench.history import library as history
from bench.history.check import Params
from bench.report import markdown, records
from bench.report.content import load_many
from bench.report.html import _summary as html_summary  # the table that shows the figures (no charts)
from bench.report.table import summary_table
from bench.results import load_run, read_results, summarize, write_results

NAMES = ("baseline", "s1", "s2", "s3")
# (model_resolved, command, the label outputs show): presets, a config folder, a matrix's [model]
# table, and two scripts (each its own model: never compared with another)
MODELS = (
    ("tiny", "", "tiny"),
    ("llama-tiny", "", "llama-tiny"),
    ("/data/configs/dino", "", "dino"),
    ('{"model_type": "qwen2", "hidden_size": 64}', "", "[model] qwen2"),
    ("command", '["python", "a.py"]', "command"),
    ("command", '["python", "b.py"]', "command"),
)
GAPS = (None, 1.0, 10.0, -93.6)  # flops_check_gap_pct: none, within 5%, a note, no MFU
figure = st.floats(0.5, 50_000, allow_nan=False).map(lambda v: round(v, 3))


@st.composite
def result_rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    rows = []
    for name in NAMES[: draw(st.integers(1, len(NAMES)))]:
        model, command, label = draw(st.sampled_from(MODELS))
        gap = draw(st.sampled_from(GAPS))
        for repeat in range(draw(st.integers(1, 3))):
            status = draw(st.sampled_from(("ok", "ok", "oom")))
            ok = status == "ok"
            rows.append(
                {
                    "scenario": name,
                    "repeat": repeat,
                    "status": status,
                    "error": "" if ok else "CUDA out of memory",
                    "model": "" if command else model,
                    "model_resolved": model,
                    "command": command,
                    "label": label,  # the test's own: taken out before the rows are written
                    "flops_check_gap_pct": gap if ok else None,
                    "samples_per_s": draw(figure) if ok else None,
                    "peak_mem_mb": draw(figure) if ok else None,
                    "peak_mem_source": "rss" if ok else "",
                    "final_loss": draw(st.floats(0.01, 12).map(lambda v: round(v, 4))) if ok else None,
                }
            )
    return rows


def expected(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per scenario: status, model, median samples/s and peak over the ok repeats, change vs baseline."""
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(r["scenario"] for r in rows):
        mine = [r for r in rows if r["scenario"] == name]
        ok = [r for r in mine if r["status"] == "ok"]
        out[name] = {
            "status": "ok" if len(ok) == len(mine) else "oom",
            "model": mine[0]["label"],
            "key": (mine[0]["model_resolved"], mine[0]["command"]),
            "gap": ok[0]["flops_check_gap_pct"] if ok else None,
            "sps": statistics.median(r["samples_per_s"] for r in ok) if ok else None,
            "peak": statistics.median(r["peak_mem_mb"] for r in ok) if ok else None,
            "ok_values": [r["samples_per_s"] for r in ok],
        }
    base = out["baseline"]
    for want in out.values():
        comparable = want["key"] == base["key"] and base["sps"] and want["sps"] is not None
        want["change"] = (want["sps"] / base["sps"] - 1) * 100 if comparable else None
        want["mem_change"] = (want["peak"] / base["peak"] - 1) * 100 if comparable else None
    return out


def close(shown: Any, want: float | None) -> bool:
    if want is None:
        return shown is None or (isinstance(shown, float) and math.isnan(shown))
    return isinstance(shown, int | float) and math.isclose(shown, want, rel_tol=1e-9, abs_tol=1e-9)


def text_of(fit: Any) -> list[str]:
    from rich.console import Console

    console = Console(width=240, record=True, color_system=None)
    console.print(fit)
    return console.export_text().splitlines()


def check_terminal(lines: list[str], want: dict[str, dict[str, Any]], mixed: bool) -> None:
    """A column whose every cell would be "-" is left out of the table: then every expected value is missing."""
    header = next(line for line in lines if line.startswith("┃"))
    heads = [c.strip() for c in header.split("┃")[1:-1]]
    assert ("model" in heads) == mixed
    speed = next((i for i, h in enumerate(heads) if h.startswith("samples/s")), None)
    memory = heads.index("peak MB") if "peak MB" in heads else None
    vs = heads.index("vs base") if "vs base" in heads else None

    def cell(cells: list[str], index: int | None) -> str:
        return "-" if index is None else cells[index].split(" ")[0]

    for name, w in want.items():
        cells = next(
            [c.strip() for c in line.split("│")[1:-1]]
            for line in lines
            if line.startswith("│") and line.split("│")[1].strip() == name
        )
        assert cells[heads.index("status")] == w["status"]
        if mixed:
            assert cells[heads.index("model")] == w["model"]
        assert cell(cells, speed) == ("-" if w["sps"] is None else f"{w['sps']:.2f}")
        assert cell(cells, memory) == ("-" if w["peak"] is None else f"{w['peak']:,.0f}")
        assert cell(cells, vs) == ("-" if w["change"] is None else pct(w["change"])), name
        note = cells[heads.index("note")] if "note" in heads else ""
        for marker, text in footnotes(lines).items():  # a note too long for its column is a footnote
            note = note.replace(marker, text)
        if w["status"] == "ok":
            assert ("FLOP counts differ" in note) == (w["gap"] is not None and abs(w["gap"]) > 5), (name, note)
            if w["gap"] is not None and abs(w["gap"]) > 5:
                assert f"{w['gap']:+.1f}%" in note and note.endswith("no MFU") == (abs(w["gap"]) > 25)


def footnotes(lines: list[str]) -> dict[str, str]:
    """The table's footnotes: "[1]" -> its text (termtable.footnoted)."""
    found = {}
    for line in lines:
        match = re.match(r"^(\[\d+\]) (.*)$", line.strip())
        if match:
            found[match.group(1)] = match.group(2)
    return found


def check_notes(notes: tuple[str, ...], want: dict[str, dict[str, Any]]) -> None:
    text = " ".join(notes)
    for name, w in want.items():
        flagged = w["gap"] is not None and abs(w["gap"]) > 5
        assert (f"{name} (FLOP counts differ by" in text) == flagged, (name, text)
        if flagged:
            assert f"{name} (FLOP counts differ by {w['gap']:+.1f}%" in text


def check_markdown(text: str, want: dict[str, dict[str, Any]], mixed: bool) -> None:
    table = [line for line in text.splitlines() if line.startswith("|")]
    heads = [c.strip() for c in table[0].strip("|").split("|")]
    assert ("Model" in heads) == mixed
    for line in table[2 : 2 + len(want)]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        name = cells[0].split(" ")[0]
        w = want[name]
        assert cells[heads.index("Status")] == w["status"]
        assert cells[heads.index("samples/s")] == fmt_num(w["sps"], 2)
        delta = cells[heads.index("Δ samples/s (%)")]
        if name == "baseline" and w["sps"] is not None:
            assert delta == "ref"
        elif w["change"] is None:
            assert delta == "–"
        else:
            assert delta.split(" ")[0] == f"{w['change']:+.1f}".replace("-", MINUS)


def check_records(report_json: dict[str, Any], report_csv: str, want: dict[str, dict[str, Any]]) -> None:
    import io

    frame = pd.read_csv(io.StringIO(report_csv), keep_default_na=False, na_values=[""])
    for data in (report_json["scenarios"], frame.to_dict("records")):
        shown = {r["scenario"]: r for r in data}
        assert set(shown) == set(want)
        for name, w in want.items():
            r = shown[name]
            assert r["status"] == w["status"] and r["model"] == w["model"]
            assert close(r["samples_per_s"], w["sps"]) and close(r["peak_mem_mb"], w["peak"])
            assert close(r["samples_per_s_vs_baseline_pct"], w["change"])
            assert close(r["peak_mem_mb_vs_baseline_pct"], w["mem_change"])


def check_html(page: str, want: dict[str, dict[str, Any]], mixed: bool) -> None:
    assert ('<td class="model">' in page) == mixed
    for w in want.values():
        if w["sps"] is not None:
            assert f'<td class="num">{fmt_num(w["sps"], 2)}</td>' in page


def check_compare(directory: Path, want: dict[str, dict[str, Any]]) -> None:
    """The run against itself: a scenario with a failed repeat is one status row; the others show
    their figure on both sides."""
    run = load_run(directory)
    rows = compare_data(compare(run.frame, run.frame, run.env, run.env, Thresholds()))["rows"]
    for name, w in want.items():
        mine = {r["metric"]: r for r in rows if r["scenario"] == name}
        if w["status"] != "ok":
            assert list(mine) == ["status"] and mine["status"]["base_status"] == w["status"]
            continue
        speed = mine["samples_per_s"]
        assert close(speed["base"], w["sps"]) and close(speed["new"], w["sps"])
        assert close(mine["peak_mem_mb"]["base"], w["peak"])
        assert speed["base_n"] == speed["new_n"] == len(w["ok_values"])


def check_history(directory: Path, db: Path, want: dict[str, dict[str, Any]]) -> None:
    history.import_dirs(str(db), [directory])
    for name, w in want.items():
        if w["status"] != "ok":
            continue
        (view,) = history.show(str(db), name, "samples_per_s", Params())
        assert close(view.marks[-1].value, w["sps"])


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=result_rows())
def test_every_output_shows_the_stored_figures(tmp_path_factory: Any, rows: list[dict[str, Any]]) -> None:
    directory = tmp_path_factory.mktemp("run")
    want = expected(rows)
    write_results(directory / "results.csv", [{k: v for k, v in r.items() if k != "label"} for r in rows])
    (directory / "env.json").write_text(json.dumps({**cpu_env(None), "results_format": 1}))
    mixed = len({w["key"] for w in want.values()}) > 1

    check_terminal(text_of(summary_table(summarize(read_results(directory / "results.csv")))), want, mixed)
    report = load_many([directory])
    check_terminal(text_of(summary_table(report.summary)), want, mixed)  # report --format table
    check_notes(report.notes, want)
    check_markdown(markdown.render(report), want, mixed)
    check_records(json.loads(records.to_json(report)), records.to_csv(report), want)
    check_html(html_summary(report), want, mixed)
    check_compare(directory, want)
    check_history(directory, directory / "history.db", want)
