"""The suite's environment: no test depends on the terminal of whoever runs it.

pytest-xdist's workers (make test runs two) inherit COLUMNS=80; a user's shell may set COLUMNS or
LINES too. The commands size their tables from these, so the tests run without them, as in a CI log.
"""

from __future__ import annotations

import os
import signal

for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)

# pytest-xdist's workers ignore SIGINT (execnet); the Ctrl-C tests need Python's own handler, as
# in a user's process.
signal.signal(signal.SIGINT, signal.default_int_handler)
