"""The report's charts: matplotlib figures rendered to SVG strings for inline embedding.

matplotlib is imported here only, and this module only by bench.report.html when it renders, so
the CLI starts without it. Figures use the Agg canvas directly (no pyplot, no global backend);
text stays text (svg.fonttype none) so it is small, selectable and searchable. Every bar and point
carries a text label, so nothing depends on colour alone.
"""

from __future__ import annotations

import io
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from html import escape
from typing import Any

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..fmt import fmt_num, fmt_pct, missing, noise_tag
from .content import MEMORY_SERIES, Report, front_scope
from .labels import place_labels
from .scaling_curves import ScalingLine

# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
BLUE, ORANGE, GREEN, VERMILLION, SKY, GREY = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#8c8c8c")
SERIES_STYLE = [(BLUE, ""), (ORANGE, "///"), (GREEN, "xx")]  # colour, hatch per memory series
SOURCE_LABELS = {
    "nvml-process": "NVML per-process peak",
    "nvml-device": "NVML device peak minus idle",
    "rss": "peak RSS (getrusage)",
}
RC: dict[Any, Any] = {
    "svg.fonttype": "none",  # text as <text>, not glyph paths
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica"],
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "hatch.linewidth": 0.6,
}
# One style per scaling line: colour, marker, dash; lines are also named at their last point.
LINE_STYLES = [
    (BLUE, "o", "-"),
    (ORANGE, "s", "--"),
    (GREEN, "D", "-."),
    (VERMILLION, "^", ":"),
    (SKY, "v", "-"),
    ("#CC79A7", "P", "--"),
    ("#000000", "X", "-."),
    ("#F0E442", "*", ":"),
]
WIDTH_IN = 9.0
SCALING_WIDTH_IN = 6.0
REASON_CHARS = 70


@contextmanager
def missing_glyphs_quiet() -> Iterator[None]:
    """matplotlib warns once per character its font lacks (a CJK scenario name: dozens of lines);
    the table beside each chart holds every name as text, so the charts stay quiet."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from", category=UserWarning)
        yield


def source_label(source: str) -> str:
    return SOURCE_LABELS.get(source, f"peak ({source})" if source else "peak")


# -- the three charts ------------------------------------------------------------------------------
def speed_chart(report: Report) -> str:
    """Horizontal bars: median samples/s per scenario, min-max over ok repeats as error bars."""
    rows = report.summary.to_dict("records")
    with _figure(len(rows), per_row=0.38) as (fig, ax):
        ys = list(range(len(rows)))
        top = max((_num(r["samples_per_s_max"]) or 0.0 for r in rows), default=0.0) or 1.0
        base_value = _baseline_value(report, "samples_per_s")
        for y, r in zip(ys, rows, strict=True):
            value = _num(r["samples_per_s"])
            if value is None:
                _no_bar(ax, y, r, top)
                continue
            lo, hi = _num(r["samples_per_s_min"]) or value, _num(r["samples_per_s_max"]) or value
            colour, hatch = (GREY, "//") if r["is_baseline"] else (BLUE, "")
            ax.barh(y, value, height=0.62, color=colour, hatch=hatch, edgecolor="white")
            if hi > lo:
                ax.errorbar(
                    value, y, xerr=[[value - lo], [hi - value]], fmt="none", ecolor="black", elinewidth=1, capsize=3
                )
            label = fmt_num(value, 2)
            if r["is_baseline"]:
                label += "  (baseline)"
            elif not missing(r["samples_per_s_vs_baseline_pct"]):
                change = fmt_pct(r["samples_per_s_vs_baseline_pct"])
                label += f"  ({change}){noise_tag(r['samples_per_s_vs_baseline_noise'])}"
            if r["ok"] < r["repeats"]:
                label += f"  [{r['repeats'] - r['ok']} of {r['repeats']} repeats not ok]"
            ax.text(max(hi, value) + top * 0.01, y, _plain(label), va="center", fontsize=8)
        if base_value is not None:
            ax.axvline(base_value, color="black", linestyle=":", linewidth=1)
        spread = "error bars: min to max over ok repeats" if report.max_repeats > 1 else "one repeat"
        ax.set_xlabel(f"samples/s (median over ok repeats; {spread})")
        ax.set_xlim(0, top * 1.35)
        _scenario_axis(ax, rows)
        return _svg(fig, "speed", "Samples per second per scenario")


def loss_chart(report: Report) -> str:
    """The loss curves: one line per scenario (its repeat 0) against the optimizer step; the loss
    reference (parity_ref) thick and black, its other seeds thin and grey, each line named at its end."""
    rows = {str(r["scenario"]): r for r in report.summary.to_dict("records")}
    reference = next((str(r.get("parity_ref")) for r in rows.values() if r.get("parity_ref")), "")
    curves = sorted(
        (c for c in report.curves if c.repeat == 0 and c.scenario in rows), key=lambda c: list(rows).index(c.scenario)
    )
    with _figure(0, height_in=4.2) as (fig, ax):
        labels: list[tuple[float, float, str, bool]] = []
        styles = iter(LINE_STYLES)
        for curve in curves:
            points = [(float(s), v) for s, v in zip(curve.steps, curve.loss, strict=True) if v == v and abs(v) < 1e30]
            if not points:
                continue
            verdict = str(rows[curve.scenario].get("parity") or "")
            if curve.scenario == reference:
                style: dict[str, Any] = {"color": "black", "linewidth": 2.4, "zorder": 2}
            elif verdict == "reference":  # the reference's other seeds
                style = {"color": GREY, "linewidth": 1.0, "linestyle": ":", "zorder": 1}
            else:
                colour, _, dash = next(styles, (GREY, "", "-"))
                style = {"color": colour, "linewidth": 1.3, "linestyle": dash, "zorder": 3}
            ax.plot([x for x, _ in points], [y for _, y in points], **style)
            tag = {"reference": "", "": ""}.get(verdict, f" ({verdict})")
            labels.append((points[-1][0], points[-1][1], _plain(curve.scenario + tag), False))
        if labels:
            low, high = ax.get_xlim()
            ax.set_xlim(low, high + 0.3 * (high - low))  # room for the names on the right
        place_labels(fig, ax, labels, [])
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("training loss (mean over each point's steps)")
        ax.grid(True, linewidth=0.4, alpha=0.5)
        ax.set_axisbelow(True)
        return _svg(fig, "loss", "Training loss against optimizer steps")


def memory_chart(report: Report) -> str:
    """Grouped horizontal bars: peak memory per scenario from each API the run recorded."""
    rows = report.summary.to_dict("records")
    series = [(col, label) for col, label in MEMORY_SERIES if any(_num(r.get(col)) is not None for r in rows)]
    series = series or [MEMORY_SERIES[0]]
    n = len(series)
    with _figure(len(rows), per_row=0.2 + 0.2 * n) as (fig, ax):
        height = 0.8 / n
        top = max((_num(r.get(col)) or 0.0 for r in rows for col, _ in series), default=0.0) or 1.0
        for i, (col, label) in enumerate(series):
            colour, hatch = SERIES_STYLE[i % len(SERIES_STYLE)]
            name = source_label(report.memory_source) if col == "peak_mem_mb" else label
            offsets = [y - 0.4 + height * (i + 0.5) for y in range(len(rows))]
            values = [_num(r.get(col)) for r in rows]
            known = [(o, v) for o, v in zip(offsets, values, strict=True) if v is not None]
            if known:
                ax.barh(
                    [o for o, _ in known],
                    [v for _, v in known],
                    height=height * 0.92,
                    color=colour,
                    hatch=hatch,
                    edgecolor="white",
                    label=name,
                )
            for o, v in known:
                ax.text(v + top * 0.01, o, fmt_num(v, 0), va="center", fontsize=7)
        for y, r in enumerate(rows):
            if _num(r["samples_per_s"]) is None:
                _no_bar(ax, y, r, top)
        ax.set_xlabel("peak memory (MB, median over ok repeats)")
        ax.set_xlim(0, top * 1.18)
        _scenario_axis(ax, rows)
        ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=3, fontsize=8, frameon=False)
        return _svg(fig, "memory", "Peak memory per scenario")


def speed_memory_map(report: Report) -> str:
    """One point per scenario (x peak memory, y samples/s); baseline and Pareto front marked."""
    ok = report.ok
    ok = ok[ok["peak_mem_mb"].notna()]
    with _figure(0, height_in=5.6) as (fig, ax):
        if ok.empty:
            ax.text(
                0.5,
                0.5,
                "no scenario with both a speed and a memory figure",
                ha="center",
                va="center",
                transform=ax.transAxes,
            )
            ax.set_axis_off()
            return _svg(fig, "map", "Speed versus memory")
        xs, ys = ok["peak_mem_mb"].astype(float), ok["samples_per_s"].astype(float)
        _pad_limits(ax, list(xs), list(ys))
        for _, front in ok[ok["pareto"]].groupby("model", sort=False):  # a front per model (report/data.py)
            front = front.sort_values("peak_mem_mb")
            if len(front) > 1:
                ax.plot(
                    front["peak_mem_mb"],
                    front["samples_per_s"],
                    drawstyle="steps-post",
                    color=ORANGE,
                    linestyle="--",
                    linewidth=1.2,
                    zorder=1,
                )
        rest = ok[~ok["pareto"] & ~ok["is_baseline"]]
        ax.scatter(
            rest["peak_mem_mb"],
            rest["samples_per_s"],
            s=36,
            color=SKY,
            edgecolor="black",
            linewidth=0.6,
            zorder=3,
            label="other scenarios",
        )
        on_front = ok[ok["pareto"]]
        ax.scatter(
            on_front["peak_mem_mb"],
            on_front["samples_per_s"],
            s=90,
            marker="D",
            color=ORANGE,
            edgecolor="black",
            linewidth=0.8,
            zorder=4,
            label=f"Pareto front: no other scenario{front_scope(report.summary)} is faster with less memory",
        )
        base, avoid = ok[ok["is_baseline"]], []
        if len(base):
            bx, by = float(base["peak_mem_mb"].iloc[0]), float(base["samples_per_s"].iloc[0])
            ax.scatter(
                [bx], [by], s=220, marker="*", color=GREY, edgecolor="black", linewidth=0.8, zorder=5, label="baseline"
            )
            ax.axvline(bx, color=GREY, linestyle=":", linewidth=0.8, zorder=0)
            ax.axhline(by, color=GREY, linestyle=":", linewidth=0.8, zorder=0)
            avoid.append(
                ax.text(
                    0.01,
                    0.99,
                    "faster, less memory than baseline",
                    transform=ax.transAxes,
                    ha="left",
                    va="top",
                    fontsize=7,
                    color="#555555",
                )
            )
        labels = []
        for r in ok.to_dict("records"):
            text = r["scenario"] + ("  (baseline)" if r["is_baseline"] and r["scenario"] != "baseline" else "")
            if r["pareto"]:
                text += "  [front]"
            labels.append((float(r["peak_mem_mb"]), float(r["samples_per_s"]), _plain(text), bool(r["pareto"])))
        legend = ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, fontsize=8, frameon=False)
        place_labels(fig, ax, labels, [legend, *avoid])
        ax.set_xlabel(f"peak memory (MB, {source_label(report.memory_source)}) - lower is better")
        ax.set_ylabel("samples/s (median) - higher is better")
        ax.grid(True, linewidth=0.4, alpha=0.5)
        return _svg(fig, "map", "Speed versus peak memory per scenario")


def fit_chart(points: list[dict[str, Any]], dimension: str) -> str:
    """Horizontal bars, fastest first: each recipe's samples/s at the largest value that fits
    (bench/report/capacity.py)."""
    with _figure(len(points), per_row=0.38) as (fig, ax):
        if not points:
            ax.text(
                0.5, 0.5, "no scenario trained at any value probed", ha="center", va="center", transform=ax.transAxes
            )
            ax.set_axis_off()
            return _svg(fig, "fit", "Fastest recipe that fits")
        top = max(float(p["samples_per_s"]) for p in points) or 1.0
        for y, p in enumerate(points):
            value = float(p["samples_per_s"])
            ax.barh(y, value, height=0.62, color=ORANGE if p["front"] else BLUE, edgecolor="white")
            label = f"{fmt_num(value, 2)}  ({dimension} {p['value']})" + ("  [front]" if p["front"] else "")
            ax.text(value + top * 0.01, y, _plain(label), va="center", fontsize=8)
        ax.set_yticks(range(len(points)))
        ax.set_yticklabels([_plain(str(p["scenario"])) for p in points])
        ax.set_ylim(len(points) - 0.5, -0.5)
        ax.set_xlim(0, top * 1.45)
        ax.set_xlabel(f"samples/s at the largest {dimension} that trains (one short probe)")
        ax.grid(True, axis="x", linewidth=0.4, alpha=0.5)
        ax.set_axisbelow(True)
        return _svg(fig, "fit", "Fastest recipe that fits")


def scaling_chart(lines: list[ScalingLine], metric: str, prefix: str) -> str:
    """One line per strategy against the number of GPUs: metric "samples_per_s" (median) or
    "efficiency" (weak scaling, 1.0 at one GPU, the dotted line)."""
    speed = metric == "samples_per_s"
    with _figure(0, height_in=4.2, width_in=SCALING_WIDTH_IN) as (fig, ax):
        gpus = sorted({p.gpus for line in lines for p in line.points}) or [1]
        labels: list[tuple[float, float, str, bool]] = []
        xs: list[float] = []
        ys: list[float] = []
        for i, line in enumerate(lines):
            colour, marker, dash = LINE_STYLES[i % len(LINE_STYLES)]
            points = [(p.gpus, p.samples_per_s if speed else p.efficiency) for p in line.points]
            known = [(float(x), float(y)) for x, y in points if y is not None]
            if len(known) < 2:
                continue
            ax.plot(
                [x for x, _ in known],
                [y for _, y in known],
                color=colour,
                marker=marker,
                linestyle=dash,
                linewidth=1.4,
                markersize=6,
                markeredgecolor="black",
                markeredgewidth=0.5,
                label=_plain(line.label),
                zorder=3,
            )
            labels.append((known[-1][0], known[-1][1], _plain(line.label), False))
            xs += [x for x, _ in known]
            ys += [y for _, y in known]
        if not speed:
            ax.axhline(1.0, color=GREY, linestyle=":", linewidth=1, zorder=1)
            ys.append(1.0)
        if ys:
            low = 0.0 if speed or min(ys) >= 0 else min(ys)
            ax.set_ylim(low, max(ys) * 1.12)
        width = (max(gpus) - min(gpus)) or 1
        ax.set_xlim(min(gpus) - 0.1 * width, max(gpus) + 0.75 * width)  # room for the names on the right
        ax.set_xticks(gpus)
        legend = ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, fontsize=8, frameon=False)
        place_labels(fig, ax, labels, [legend])
        ax.set_xlabel("GPUs (processes in the job)")
        ax.set_ylabel(
            "samples/s, whole job (median over ok repeats)" if speed else "weak-scaling efficiency (1 = linear)"
        )
        ax.grid(True, linewidth=0.4, alpha=0.5)
        ax.set_axisbelow(True)
        title = "Samples per second against the number of GPUs" if speed else "Scaling efficiency against GPUs"
        return _svg(fig, prefix, title)


# -- pieces ----------------------------------------------------------------------------------------
@contextmanager
def _figure(
    n_rows: int, per_row: float = 0.4, height_in: float | None = None, width_in: float = WIDTH_IN
) -> Iterator[tuple[Figure, Any]]:
    with matplotlib.rc_context(RC):
        height = height_in or max(2.2, 0.9 + per_row * n_rows)
        fig = Figure(figsize=(width_in, height))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        yield fig, ax


def _scenario_axis(ax: Any, rows: list[dict[str, Any]]) -> None:
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([_plain(_name(r)) for r in rows])
    for tick, r in zip(ax.get_yticklabels(), rows, strict=True):
        if r["is_baseline"]:
            tick.set_fontweight("bold")
    ax.set_ylim(len(rows) - 0.5, -0.5)  # the matrix order, top to bottom
    ax.grid(True, axis="x", linewidth=0.4, alpha=0.5)
    ax.set_axisbelow(True)


def _name(r: dict[str, Any]) -> str:
    name = str(r["scenario"])
    return f"{name} (baseline)" if r["is_baseline"] and name != "baseline" else name


def _no_bar(ax: Any, y: float, r: dict[str, Any], top: float) -> None:
    """A scenario without a measurement keeps its row, with its status and reason as text."""
    reason = str(r.get("error") or "")
    if len(reason) > REASON_CHARS:
        reason = reason[: REASON_CHARS - 1] + "…"
    text = f"{r['status'].upper()}: no measurement" + (f" ({reason})" if reason else "")
    ax.text(top * 0.01, y, _plain(text), va="center", fontsize=8, color=VERMILLION, style="italic")


def _baseline_value(report: Report, column: str) -> float | None:
    base = report.summary[report.summary["is_baseline"]]
    return _num(base[column].iloc[0]) if len(base) else None


def _num(value: Any) -> float | None:
    return None if missing(value) else float(value)


def _plain(text: str) -> str:
    """Text that matplotlib shows as is ($ would start mathtext)."""
    return text.replace("$", r"\$")


def _pad_limits(ax: Any, xs: list[float], ys: list[float]) -> None:
    def span(values: list[float], lo_pad: float, hi_pad: float) -> tuple[float, float]:
        lo, hi = min(values), max(values)
        width = (hi - lo) or abs(hi) or 1.0
        return lo - width * lo_pad, hi + width * hi_pad

    ax.set_xlim(*span(xs, 0.12, 0.35))  # room on the right for labels
    ax.set_ylim(*span(ys, 0.12, 0.15))


_ID = re.compile(r'\bid="([^"]+)"')


def _svg(fig: Figure, prefix: str, title: str) -> str:
    """The figure as an inline <svg> element: no XML prolog, no metadata, no namespace URLs,
    ids prefixed so that several charts can share one page."""
    buffer = io.StringIO()
    with matplotlib.rc_context({**RC, "svg.hashsalt": prefix}):
        fig.savefig(buffer, format="svg", bbox_inches="tight", pad_inches=0.1, metadata={"Date": None})
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.DOTALL)
    svg = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", svg)
    ids = set(_ID.findall(svg))
    svg = re.sub(
        r'(\bid="|url\(#|href="#)([^")]+)',
        lambda m: m.group(1) + (f"{prefix}-{m.group(2)}" if m.group(2) in ids else m.group(2)),
        svg,
    )
    head = f'<svg role="img" aria-label="{escape(title)}" class="chart"'
    return svg.replace("<svg", head, 1).replace(">", f"><title>{escape(title)}</title>", 1)
