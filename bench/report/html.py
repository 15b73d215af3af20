"""The HTML report: one self-contained file (inline CSS and SVG charts, no script, no network).

`write_report(result_dir)` is what `gpubench report` and `gpubench run` call. Every piece of text
from the results or env.json goes through html.escape.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

from .. import __version__
from ..fmt import fmt_date, fmt_num, fmt_pct, missing, noise_legend, noise_tag, sentence
from ..fsio import atomic_write_text
from ..results import NOISE_COLUMNS
from ..results.scaling import allreduce_busbw
from ..results.summary import mixed_models
from .answers import html_sections as answer_sections
from .capacity import chart_points, fit_of
from .capacity import html_section as fit_section
from .content import (
    Problem,
    Report,
    accuracy_cell,
    device_name,
    env_part,
    findings,
    front_scope,
    gpu_cells,
    load_many,
    loss_cells,
)
from .scaling_curves import ScalingLine, workloads

REPORT_HTML = "report.html"
TAIL_CHARS = 3000  # of a failed scenario's stderr, shown folded

CSS = """
:root { color-scheme: light; --fg: #1d1d1f; --muted: #5f6368; --line: #d9dce1; --bad: #b3261e;
  --warn: #8a5a00; --good: #1e6b34; --front: #9a5b00; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans",
  Arial, sans-serif; color: var(--fg); background: #fff; }
main { max-width: 1200px; margin: 0 auto; padding: 24px 20px 40px; }
h1 { font-size: 1.6em; margin: 0 0 4px; }
h2 { font-size: 1.2em; margin: 28px 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
.sub { color: var(--muted); margin: 0 0 12px; }
dl.env { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0; }
dl.env dt { color: var(--muted); }
dl.env dd { margin: 0; overflow-wrap: anywhere; }
code { font: 0.92em ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 13px; }
th, td { padding: 4px 8px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { background: #f4f5f7; font-weight: 600; vertical-align: bottom; }
th small { font-weight: 400; color: var(--muted); }
td.name { white-space: nowrap; }
td.what { min-width: 14em; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num { white-space: nowrap; }
td.reason { max-width: 46em; overflow-wrap: anywhere; }
.status-ok { color: var(--good); }
.status-skipped { color: var(--warn); }
.status-failed { color: var(--bad); font-weight: 600; }
.tag { display: inline-block; font-size: 11px; padding: 0 5px; margin-left: 4px; border: 1px solid;
  border-radius: 3px; white-space: nowrap; }
.tag.base { color: #444; } .tag.front { color: var(--front); }
tr.baseline td { background: #f7f7f7; }
ul.findings li { margin: 2px 0; }
.notes { color: var(--muted); font-size: 13px; }
.caveat { border-left: 4px solid var(--warn); background: #fff8e6; padding: 6px 10px; margin: 12px 0 0; }
figure { margin: 12px 0 24px; break-inside: avoid; page-break-inside: avoid; }
figure svg { display: block; max-width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: 13px; margin-top: 4px; max-width: 60em; }
h3 { font-size: 1.05em; margin: 16px 0 4px; }
.scaling { display: flex; flex-wrap: wrap; gap: 8px 24px; align-items: flex-start; }
.scaling figure { flex: 1 1 480px; max-width: 620px; margin: 4px 0 12px; }
.scaling .scroll { flex: 0 1 auto; margin-top: 8px; }
details pre { white-space: pre-wrap; font-size: 12px; background: #f6f6f6; padding: 8px;
  max-height: 24em; overflow: auto; }
footer { color: var(--muted); font-size: 12px; margin-top: 32px; }
@media print {
  @page { margin: 12mm; }
  body { font-size: 10.5pt; }
  main { max-width: none; padding: 0; }
  h2 { break-after: avoid; page-break-after: avoid; }
  table { font-size: 9pt; }
  tr { break-inside: avoid; page-break-inside: avoid; }
  .scroll { overflow: visible; }
  th, tr.baseline td { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  details pre { max-height: none; }
}
"""


def write_report(result_dir: Path | Sequence[Path], output: Path | None = None, baseline: str | None = None) -> Path:
    """Read a result set (or several, pooled: bench.report.content.load_many) and write its HTML report,
    atomically; by default into the (first) result directory, as report.html."""
    dirs = [Path(result_dir)] if isinstance(result_dir, str | Path) else [Path(d) for d in result_dir]
    report = load_many(dirs, baseline)
    path = Path(output) if output is not None else report.source.parent / REPORT_HTML
    atomic_write_text(path, render(report))
    return path


def render(report: Report) -> str:
    from . import charts  # matplotlib: only when a report is drawn

    title = f"gpubench report: {report.title}"
    with charts.missing_glyphs_quiet():  # a CJK scenario name: boxes in the charts, not dozens of warnings
        figures = [
            _figure("Throughput", charts.speed_chart(report), _speed_caption(report)),
            _figure("Loss", charts.loss_chart(report), _loss_caption(report)) if report.curves else "",
            _figure("Peak memory", charts.memory_chart(report), _memory_caption(report)),
            _figure("Speed versus memory", charts.speed_memory_map(report), _map_caption(report)),
            _scaling(report.scaling, charts.scaling_chart),
        ]
        fit = fit_of(report)  # a `gpubench fit` directory: its capacity section first
        if fit is not None:
            figures.insert(0, fit_section(fit, charts.fit_chart(chart_points(fit), fit.dimension)))
        figures[:0] = answer_sections(report)  # a recommend or verify directory: its answer first
    body = [_header(report), _findings(report), _summary(report), _problems(report.problems), *figures, _footer(report)]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta name="generator" content="gpubench {escape(__version__)}">\n'
        f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n"
        + "\n".join(part for part in body if part)
        + "\n</main>\n</body>\n</html>\n"
    )


# -- sections --------------------------------------------------------------------------------------
def _header(report: Report) -> str:
    env = report.env or {}
    when = fmt_date(env.get("created_at"))
    sub = " · ".join(
        x for x in (f"matrix {env.get('matrix')}" if env.get("matrix") else "", device_name(report.env), when) if x
    )
    rows = "".join(f"<dt>{escape(k)}</dt><dd>{v}</dd>" for k, v in _env_rows(report))
    caveats = "".join(f'<p class="caveat">{escape(sentence(c))}</p>\n' for c in report.caveats)
    return (
        f"<header>\n<h1>gpubench report: {escape(report.title)}</h1>\n"
        f'<p class="sub">{escape(sub)}</p>\n{caveats}<dl class="env">{rows}</dl>\n</header>'
    )


def _env_rows(report: Report) -> list[tuple[str, str]]:
    """(label, already-escaped HTML) pairs for the environment block."""
    env = report.env
    if not env:
        return [
            ("environment", "unknown: no env.json beside the results"),
            ("results", f"<code>{escape(str(report.source))}</code>"),
        ]
    gpu, packages = env_part(env, "gpu"), env_part(env, "packages")

    def text(value: Any) -> str:
        return escape(str(value)) if value not in (None, "") else "–"

    if gpu:
        gpu_text = text(gpu.get("name"))
        extras = []
        memory = gpu.get("memory_total_mb")
        if isinstance(memory, int | float) and not missing(float(memory)):
            extras.append(f"{float(memory):,.0f} MB")
        if gpu.get("capability"):
            extras.append(f"compute capability {gpu['capability']}")
        gpu_text += f" ({escape(', '.join(extras))})" if extras else ""
    else:
        gpu_text = "none (CPU run)" if str(env.get("device", "")).startswith("cpu") else "–"
    torch = text(packages.get("torch"))
    if env.get("torch_build") and env.get("torch_build") != packages.get("torch"):
        torch += f" (build {text(env['torch_build'])})"
    cpu = text(env.get("cpu")) + (f" × {text(env['cpu_count'])}" if env.get("cpu_count") else "")
    commit = env_part(env, "git").get("commit")
    rows = [
        ("GPU", gpu_text),
        ("driver", text(gpu.get("driver"))),
        ("CUDA runtime", text(env.get("cuda_runtime"))),
        ("device", text(env.get("device"))),
        ("torch", torch),
        ("transformers", text(packages.get("transformers"))),
        ("accelerate", text(packages.get("accelerate"))),
        ("bitsandbytes", text(packages.get("bitsandbytes"))),
        ("python", text(env.get("python"))),
        ("CPU", cpu),
        ("host", text(env.get("host"))),
        ("date", text(fmt_date(env.get("created_at")) or env.get("created_at"))),
        ("command", f"<code>{text(env.get('command'))}</code>"),
        ("results", ", ".join(f"<code>{escape(str(s))}</code>" for s in report.all_sources)),
    ]
    if (line := interconnect_line(env)) is not None:
        rows.append(("interconnect", line))
    if commit:
        edited = " (tracked files edited since this commit)" if env_part(env, "git").get("dirty") else ""
        rows.append(("git commit", f"<code>{escape(str(commit))}</code>{edited}"))
    return rows


def _findings(report: Report) -> str:
    items = "".join(f"<li>{escape(f)}</li>" for f in findings(report))
    notes = "".join(f"<li>{escape(n)}</li>" for n in report.notes)
    notes_html = f'<ul class="notes">{notes}</ul>' if notes else ""
    return f'<section id="findings">\n<h2>Findings</h2>\n<ul class="findings">{items}</ul>\n{notes_html}</section>'


def _summary(report: Report) -> str:
    s = report.summary
    spread = bool((s["ok"] >= 2).any())
    reserved = bool(s["torch_max_reserved_mb"].notna().any())
    allocated = bool(s["torch_max_allocated_mb"].notna().any())
    source = report.memory_source or "n/a"
    # (header, sub-header, shown): numeric columns, in order
    columns = [
        ("samples/s", "median", True),
        ("spread", "min–max", spread),
        ("CV", "samples/s", spread),
        ("samples/s", "vs baseline", True),
        ("peak MB", source, True),
        ("peak MB", "vs baseline", True),
        ("torch MB", "max reserved", reserved),
        ("torch MB", "max allocated", allocated),
        ("MFU", "", report.has_mfu),
        ("MFU", "of measured ceiling", report.has("mfu_ceiling")),
        ("energy", "J/sample", report.has("energy_per_sample_j")),
        ("power", "W mean", report.has("gpu_power_mean_w")),
        ("1B tokens", "GPU-hours", report.has("energy_per_sample_j")),
        ("1B tokens", "kWh", report.has("energy_per_sample_j")),
        ("bound", "its counters", report.has("bound")),
        ("loss", "final window", report.has("final_window_loss")),
        ("loss", "vs reference", report.has("parity")),
        ("accuracy", "held-out", report.has("eval_accuracy")),
    ]
    shown = [c[2] for c in columns]
    models = mixed_models(s)  # a model column only where the scenarios train more than one model
    head = "".join(f"<th>{h}</th>" for h in ("scenario", *(("model",) if models else ()), "what it changes", "status"))
    head += '<th class="num">ok / runs</th>'
    head += "".join(
        f'<th class="num">{escape(h)}<br><small>{escape(sub)}</small></th>' for h, sub, show in columns if show
    )
    lines = [f"<tr>{head}</tr>"]
    for r in s.to_dict("records"):
        values = [
            fmt_num(r["samples_per_s"], 2),
            _fmt_spread(r),
            "–" if missing(r["samples_per_s_cv_pct"]) else f"±{r['samples_per_s_cv_pct']:.1f}%",
            _vs(r, "samples_per_s"),
            fmt_num(r["peak_mem_mb"], 0),
            _vs(r, "peak_mem_mb"),
            fmt_num(r["torch_max_reserved_mb"], 0),
            fmt_num(r["torch_max_allocated_mb"], 0),
            "–" if missing(r["mfu"]) else f"{r['mfu'] * 100:.1f}%",
            *gpu_cells(r, "%"),
            *loss_cells(r),
            accuracy_cell(r),
        ]
        row = [
            f'<td class="name">{_scenario_cell(r)}</td>',
            *([f'<td class="model">{escape(str(r.get("model") or ""))}</td>'] if models else []),
            f'<td class="what">{escape(str(r.get("description") or ""))}</td>',
            f'<td class="{_status_class(r["status"])}">{escape(str(r["status"]))}</td>',
            f'<td class="num">{r["ok"]} / {r["repeats"]}</td>',
        ] + [f'<td class="num">{escape(v)}</td>' for v, show in zip(values, shown, strict=True) if show]
        css = ' class="baseline"' if r["is_baseline"] else ""
        lines.append(f"<tr{css}>" + "".join(row) + "</tr>")
    table = "\n".join(lines)
    legend = (
        "Medians over the ok repeats of each scenario"
        + ("; CV is the coefficient of variation of samples/s over them" if spread else "")
        + '. <span class="tag front">front</span> marks the Pareto front: no other '
        f"scenario{escape(front_scope(s))} is both faster and lighter."
    )
    tags = noise_legend(v for c in NOISE_COLUMNS for v in s[c])
    legend += f" Changes vs baseline: {escape(tags)}." if tags else ""
    return (
        f'<section id="summary">\n<h2>Summary</h2>\n<div class="scroll"><table>\n{table}\n'
        f'</table></div>\n<p class="notes">{legend}</p>\n</section>'
    )


def _problems(problems: tuple[Problem, ...]) -> str:
    if not problems:
        return ""
    lines = ['<tr><th>scenario</th><th>status</th><th class="num">repeats not ok</th><th>reason</th></tr>']
    for p in problems:
        tail = p.stderr_tail[-TAIL_CHARS:]
        details = f"<details><summary>stderr tail</summary><pre>{escape(tail)}</pre></details>" if tail.strip() else ""
        lines.append(
            f"<tr><td>{escape(p.scenario)}</td>"
            f'<td class="{_status_class(p.status)}">{escape(p.status)}</td>'
            f'<td class="num">{p.not_ok} of {p.repeats}</td>'
            f'<td class="reason">{escape(p.reason)}{details}</td></tr>'
        )
    table = "\n".join(lines)
    return (
        f'<section id="problems">\n<h2>Failed and skipped scenarios</h2>\n'
        f'<div class="scroll"><table>\n{table}\n</table></div>\n</section>'
    )


def _figure(heading: str, svg: str, caption: str) -> str:
    return (
        f"<section>\n<h2>{escape(heading)}</h2>\n<figure>\n{svg}\n"
        f"<figcaption>{escape(caption)}</figcaption>\n</figure>\n</section>"
    )


def _scaling(lines: tuple[ScalingLine, ...], chart: Any) -> str:
    """Per workload: samples/s and efficiency against GPUs, one line per strategy, and the figures
    in a table beside them; nothing when no strategy was measured at two GPU counts."""
    if not lines:
        return ""
    parts = ['<section id="scaling">\n<h2>Scaling with the number of GPUs</h2>']
    parts.append(
        '<p class="notes">One line per parallel strategy measured at two or more GPU counts, with the same '
        "per-GPU batch and otherwise equal settings. A line's 1-GPU point is the strategy's own one-process run "
        "where there is one, else the plain single-GPU run (strategy none) of the same workload. Efficiency is "
        "weak scaling: samples/s per GPU over the 1-GPU samples/s, so 1 is linear (the dotted line); "
        "medians over ok repeats.</p>"
    )
    for i, (workload, group) in enumerate(workloads(lines)):
        if workload:
            parts.append(f"<h3>{escape(workload)}</h3>")
        speed = chart(group, "samples_per_s", f"scaling{i}-speed")
        efficiency = chart(group, "efficiency", f"scaling{i}-eff")
        parts.append(
            f'<div class="scaling">\n<figure>\n{speed}\n</figure>\n<figure>\n{efficiency}\n</figure>\n'
            f"{_scaling_table(group)}\n</div>"
        )
    parts.append("</section>")
    return "\n".join(parts)


def _scaling_table(lines: list[ScalingLine]) -> str:
    head = (
        '<tr><th>strategy</th><th class="num">GPUs</th><th class="num">samples/s<br><small>median</small></th>'
        '<th class="num">n</th><th class="num">efficiency</th>'
        '<th class="num">all-reduce<br><small>bus GB/s</small></th><th>scenarios</th></tr>'
    )
    rows = [head]
    for line in lines:
        for p in line.points:
            efficiency = "–" if p.efficiency is None else f"{p.efficiency:.2f}"
            rows.append(
                f'<tr><td class="name">{escape(line.label)}</td><td class="num">{p.gpus}</td>'
                f'<td class="num">{escape(fmt_num(p.samples_per_s, 2))}</td><td class="num">{p.n}</td>'
                f'<td class="num">{efficiency}</td><td class="num">{escape(_busbw(p.busbw_gbps))}</td>'
                f"<td>{escape(', '.join(p.scenarios))}</td></tr>"
            )
    table = "\n".join(rows)
    return f'<div class="scroll"><table>\n{table}\n</table></div>'


def _busbw(gbps: float | None) -> str:
    return "–" if gbps is None else fmt_num(gbps, 3)


def interconnect_line(env: dict[str, Any]) -> str | None:
    """env.json's interconnect check in one line: all-reduce bus GB/s at each world size."""
    checks = env.get("interconnect")
    if not isinstance(checks, dict):
        return None
    if "reason" in checks:
        return escape(f"not measured ({checks['reason']})")
    busbw = allreduce_busbw(env)
    failed = [k for k, v in checks.items() if isinstance(v, dict) and "reason" in v]
    parts = [f"{n} processes: all-reduce {_busbw(gbps)} bus GB/s" for n, gbps in sorted(busbw.items())]
    parts += [f"{k} processes: {checks[k]['reason']}" for k in failed]
    backend = next((v.get("backend") for v in checks.values() if isinstance(v, dict) and v.get("backend")), None)
    return escape("; ".join(parts) + (f" ({backend}, largest message)" if backend and busbw else ""))


def _footer(report: Report) -> str:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    sources = ", ".join(f"<code>{escape(str(s))}</code>" for s in report.all_sources)
    return (
        f"<footer>Written by gpubench {escape(__version__)} on {escape(now)} from "
        f"{sources}. Self-contained: no scripts, no network."
        "</footer>"
    )


# -- captions --------------------------------------------------------------------------------------
def _speed_caption(report: Report) -> str:
    spread = (
        "Error bars span the slowest to the fastest ok repeat."
        if report.max_repeats > 1
        else "One repeat per scenario: no error bars."
    )
    return (
        f"Median samples/s over ok repeats, in the steady-state window (warm-up excluded); "
        f"the dotted line is the baseline. {spread} Scenarios without a measurement keep "
        "their row, with their status and reason."
    )


def _loss_caption(report: Report) -> str:
    reference = next((str(v) for v in report.summary.get("parity_ref", []) if isinstance(v, str) and v), "")
    text = (
        "The training loss of each scenario (repeat 0) against its optimizer steps: each point is the mean "
        "loss over a few steps (losses/ in the result directory)."
    )
    if report.has("parity"):
        text += (
            f" The thick black line is the loss reference, {reference}. A scenario is equivalent when its mean "
            "loss over the last 20% of its steps lies within the band measured from the reference's seeds "
            "(the 95% prediction interval of one more seed), deviates beyond it, and diverged when a loss is "
            "not finite or explodes (docs/parity.md)."
        )
    return escape(text)


def _memory_caption(report: Report) -> str:
    source = report.memory_source
    if source == "rss":
        return (
            "CPU run: the only memory figure is the worker's peak resident set size "
            "(getrusage); NVML and torch.cuda figures exist on GPU runs only."
        )
    return (
        "The NVML per-process peak counts what the driver gives the worker: torch's "
        "reserved pool plus the CUDA context (about 0.5 GB on an H200) and non-torch "
        "allocations (cuBLAS workspaces, bitsandbytes). torch max reserved is the caching "
        "allocator's pool; torch max allocated is what tensors held at the peak. "
        f"Headline source: {source or 'unknown'}."
    )


def _map_caption(report: Report) -> str:
    ok = report.ok
    unplotted = [str(n) for n in report.summary["scenario"] if n not in set(ok[ok["peak_mem_mb"].notna()]["scenario"])]
    absent = f" Not shown (no measurement): {', '.join(unplotted)}." if unplotted else ""
    return (
        "One point per scenario. Diamonds labelled [front] are the Pareto front: no other "
        f"scenario{escape(front_scope(report.summary))} is at least as fast with at most as much memory; the dashed "
        "line joins them. The star is the baseline; the dotted lines through it split the chart into "
        "faster/slower and lighter/heavier than the baseline." + absent
    )


# -- cells -----------------------------------------------------------------------------------------
def _scenario_cell(r: dict[str, Any]) -> str:
    out = escape(str(r["scenario"]))
    if r["is_baseline"]:
        out += '<span class="tag base">baseline</span>'
    if r["pareto"]:
        out += '<span class="tag front">front</span>'
    return out


def _status_class(status: str) -> str:
    return {"ok": "status-ok", "skipped": "status-skipped"}.get(status, "status-failed")


def _fmt_spread(r: dict[str, Any]) -> str:
    lo, hi = r["samples_per_s_min"], r["samples_per_s_max"]
    if missing(lo) or missing(hi) or r["ok"] < 2:
        return "–"
    return f"{lo:,.2f}–{hi:,.2f}"


def _vs(r: dict[str, Any], metric: str) -> str:
    if r["is_baseline"] and not missing(r[metric]):
        return "ref"
    return fmt_pct(r[f"{metric}_vs_baseline_pct"]) + noise_tag(r.get(f"{metric}_vs_baseline_noise"))


def size_text(path: Path) -> str:
    size = path.stat().st_size
    return f"{size / 1024:.0f} KB" if size < 1024 * 1024 else f"{size / 1024 / 1024:.1f} MB"
