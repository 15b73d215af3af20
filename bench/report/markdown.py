"""The markdown report: the summary table and the findings, for a pull request or a CI job summary.

Columns are padded so the raw text lines up too; units sit in the headers, cells hold numbers.
"""

from __future__ import annotations

from typing import Any

from ..fmt import fmt_date, fmt_num, md_table, md_text, missing, noise_legend, noise_tag, sentence
from ..results import NOISE_COLUMNS
from ..results.summary import mixed_models
from .answers import markdown_lines as answer_lines
from .capacity import fit_of, markdown_lines
from .content import Report, accuracy_cell, device_name, env_part, findings, front_scope, gpu_cells, loss_cells

BASE_MARK, FRONT_MARK = "★", "◆"


def render(report: Report) -> str:
    lines = [f"## gpubench report: {md_text(report.title)}", ""]
    lines += [f"> **{md_text(sentence(caveat))}**\n" for caveat in report.caveats]
    lines.append(_env_line(report))
    command = (report.env or {}).get("command")
    if command:
        lines += ["", f"Command: {_code(str(command))}"]
    legend = (
        f"{BASE_MARK} baseline · {FRONT_MARK} Pareto front (no other scenario{front_scope(report.summary)} is both "
        "faster and lighter) · medians over ok repeats · Δ: change vs baseline"
    )
    tags = noise_legend(v for c in NOISE_COLUMNS for v in report.summary[c])
    lines += ["", *_table(*_summary(report)), "", legend + (f"; {md_text(tags)}" if tags else ""), ""]
    lines += ["### Findings", "", *[f"- {md_text(f)}" for f in findings(report)]]
    lines += [f"- _{md_text(note)}_" for note in report.notes]
    lines += answer_lines(report)  # a recommend or verify directory's answer
    fit = fit_of(report)
    if fit is not None:
        lines += markdown_lines(fit)
    if report.problems:
        rows = [[p.scenario, p.status, f"{p.not_ok} of {p.repeats}", _clip(p.reason, 200)] for p in report.problems]
        header = ["Scenario", "Status", "Repeats not ok", "Reason"]
        lines += ["", "### Failed and skipped", "", *_table(header, rows, [False, False, True, False])]
    return "\n".join(lines) + "\n"


def _env_line(report: Report) -> str:
    env = report.env
    if not env:
        return f"Environment unknown (no env.json beside {_code(str(report.source))})."
    gpu, packages = env_part(env, "gpu"), env_part(env, "packages")
    parts = [device_name(env)]
    if gpu.get("driver"):
        parts.append(f"driver {gpu['driver']}")
    if env.get("cuda_runtime"):
        parts.append(f"CUDA {env['cuda_runtime']}")
    parts += [f"{name} {packages[name]}" for name in ("torch", "transformers", "bitsandbytes") if packages.get(name)]
    when = fmt_date(env.get("created_at"))
    if when:
        parts.append(when)
    return md_text(" · ".join(str(p) for p in parts))


def _summary(report: Report) -> tuple[list[str], list[list[str]], list[bool]]:
    s = report.summary
    spread = bool((s["ok"] >= 2).any())
    source = report.memory_source or "n/a"
    # (header, numeric, shown)
    columns = [
        ("Scenario", False, True),
        ("Model", False, mixed_models(s)),  # only where the scenarios train more than one model
        ("Status", False, True),
        ("ok/runs", True, True),
        ("samples/s", True, True),
        ("CV (%)", True, spread),
        ("Δ samples/s (%)", True, True),
        (f"Peak mem (MB, {source})", True, True),
        ("Δ peak mem (%)", True, True),
        ("MFU (%)", True, report.has_mfu),
        ("of ceiling (%)", True, report.has("mfu_ceiling")),
        ("J/sample", True, report.has("energy_per_sample_j")),
        ("W", True, report.has("gpu_power_mean_w")),
        ("GPU-h / 1B tokens", True, report.has("energy_per_sample_j")),
        ("kWh / 1B tokens", True, report.has("energy_per_sample_j")),
        ("bound", False, report.has("bound")),
        ("loss, final window", True, report.has("final_window_loss")),
        ("loss vs reference", False, report.has("parity")),
        ("held-out accuracy (%)", True, report.has("eval_accuracy")),
    ]
    rows = []
    for r in s.to_dict("records"):
        marks = (f" {BASE_MARK}" if r["is_baseline"] else "") + (f" {FRONT_MARK}" if r["pareto"] else "")
        cells = [
            str(r["scenario"]) + marks,
            str(r.get("model") or ""),
            str(r["status"]),
            f"{r['ok']}/{r['repeats']}",
            fmt_num(r["samples_per_s"], 2),
            "–" if missing(r["samples_per_s_cv_pct"]) else f"{r['samples_per_s_cv_pct']:.1f}",
            _delta(r, "samples_per_s"),
            fmt_num(r["peak_mem_mb"], 0),
            _delta(r, "peak_mem_mb"),
            "–" if missing(r["mfu"]) else f"{r['mfu'] * 100:.1f}",
            *gpu_cells(r, ""),
            *loss_cells(r),
            accuracy_cell(r, unit=""),
        ]
        rows.append([c for c, (_, _, show) in zip(cells, columns, strict=True) if show])
    shown = [c for c in columns if c[2]]
    return [c[0] for c in shown], rows, [c[1] for c in shown]


def _delta(r: dict[str, Any], metric: str) -> str:
    if r["is_baseline"] and not missing(r[metric]):
        return "ref"
    value = r[f"{metric}_vs_baseline_pct"]
    if missing(value):
        return "–"
    return f"{float(value):+.1f}".replace("-", "−") + noise_tag(r.get(f"{metric}_vs_baseline_noise"))


def _table(header: list[str], rows: list[list[str]], numeric: list[bool]) -> list[str]:
    """A GitHub table padded to line up: text left-aligned, numbers right-aligned."""
    return md_table([md_text(c) for c in header], [[md_text(c) for c in row] for row in rows], numeric)


def _code(text: str) -> str:
    fence = "``" if "`" in text else "`"
    return f"{fence} {text} {fence}" if fence == "``" else f"`{text}`"


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
