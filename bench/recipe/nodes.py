"""What every node of a multi-node job must share: the scenario's settings, but for each node's own
(`node_rank`, and `rdzv_endpoint`, which names node 0 as each node reaches it) and its words
(`description`). The ranks gather them right after the process group is up (bench/worker/dist.py),
so nodes started with different settings fail at once, each naming what differs, instead of
waiting on each other until a collective times out. Pure data, no torch: the parent reads the
ranks' reason too (bench/run/torchrun.py)."""

from __future__ import annotations

from typing import Any

NODE_OWN = ("node_rank", "rdzv_endpoint", "description")
NODES_DIFFER = "the nodes run different scenario settings"


class NodesDiffer(RuntimeError):
    """The nodes met at the rendezvous with different scenario settings."""


def shared_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings that must be the same on every node."""
    return {k: v for k, v in settings.items() if k not in NODE_OWN}


def _nodes(nodes: list[int]) -> str:
    return f"node{'s' if len(nodes) > 1 else ''} {', '.join(map(str, nodes))}"


def differences(by_node: dict[int, dict[str, Any]]) -> str:
    """Each setting whose value is not the same on every node, with the nodes of each value:
    "batch_size = 4 on node 0, 8 on node 1"; "" when the nodes agree."""
    keys = list(dict.fromkeys(k for settings in by_node.values() for k in settings))
    parts = []
    for key in keys:
        holders: dict[str, list[int]] = {}
        for node, settings in sorted(by_node.items()):
            holders.setdefault(repr(settings[key]) if key in settings else "(unset)", []).append(node)
        if len(holders) > 1:
            parts.append(f"{key} = " + ", ".join(f"{value} on {_nodes(nodes)}" for value, nodes in holders.items()))
    return "; ".join(parts)


def check_same(by_node: dict[int, dict[str, Any]]) -> None:
    """NodesDiffer naming the settings that differ, if any do."""
    differ = differences({node: shared_settings(s) for node, s in by_node.items()})
    if differ:
        raise NodesDiffer(f"{NODES_DIFFER}: {differ}; start every node with the same matrix and options")
