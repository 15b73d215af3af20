"""`gpubench merge` and the rule behind it (bench/results/merge.py), on small result directories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness import gpubench_in_process, results, write_run

from bench.errors import BadInput
from bench.results.merge import combine, merge_dirs, pick

PACKAGES = {"torch": "2.13", "transformers": "5.0", "accelerate": "1.0"}
ENV = {"matrix": "quick", "host": "h0", "created_at": "2025-01-01T00:00:00+00:00", "gpu": None, "device": "cpu",
       "gpubench": "1.0", "python": "3.12", "packages": PACKAGES}  # fmt: skip


def row(
    name: str, repeat: int = 0, status: str = "ok", at: str = "2025-01-01T00:00:00+00:00", sps: float = 10.0
) -> dict[str, Any]:  # noqa: E501
    return {"scenario": name, "repeat": repeat, "status": status, "samples_per_s": sps if status == "ok" else None,
            "device": "cpu", "started_at": at}  # fmt: skip


def shard(path: Path, rows: list[dict[str, Any]], names: list[str], **env: Any) -> Path:
    write_run(path, rows, {**ENV, **env})
    plan = {"matrix": env.get("matrix", "quick"), "repeats": 1, "device": "cpu", "model": "tiny", "timeout_s": 60,
            "scenarios": [{"name": n, "batch_size": 4} for n in names]}  # fmt: skip
    (path / "scenarios.json").write_text(json.dumps(plan))
    return path


def test_merge_writes_the_rows_in_the_plans_order_with_every_shards_host(tmp_path: Path) -> None:
    a = shard(tmp_path / "a", [row("c"), row("a")], ["a", "c"])
    b = shard(tmp_path / "b", [row("b", 1), row("b")], ["b"], host="h1")
    done = gpubench_in_process("merge", tmp_path / "out", a, b)
    assert done.code == 0, done.err
    assert done.err == f"merged 2 directories: 4 rows in {tmp_path / 'out'}\n"
    frame = results(tmp_path / "out")
    assert list(zip(frame["scenario"], frame["repeat"], strict=True)) == [("a", 0), ("c", 0), ("b", 0), ("b", 1)]
    env = json.loads((tmp_path / "out" / "env.json").read_text())
    assert [m["host"] for m in env["merged"]] == ["h0", "h1"] and env["host"] == "h0"
    plan = json.loads((tmp_path / "out" / "scenarios.json").read_text())
    assert [s["name"] for s in plan["scenarios"]] == ["a", "c", "b"]


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"matrix": "full"}, "matrix 'full', but"),
        ({"packages": {**ENV["packages"], "torch": "2.12"}}, "packages.torch 2.12, but"),
        ({"gpu": {"name": "NVIDIA H200"}, "device": "cuda:0"}, "ran on NVIDIA H200, but"),
    ],
)
def test_shards_of_another_matrix_software_or_gpu_are_refused(tmp_path: Path, env: dict[str, Any], says: str) -> None:
    a = shard(tmp_path / "a", [row("a")], ["a"])
    b = shard(tmp_path / "b", [row("b")], ["b"], **env)
    with pytest.raises(BadInput, match=says):
        merge_dirs(tmp_path / "out", [a, b])
    assert not (tmp_path / "out" / "results.csv").exists()


def test_a_scenario_planned_with_other_settings_in_two_shards_is_refused(tmp_path: Path) -> None:
    a = shard(tmp_path / "a", [row("a")], ["a"])
    b = shard(tmp_path / "b", [row("b")], ["b"])
    plan = json.loads((b / "scenarios.json").read_text())
    plan["scenarios"].append({"name": "a", "batch_size": 8})
    (b / "scenarios.json").write_text(json.dumps(plan))
    with pytest.raises(BadInput, match="scenario 'a' has other settings than in"):
        merge_dirs(tmp_path / "out", [a, b])


def test_an_out_that_holds_a_run_or_a_single_dir_is_refused(tmp_path: Path) -> None:
    a = shard(tmp_path / "a", [row("a")], ["a"])
    b = shard(tmp_path / "b", [row("b")], ["b"])
    with pytest.raises(BadInput, match="already holds results.csv"):
        merge_dirs(a, [b, tmp_path / "a"])
    with pytest.raises(BadInput, match="two result directories or more"):
        merge_dirs(tmp_path / "out", [a])
    done = gpubench_in_process("merge", tmp_path / "out", a, tmp_path / "nope")
    assert done.code == 2 and "does not exist" in done.err


def test_the_duplicate_rule_final_over_interrupted_then_the_later_started() -> None:
    early, late = "2025-01-01T00:00:00+00:00", "2025-01-02T00:00:00+00:00"
    assert pick(row("a", status="interrupted", at=late), row("a", at=early))["status"] == "ok"
    assert pick(row("a", at=early), row("a", status="interrupted", at=late))["status"] == "ok"
    assert pick(row("a", at=late, sps=1), row("a", at=early, sps=2))["samples_per_s"] == 1
    assert pick(row("a", sps=1), row("a", sps=2))["samples_per_s"] == 2  # a tie: the shard named later
    rows, duplicates = combine([[row("a", sps=1), row("b")], [row("a", at=late, sps=3)]], ["b", "a"])
    assert duplicates == 1 and [(r["scenario"], r["samples_per_s"]) for r in rows] == [("b", 10.0), ("a", 3)]


def test_merge_reports_the_duplicates_it_resolved(tmp_path: Path) -> None:
    a = shard(tmp_path / "a", [row("a", status="interrupted")], ["a"])
    b = shard(tmp_path / "b", [row("a")], ["a"])
    done = gpubench_in_process("merge", tmp_path / "out", a, b)
    assert done.code == 0 and "1 duplicate row(s) resolved (final over interrupted, then the later)" in done.err
    assert list(results(tmp_path / "out")["status"]) == ["ok"]


def test_lanes_are_refused_for_scenarios_of_several_processes(tmp_path: Path) -> None:
    done = gpubench_in_process(
        "run", "--matrix", "multi-gpu", "--device", "cpu", "--lanes", "2", "--out", tmp_path / "r"
    )
    assert done.code == 2 and "use several processes (strategy); lanes run single-GPU scenarios only" in done.err
    assert not (tmp_path / "r").exists()
    done = gpubench_in_process("run", "--device", "cpu", "--matrix", "quick", "--lanes", "two", "--out", tmp_path)
    assert done.code == 2 and "--lanes 'two' must be a whole number or all" in done.err


def test_a_merged_sharded_night_compares_as_one_against_a_whole_one(tmp_path: Path) -> None:
    """Shards alone each miss scenarios against a whole night (compare exits 1, naming them); merged,
    they are one night: every scenario judged, nothing missing, exit 0."""
    whole = shard(tmp_path / "whole", [row("a"), row("b"), row("c")], ["a", "b", "c"])
    a = shard(tmp_path / "a", [row("a"), row("c")], ["a", "c"])
    b = shard(tmp_path / "b", [row("b")], ["b"], host="h1")
    alone = gpubench_in_process("compare", whole, a, "--format", "json")
    assert alone.code == 1 and json.loads(alone.out)["counts"] == {"missing": 1, "unchanged": 2}
    assert gpubench_in_process("merge", tmp_path / "night", a, b).code == 0
    merged = gpubench_in_process("compare", whole, tmp_path / "night", "--format", "json")
    assert merged.code == 0, merged.err
    report = json.loads(merged.out)
    assert report["counts"] == {"unchanged": 3}
    assert [(r["scenario"], r["verdict"]) for r in report["rows"]] == [
        ("a", "unchanged"),
        ("b", "unchanged"),
        ("c", "unchanged"),
    ]


def test_a_shard_without_env_json_is_refused_naming_it(tmp_path: Path) -> None:
    """Its GPU and software would never be compared with the others': refused, and OUT not written."""
    a = shard(tmp_path / "a", [row("a")], ["a"])
    b = shard(tmp_path / "b", [row("b")], ["b"])
    (b / "env.json").unlink()
    done = gpubench_in_process("merge", tmp_path / "out", a, b)
    assert done.code == 2, done.err
    assert done.lines == [
        f"gpubench: error: {b}: no env.json; its GPU and software cannot be checked against the other shards' "
        "(merge result directories a run wrote whole (a run writes env.json before its first row))"
    ]
    assert not (tmp_path / "out").exists()
