"""`gpubench compare`: two result sets (base -> new), scenario by scenario, metric by metric.

core.py    the pure comparison: frames and env dicts in, a CompareResult out
env.py     the two runs' env.json: is the comparison meaningful, and what differs
render.py  the CompareResult as a terminal table, markdown or JSON
Files are read by bench.results.load_run.
"""

from .core import CompareResult, Thresholds, compare

__all__ = ["CompareResult", "Thresholds", "compare"]
