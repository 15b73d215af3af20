"""`gpubench compare`: two result sets (base -> new), scenario by scenario, one verdict per quantity.

core.py      the pure comparison: frames and env dicts in, a CompareResult out
gate.py      the statistics: a quantity of every scenario judged at once (floor, t-test, Holm), and
             what each judgement could detect
settings.py  was each scenario measured the same way on both sides (settings, GPUs, memory source)
env.py       the two runs' env.json: is the comparison meaningful, and what differs
plan.py      the repeats a comparison needs to catch a given slow-down (compare --detect)
render.py    the CompareResult (and the plan) as a terminal table, markdown, JSON or CSV
Files are read by bench.results.load_run.
"""

from .comparison import CompareResult, Thresholds, compare

__all__ = ["CompareResult", "Thresholds", "compare"]
