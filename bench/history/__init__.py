"""Run history: every run stored in a database (a SQLite file or PostgreSQL), trends, and
regressions judged against the history of each series (`gpubench history`, `run --record`).

schema.py (tables), ingest.py (a result directory as rows), migrate.py (the steps from older
schema versions), store.py (open, check, migrate, write), queries.py (read), judge.py (pure
judging), chart.py and render.py (output), api.py (the functions behind the CLI). This module
stays light: the CLI imports it at start-up.
"""

DEFAULT_DB = "results/history.sqlite"
DB_ENV = "GPUBENCH_DB"
