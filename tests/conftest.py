"""The suite's environment: no test depends on the terminal of whoever runs it.

pytest-xdist's workers (make test runs two) inherit COLUMNS=80; a user's shell may set COLUMNS or
LINES too. The commands size their tables from these, so the tests run without them, as in a CI log.
"""

from __future__ import annotations

import os

for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)
