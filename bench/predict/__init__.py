"""`gpubench predict` and the pred_* results columns: the memory model (bench.memory) set to work on
a matrix, rendered, and set beside what a run measured. The runner and the CLI call only these:

  predicted_columns(sc, model, figures)  the pred_* columns of a results row (bench/run/runner.py)
  predict_matrix(...)                    the data behind `gpubench predict`
  parse_memory("24GB")                   a memory size in MB (2**20 bytes)

core.py     predict_matrix: the report's rows (prediction, need, fits, measured beside predicted)
columns.py  predicted_columns
measured.py the measured counterparts from a results row, and a calibration from a previous run
render.py   the `gpubench predict` table, CSV, markdown and JSON
bench.memory imports nothing from here.
"""

from .pred_columns import predicted_columns
from .predictions import PredictReport, ScenarioMemory, parse_memory, predict_matrix

__all__ = ["PredictReport", "ScenarioMemory", "parse_memory", "predict_matrix", "predicted_columns"]
