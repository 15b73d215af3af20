"""bench/worker/dist.py in this process: the window agreement's broadcast, over a one-rank gloo group
(a real torch.distributed group, with no other process)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch.distributed as tdist

from bench.worker import dist
from bench.worker.window import STOPS


@pytest.fixture
def one_rank(tmp_path: Path) -> Iterator[None]:
    store = tdist.FileStore(str(tmp_path / "store"), 1)
    tdist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield
    finally:
        tdist.destroy_process_group()


def test_the_window_agreement_carries_every_verdict_and_none(one_rank: None) -> None:
    agree = dist.window_agreement(timeout_s=10.0)
    assert [agree(v) for v in (None, *STOPS)] == [None, *STOPS]
