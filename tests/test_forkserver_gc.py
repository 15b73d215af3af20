"""The fork server freezes what its imports made before it forks (gc.freeze): a forked worker's full
collections skip those objects. The Trainer's train() begins with accelerate's gc.collect(), which
walked torch's and transformers' objects in 0.25-0.34 s of every forked row's start."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SERVE = """
import gc, io, json
from bench.worker import forkserver
forkserver._preload = lambda engines, extras=(): ({why!r} or None, [])
out = io.StringIO()
forkserver.serve(io.StringIO(""), out, engines=())
print(json.dumps({{"frozen": gc.get_freeze_count(), "ready": json.loads(out.getvalue())["ready"]}}))
"""


@pytest.mark.parametrize("why", ["", "an import created a CUDA context"])
def test_a_ready_server_freezes_its_imports_and_one_that_cannot_serve_does_not(why: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SERVE.format(why=why)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.splitlines()[-1])
    assert said["ready"] is (not why)
    assert (said["frozen"] > 1000) is (not why)  # every object its imports made, not a handful
