"""bench.results.identity: the series key stays what stored histories hold, and compare and
history agree on what the same scenario is."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from bench.results.identity import (
    LATE_SETTINGS,
    content_sha256,
    plain,
    series_key,
    series_settings,
    setting_differences,
)

ROW: dict[str, Any] = {
    "scenario": "bf16",
    "repeat": 1,
    "status": "ok",
    "model": "auto",
    "model_resolved": "bert-large",
    "batch_size": 4.0,  # read back from a CSV as a float: the key holds 4
    "precision": "bf16",
    "samples": 512,
    "seq_len": 512,
    "device": "cuda:0",
    "timeout_s": 600,
    "description": "bf16 autocast",
    "compile_scope": "model",
    "gpus": 1,
}


def test_the_series_key_of_a_known_row_is_the_one_stored_histories_hold() -> None:
    """A new setting column changes every key unless it is a LATE_SETTING (out of the key at its
    default); this key was computed before the settings moved here from bench/history."""
    assert series_key(series_settings("bf16", ROW, "NVIDIA H200")) == "8bbf79602508470c"


def test_the_series_key_leaves_out_the_description_timeout_device_and_late_defaults() -> None:
    other = {**ROW, "description": "", "timeout_s": 60, "device": "cuda:1", "model": "bert-large"}
    other.update(LATE_SETTINGS)
    assert series_settings("bf16", other, "NVIDIA H200") == series_settings("bf16", ROW, "NVIDIA H200")


@pytest.mark.parametrize(
    ("change", "same"),
    [
        ({}, True),
        ({"description": "renamed", "timeout_s": 60, "device": "cuda:1"}, True),
        ({"batch_size": 4}, True),
        ({"strategy": "none", "zero_stage": 0}, True),  # late settings at their defaults
        ({"batch_size": 8}, False),
        ({"precision": "fp16"}, False),
        ({"model_resolved": "bert-base"}, False),
        ({"compile_scope": "layers"}, False),
    ],
)
def test_compare_refuses_exactly_what_history_keeps_apart(change: dict[str, Any], same: bool) -> None:
    changed = {**ROW, **change}
    keys = {series_key(series_settings("bf16", row, "NVIDIA H200")) for row in (ROW, changed)}
    differences = setting_differences(pd.DataFrame([ROW]), pd.DataFrame([changed]))
    assert (len(keys) == 1) is same
    assert (differences == ()) is same


# -- a run's content -------------------------------------------------------------------------------
CELLS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=False), st.text(max_size=8)
)
TABLES = st.lists(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), CELLS, min_size=1), min_size=1, max_size=5)


@given(rows=TABLES, seed=st.randoms())
def test_a_run_s_content_is_its_cells_whatever_their_order_or_spelling(rows: list[dict[str, Any]], seed: Any) -> None:
    shuffled = [dict(sorted(r.items(), key=lambda _: seed.random())) for r in rows]
    seed.shuffle(shuffled)
    as_read = [{k: float(v) if type(v) is int else v for k, v in r.items()} for r in shuffled]  # 4 read as 4.0
    assert content_sha256(as_read) == content_sha256(rows)
    assert content_sha256([{**r, "e": None} for r in rows]) == content_sha256(rows)  # an empty cell: absent


@given(rows=TABLES, row=st.integers(0, 4), value=CELLS.filter(lambda v: v is not None))
def test_a_changed_cell_changes_a_run_s_content(rows: list[dict[str, Any]], row: int, value: Any) -> None:
    changed = [dict(r) for r in rows]
    target = changed[row % len(rows)]
    assume(plain(target.get("a")) != plain(value))
    target["a"] = value
    assert content_sha256(changed) != content_sha256(rows)
