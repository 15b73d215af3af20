"""Trend charts of a series: a unicode sparkline for the terminal, an SVG file with matplotlib.

Both mark accepted steps and flagged points (bench.history.check marks); matplotlib is imported
only when an SVG is asked for.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BadInput
from ..fsio import atomic_write_text
from .check import ACCEPTED, BEYOND, DRIFT, FAILED, NO_VALUE, NOISY, Mark

if TYPE_CHECKING:
    from .library import SeriesView

BLOCKS = "▁▂▃▄▅▆▇█"
MARKERS = {BEYOND: "!", DRIFT: "!", FAILED: "!", NOISY: "?", ACCEPTED: "|", NO_VALUE: "x"}
LEGEND = "! flagged (beyond, or drifting)   ? beyond the threshold, not confirmed   | accepted   x no value"


def sparkline(values: Sequence[float | None]) -> str:
    """One block per value, scaled from the lowest to the highest; a gap for a missing value."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return " " * len(values)
    low, high = min(finite), max(finite)
    out = []
    for v in values:
        if v is None or not math.isfinite(v):
            out.append(" ")
        elif high == low:
            out.append(BLOCKS[len(BLOCKS) // 2])
        else:
            out.append(BLOCKS[round((v - low) / (high - low) * (len(BLOCKS) - 1))])
    return "".join(out)


def marker_line(marks: Sequence[Mark]) -> str:
    """Under the sparkline: what each point got (MARKERS), a space when nothing to say."""
    return "".join(MARKERS.get(m.flag, " ") for m in marks)


def write_svg(views: Sequence[SeriesView], path: Path, title: str, option: str = "--svg") -> None:
    """One line per series over time; flagged points in red, accepted steps as dashed lines.
    `option`: the command-line option that named `path`, for the messages."""
    if Path(path).suffix.lower() != ".svg":
        raise BadInput(f"{option} {path}: the chart is written as SVG; name the file *.svg")
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise BadInput(f"{option} needs matplotlib, which is not installed", hint="pip install matplotlib") from None
    fig = Figure(figsize=(10, 4.5), layout="constrained")
    ax = fig.add_subplot()
    for view in views:
        times = [p.created_at for p in view.points]
        values = [math.nan if m.value is None else m.value for m in view.marks]
        label = f"{view.series.gpu_model}, {view.series.model} [{view.series.key[:8]}]"
        (line,) = ax.plot(times, values, marker="o", markersize=3, linewidth=1.2, label=label)
        baselines = [math.nan if m.baseline is None else m.baseline for m in view.marks]
        ax.plot(times, baselines, linestyle=":", linewidth=1, color=line.get_color(), alpha=0.7, drawstyle="steps-mid")
        flagged = [i for i, m in enumerate(view.marks) if m.flagged]
        if flagged:
            ax.scatter(
                [times[i] for i in flagged], [values[i] for i in flagged], marker="x", s=60, color="red", zorder=3
            )
        noisy = [i for i, m in enumerate(view.marks) if m.flag == NOISY]
        if noisy:
            ax.scatter(
                [times[i] for i in noisy],
                [values[i] for i in noisy],
                marker="o",
                s=40,
                facecolors="none",
                edgecolors="orange",
                zorder=3,
            )
        for t, m in zip(times, view.marks, strict=True):
            if m.flag == ACCEPTED:
                ax.axvline(t, linestyle="--", linewidth=1, color="grey")
                ax.annotate(
                    m.note.removeprefix("accepted: ")[:40],
                    (t, 1),
                    xycoords=("data", "axes fraction"),
                    rotation=90,
                    va="top",
                    ha="right",
                    fontsize=7,
                    color="grey",
                )
    ax.set_title(title)
    ax.set_ylabel(views[0].metric if views else "")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.autofmt_xdate()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    atomic_write_text(Path(path), buffer.getvalue())
