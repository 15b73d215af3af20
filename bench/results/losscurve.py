"""The loss curve of each row: DIR/losses/NAME-rN.json, one small file per scenario x repeat,
written atomically by the parent from the worker's result, read back here only (the report's chart,
the parity figures of a row).

    {"schema": "gpubench.loss_curve/1", "scenario": "baseline", "repeat": 0, "every_steps": 5,
     "steps": [5, 10, ...], "loss": [6.93, 6.91, ...]}

A point is the mean loss of the micro-batches of `every_steps` optimizer steps, at the optimizer
step that ends them (the last point may cover fewer); a non-finite mean is null.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..fsio import atomic_write_text, read_json

LOSSES_DIR = "losses"
SCHEMA = "gpubench.loss_curve/1"
FINAL_SHARE = 0.2  # the final window: the points of the last 20% of the curve's optimizer steps


@dataclass(frozen=True)
class Curve:
    scenario: str
    repeat: int
    every_steps: int
    steps: tuple[int, ...]
    loss: tuple[float, ...]  # nan where the mean was not finite

    @property
    def finite(self) -> bool:
        return bool(self.loss) and all(math.isfinite(v) for v in self.loss)

    @property
    def initial(self) -> float:
        """The first point's loss (nan for an empty curve)."""
        return self.loss[0] if self.loss else math.nan

    @property
    def final_window(self) -> float:
        """The mean loss over the final window (final_window_loss); nan if a point there is not finite."""
        return final_window(self.steps, self.loss)


def final_window(steps: Sequence[int], loss: Sequence[float], share: float = FINAL_SHARE) -> float:
    """The mean of the points whose step lies in the last `share` of the steps (the last point at
    least); nan for an empty curve or a non-finite point in the window."""
    if not steps:
        return math.nan
    start = steps[-1] * (1 - share)
    window = [v for s, v in zip(steps, loss, strict=True) if s > start] or [loss[-1]]
    return math.fsum(window) / len(window)


def curve_path(result_dir: Path, scenario: str, repeat: int) -> Path:
    return Path(result_dir) / LOSSES_DIR / f"{scenario}-r{repeat}.json"


def write_curve(result_dir: Path, scenario: str, repeat: int, data: dict[str, Any]) -> Curve | None:
    """The worker's curve (bench/worker/tracking.LossTracker.curve) into losses/, atomically; the
    Curve as read back, or None when the worker sent none (a failure before training)."""
    curve = from_data({**data, "scenario": scenario, "repeat": repeat}, "the worker's result")
    if curve is None:
        return None
    text = json.dumps(to_data(curve), separators=(",", ":")) + "\n"  # a few kB: one line
    atomic_write_text(curve_path(result_dir, scenario, repeat), text)
    return curve


def to_data(curve: Curve) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "scenario": curve.scenario,
        "repeat": curve.repeat,
        "every_steps": curve.every_steps,
        "steps": list(curve.steps),
        "loss": [v if math.isfinite(v) else None for v in curve.loss],
    }


def from_data(data: Any, where: str) -> Curve | None:
    """A curve from its JSON form; None when there is no point; BadInput naming `where` when malformed."""
    try:
        steps = [int(s) for s in data["steps"]]
        loss = [math.nan if v is None else float(v) for v in data["loss"]]
        curve = Curve(str(data["scenario"]), int(data["repeat"]), int(data["every_steps"]), tuple(steps), tuple(loss))
    except (KeyError, TypeError, ValueError) as exc:
        raise BadInput(f"{where}: not a gpubench loss curve ({type(exc).__name__}: {exc})") from None
    if len(steps) != len(loss) or any(b <= a for a, b in zip(steps, steps[1:], strict=False)):
        raise BadInput(f"{where}: not a gpubench loss curve (steps and losses differ in length, or steps do not rise)")
    return curve if steps else None


def read_curve(path: Path) -> Curve | None:
    """One curve file; None when it is absent."""
    if not Path(path).is_file():
        return None
    try:
        data = read_json(path)
    except (OSError, ValueError) as exc:
        raise BadInput(f"{path}: unreadable ({type(exc).__name__}: {exc})") from None
    return from_data(data, str(path))


def read_curves(result_dir: Path) -> dict[tuple[str, int], Curve]:
    """Every curve of a result directory, by (scenario, repeat); {} when it has none."""
    folder = Path(result_dir) / LOSSES_DIR
    curves = (read_curve(p) for p in sorted(folder.glob("*.json"))) if folder.is_dir() else ()
    return {(c.scenario, c.repeat): c for c in curves if c is not None}
