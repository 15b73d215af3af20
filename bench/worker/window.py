"""How long the steady-state window runs: the whole epoch, a fixed number of optimizer steps, or
until the mean step time is known well enough ("auto"). Pure arithmetic; the clock feeds it.

The "auto" rule (docs/methodology.md): at every CHECK_EVERY-th window step from MIN_STEPS on, the
window's step times so far are split into BATCHES consecutive batches of equal length (the oldest
n mod BATCHES steps left out); the batch means give a Student-t 95% interval of the mean step
time. The window stops when, with at least CI_MIN_STEPS step times known, the interval's
half-width is at most TARGET_PCT of the mean ("ci"), or when MAX_S seconds have passed since it
opened ("max_time"); the epoch's last step ends it in any case ("epoch_end"). Batch means, not
single steps: consecutive steps are correlated (the CPU that launches them speeds up and slows
down for seconds at a time), and means of longer runs of steps are close to independent, so their
spread is an honest one.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

BATCHES = 10
T_95 = 2.262  # Student's t, two-sided 95% (the 97.5% quantile), BATCHES - 1 = 9 degrees of freedom
TARGET_PCT = 2.0  # the interval's half-width, % of the mean step time
MIN_STEPS = 10  # the first check point: one step a batch, the fewest that give an interval at all
CI_MIN_STEPS = 20  # two steps a batch at least before a narrow interval may end the window
CHECK_EVERY = 5  # window steps between check points
# Seconds of window after which "auto" stops whatever the interval (at the next check point). Set
# for the nightly budget (a third of `full`'s time; docs/methodology.md says how it was measured);
# a row that has not reached 2% by then stops here, a slow one (>0.3 s a step) after MIN_STEPS.
MAX_S = 3.0
STOPS = ("ci", "max_time", "epoch_end", "steps")  # window_stop: why a window ended


def ci_pct(step_s: Sequence[float], batches: int = BATCHES) -> float | None:
    """Half-width of the 95% interval of the mean step time by batch means, in % of the mean;
    None with fewer steps than batches or a mean of zero."""
    length = len(step_s) // batches
    if length == 0:
        return None
    used = step_s[len(step_s) - length * batches :]
    means = [math.fsum(used[i * length : (i + 1) * length]) / length for i in range(batches)]
    mean = math.fsum(means) / batches
    if mean <= 0:
        return None
    return T_95 * statistics.stdev(means) / math.sqrt(batches) / mean * 100


@dataclass(frozen=True)
class WindowRule:
    """A scenario's `window` setting (bench/recipe/scenario.py checks it) as a rule the clock asks after
    every window step."""

    setting: int | str = "epoch"

    @property
    def auto(self) -> bool:
        return self.setting == "auto"

    def is_check_point(self, window_steps: int) -> bool:
        """Whether "auto" decides after this window step: the same steps on every rank."""
        return self.auto and window_steps >= MIN_STEPS and (window_steps - MIN_STEPS) % CHECK_EVERY == 0

    def fixed_stop(self, window_steps: int) -> str | None:
        """With a whole number of steps: "steps" once the window has that many, else None."""
        if isinstance(self.setting, int) and window_steps >= self.setting:
            return "steps"
        return None

    def auto_stop(self, step_s: Sequence[float], elapsed_s: float) -> str | None:
        """At a check point: "ci" when the interval is narrow enough, else "max_time" when the
        window has run MAX_S seconds, else None (go on). `step_s`: the step times known so far (on a
        GPU, those whose CUDA events have completed); `elapsed_s`: host time since the window opened."""
        reached = ci_pct(step_s)
        if len(step_s) >= CI_MIN_STEPS and reached is not None and reached <= TARGET_PCT:
            return "ci"
        if elapsed_s >= MAX_S:
            return "max_time"
        return None
