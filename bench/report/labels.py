"""Labels for the points of a chart, placed where they overlap nothing (greedy, in pixels)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

LEADER_COLOUR = "#8c8c8c"  # the charts' grey


def place_labels(fig: Figure, ax: Any, labels: list[tuple[float, float, str, bool]], avoid: list[Any]) -> None:
    """Label each point where it overlaps no other label, point or `avoid` artist (greedy, in
    pixels); a label pushed far from its point gets a leader line."""
    canvas = fig.canvas
    assert isinstance(canvas, FigureCanvasAgg)
    renderer = canvas.get_renderer()
    px_per_pt = fig.dpi / 72.0
    axes_box = ax.get_window_extent(renderer)
    points = [tuple(ax.transData.transform((x, y))) for x, y, _, _ in labels]
    taken = [(px - 10, py - 10, px + 10, py + 10) for px, py in points]
    taken += [tuple(a.get_window_extent(renderer).extents) for a in avoid]
    for i in sorted(range(len(labels)), key=lambda i: -points[i][1]):
        x, y, text, bold = labels[i]
        style = {
            "fontsize": 8,
            "fontweight": "bold" if bold else "normal",
            "bbox": {"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.8},
        }
        probe = ax.text(x, y, text, **style)
        box = probe.get_window_extent(renderer)
        probe.remove()
        w, h = box.width, box.height
        px, py = points[i]
        dx, dy = 12.0, 0.0  # crowded everywhere: right of the point
        for cx, cy in candidates(w, h):
            rect = (px + cx, py + cy - h / 2, px + cx + w, py + cy + h / 2)
            inside = (
                rect[0] >= axes_box.x0 and rect[2] <= axes_box.x1 and rect[1] >= axes_box.y0 and rect[3] <= axes_box.y1
            )
            if inside and not any(overlap(rect, t) for t in taken):
                dx, dy = cx, cy
                break
        far = math.hypot(dx, dy) > 3 * h
        arrow = {"arrowstyle": "-", "color": LEADER_COLOUR, "linewidth": 0.5} if far else None
        ax.annotate(
            text,
            (x, y),
            xytext=(dx / px_per_pt, dy / px_per_pt),
            textcoords="offset points",
            ha="left",
            va="center",
            zorder=6,
            arrowprops=arrow,
            **style,
        )
        taken.append((px + dx, py + dy - h / 2, px + dx + w, py + dy + h / 2))


def candidates(w: float, h: float) -> Iterator[tuple[float, float]]:
    """Offsets (pixels) of a label's left edge and vertical centre from its point, nearest first."""
    yield 12.0, 0.0
    yield -12.0 - w, 0.0
    yield -w / 2, h * 0.9
    yield -w / 2, -h * 0.9
    for k in range(1, 12):
        for sign in (1, -1):
            yield 12.0, sign * k * h * 1.05
            yield -12.0 - w, sign * k * h * 1.05


def overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
