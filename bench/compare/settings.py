"""Was each scenario measured the same way on both sides? The one-line refusal when not.

What must match (a scenario's settings, its number of GPUs and the source of its peak memory) is
bench.results.identity's `setting_differences`, which `history` shares for its series, so
`compare` and `history` agree on what "the same scenario" is.
"""

from __future__ import annotations

from ..results.identity import SettingDifference

SHOWN = 4  # differences named in the one-line error; the rest are counted


def refusal(differences: tuple[SettingDifference, ...]) -> str:
    """The one-line error for differences that stop the comparison."""
    gpus = [d for d in differences if d.gpu_count]
    what = "the runs used different numbers of GPUs" if gpus else "scenarios were measured differently"
    shown = [f"{d.scenario}: {d.text()}" for d in (gpus or list(differences))[:SHOWN]]
    more = len(differences) - len(shown)
    return f"{what} ({'; '.join(shown)}{f'; and {more} more' if more > 0 else ''})"
