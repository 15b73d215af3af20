"""What the nodes of a multi-node job must share (bench/recipe/nodes.py), in process; the ranks' check at
the rendezvous, through two real node processes, is in tests/test_multigpu.py."""

from __future__ import annotations

from typing import Any

import pytest

from bench.recipe.nodes import NODES_DIFFER, NodesDiffer, check_same, differences, shared_settings
from bench.recipe.scenario import Scenario


def settings(**changes: Any) -> dict[str, Any]:
    job = {"strategy": "ddp", "nnodes": 3, "rdzv_endpoint": "10.0.0.1:29500"}
    return Scenario(name="s", **{**job, **changes}).settings()


def test_each_node_own_settings_may_differ() -> None:
    nodes = {0: settings(), 1: settings(node_rank=1, rdzv_endpoint="node0:29500"), 2: settings(description="x")}
    check_same(nodes)
    assert "node_rank" not in shared_settings(nodes[1]) and "batch_size" in shared_settings(nodes[1])


def test_differences_name_each_setting_its_values_and_their_nodes() -> None:
    nodes = {0: settings(), 1: settings(batch_size=8, seq_len=64), 2: settings(seq_len=64)}
    assert differences(nodes) == "batch_size = 4 on nodes 0, 2, 8 on node 1; seq_len = 512 on node 0, 64 on nodes 1, 2"
    assert differences({0: {"a": 1}, 1: {}}) == "a = 1 on node 0, (unset) on node 1"
    assert differences({0: settings(), 1: settings()}) == ""


def test_nodes_that_differ_are_refused_with_what_differs() -> None:
    with pytest.raises(NodesDiffer) as caught:
        check_same({0: settings(), 1: settings(precision="bf16", node_rank=1)})
    assert str(caught.value) == (
        f"{NODES_DIFFER}: precision = 'fp32' on node 0, 'bf16' on node 1; start every node with the same matrix "
        "and options"
    )
