"""The suite's environment: no test depends on the terminal of whoever runs it.

pytest-xdist's workers (make test runs two) inherit COLUMNS=80; a user's shell may set COLUMNS or
LINES too. The commands size their tables from these, so the tests run without them, as in a CI log.
"""

from __future__ import annotations

import os
import signal

import pytest
from hypothesis import settings

# No wall-clock budget per example: hypothesis' default deadline (200 ms) fails a test on a loaded
# CI machine, not on a defect.
settings.register_profile("gpubench", deadline=None)
settings.load_profile("gpubench")

for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)

# pytest-xdist's workers ignore SIGINT (execnet); the Ctrl-C tests need Python's own handler, as
# in a user's process.
signal.signal(signal.SIGINT, signal.default_int_handler)

# The modules that run many real `gpubench run`s go first, so that `make test`'s processes
# (pytest-xdist, a file each) end together instead of waiting on one long file at the end.
HEAVY_FIRST = (  # longest first (make test --durations on an idle 2-core machine)
    "test_multigpu.py",
    "test_reliability.py",
    "test_slurm.py",  # a real Slurm job, cancelled and resumed (with GPUBENCH_TEST_SLURM=1)
    "test_families.py",
    "test_run_e2e.py",
    "test_parity_e2e.py",
    "test_workflow.py",
    "test_required.py",
    "test_launcher.py",
    "test_llm.py",
    "test_history_store.py",
    "test_engines.py",
    "test_input_classes.py",
    "test_hook.py",
    "test_history_cli.py",
    "test_predict_cli.py",
    "test_readme.py",
    "test_report_cli.py",
    "test_run_cli.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return HEAVY_FIRST.index(name) if name in HEAVY_FIRST else len(HEAVY_FIRST)

    items.sort(key=rank)  # stable: each module keeps its own order
