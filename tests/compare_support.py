"""Bad results files shared by the library and CLI tests of `gpubench compare`."""

from __future__ import annotations

import pytest

HEADER = "scenario,repeat,status,samples_per_s,peak_mem_mb,error\n"
MISSING_COLUMNS = "missing columns: scenario, repeat, status, samples_per_s, peak_mem_mb"

# (file text, the problem the one-line error names)
BAD_RESULT_FILES = [
    pytest.param("", "the file is empty", id="empty"),
    pytest.param("a,b\n1,2\n", f"not a gpubench results file ({MISSING_COLUMNS})", id="not-gpubench"),
    pytest.param(
        HEADER + "baseline,1,ok,100,1000,\nbaseline,2,ok,fast,1000,\n",
        "line 3: column 'samples_per_s' holds a non-numeric value 'fast'",
        id="non-numeric",
    ),
    pytest.param(
        HEADER + "baseline,1,ok,100,1000,\nbaseline,1,ok,101,1000,\n",
        "duplicate rows for scenario 'baseline' repeat 1",
        id="duplicate",
    ),
    pytest.param(HEADER, "holds a header but no result rows", id="header-only"),
]
