"""Multi-process scenarios on the CPU: torchrun with gloo, 2 processes, the tiny model, end to end
through `gpubench run`: DDP on two torchrun agents as two nodes, FSDP2 and a hung rank on one node;
a crashed and a killed rank on their rank files. The arithmetic (ranks into one row, the failing
rank's name, scaling, per-GPU memory) is tested in process. DeepSpeed and NCCL need a GPU: tests/test_gpu.py."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from harness import BASE, gpubench, pids_with, start_gpubench, wait_for, write_matrix
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.errors import BadInput
from bench.families.memory_model import load_dims, predict
from bench.recipe.scenario import Scenario
from bench.results import read_results
from bench.results.scaling import add_scaling
from bench.run import torchrun
from bench.run.proc import ProcResult
from bench.worker.ranks import combine_ranks, loss_outcome

PARALLEL = {**BASE, "engine": "accelerate", "gpus": 2, "strategy": "ddp", "timeout_s": 40}


# -- end to end ------------------------------------------------------------------------------------
def free_port() -> int:
    """A port no one listens on now (a fixed one collides with another suite on the same host)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """One job on two nodes (two `gpubench run`s, a torchrun agent each: DDP across the nodes), then
    on node 0 alone FSDP2, the plain PyTorch loop's DDP, a rank that hangs and a rank whose weights
    are NaN, two processes each.
    The ranks' own import of torch and transformers costs about 15 s of CPU a scenario, so the
    other failures are tested on their rank files: a rank that raises,
    test_failure_puts_the_rank_that_raised_first; one killed by a signal,
    test_failure_names_the_root_cause_from_torchrun; the scaling reference,
    test_scaling_prefers_the_same_strategy_on_one_gpu. Node 0's results directory is run[0]."""
    tmp = tmp_path_factory.mktemp("multigpu")
    matrix = write_matrix(
        tmp / "m.toml",
        {
            # first: node 1 waits; a 60 s timeout gives the nodes 15 s to meet (torchrun.rendezvous_timeout_s)
            "ddp": {"gpus": 1, "nnodes": 2, "rdzv_endpoint": f"127.0.0.1:{free_port()}", "timeout_s": 60},
            "fsdp": {"strategy": "fsdp"},
            "ddp-torch": {"engine": "torch"},  # torch's own DDP and DistributedSampler, no library between
            # the collective timeout is half the scenario's (45 s): it, not the kill at 90 s, must end
            # the job, with 45 s to spare for the ranks' start on a loaded machine
            "hang1": {"inject_fault": "hang", "fault_rank": 1, "timeout_s": 90},
            "nan1": {"inject_fault": "nan", "fault_rank": 1},  # DDP made rank 1's weights rank 0's
        },
        base=PARALLEL,
    )
    node1 = start_gpubench(
        "run",
        "--matrix",
        matrix,
        "--only",
        "ddp",
        "--device",
        "cpu",
        "--node-rank",
        "1",
        "--out",
        tmp / "node1",
        log_dir=tmp / "log1",
    )
    # the interconnect check is tested on tests/test_mesh.py's run
    done = gpubench(
        "run", "--matrix", matrix, "--device", "cpu", "--out", tmp / "node0", "--skip-preflight", timeout=600
    )
    wait_for("node 1 to finish", lambda: node1.poll() is not None, timeout=120)
    assert node1.returncode == 0, (tmp / "log1" / "stderr.txt").read_text()[-800:]
    assert done.returncode == 1, done.stderr  # the hanging rank, the diverged one
    return {0: tmp / "node0", 1: tmp / "node1"}


def rows(out: Path) -> dict[str, dict[str, Any]]:
    return {r["scenario"]: r for r in read_results(out / "results.csv").to_dict("records")}


def test_ddp_and_fsdp_are_one_row_each_with_every_rank_in_it(run: dict[int, Path]) -> None:
    got = rows(run[0])
    for name, wrapper in (
        ("ddp", "DistributedDataParallel"),
        ("fsdp", "FSDP2"),
        ("ddp-torch", "DistributedDataParallel"),
    ):
        row = got[name]
        assert (row["status"], row["world_size"], row["parallel_wrapper"]) == ("ok", 2, wrapper), name
        ranks = json.loads(row["rank_figures"])
        assert [r["rank"] for r in ranks] == [0, 1], name
        # the job's samples/s: both ranks' window samples over the longest of their (barrier-aligned) windows
        window = max(r["window_s"] for r in ranks)
        assert row["samples_per_s"] == pytest.approx(sum(r["samples_per_s"] * r["window_s"] for r in ranks) / window)
        assert all(r["window_s"] > 0.9 * window for r in ranks), name  # the barrier aligned them
        assert row["samples_per_s_per_gpu"] == pytest.approx(row["samples_per_s"] / 2)
        assert row["rss_peak_sum_mb"] == pytest.approx(sum(r["rss_peak_mb"] for r in ranks))
        assert row["rss_peak_mb"] == max(r["rss_peak_mb"] for r in ranks)


def test_a_failing_rank_is_named_with_its_reason(run: dict[int, Path]) -> None:
    got = rows(run[0])
    hung = got["hang1"]
    assert hung["status"] == "timeout" and hung["error"].startswith("rank 1 never finished (hung)")
    assert "rank 0 failed waiting for it in a collective" in hung["error"]
    assert hung["worker_wall_s"] < 90  # the waiting rank's collective timeout ended it, not the kill


def test_a_non_finite_loss_on_rank_1_is_diverged_and_names_the_rank(run: dict[int, Path]) -> None:
    row = rows(run[0])["nan1"]
    assert (row["status"], row["loss_finite"], row["world_size"]) == ("diverged", False, 2)
    assert row["error"].startswith("rank 1: ") and "non-finite losses; final loss nan" in row["error"]
    ranks = json.loads(row["rank_figures"])
    assert ranks[1]["nonfinite_losses"] > 0 and ranks[1]["loss_finite"] is False


def test_no_rank_outlives_its_scenario(run: dict[int, Path]) -> None:
    assert not pids_with(str(run[0])) and not pids_with(str(run[1]))


def test_two_torchrun_agents_are_two_nodes(run: dict[int, Path]) -> None:
    node0, node1 = (rows(run[r]) for r in (0, 1))
    assert list(node1) == ["ddp"]  # --only
    node0, node1 = node0["ddp"], node1["ddp"]
    assert node0["world_size"] == node1["world_size"] == 2 and (node0["node_rank"], node1["node_rank"]) == (0, 1)
    assert node0["samples_per_s"] == node1["samples_per_s"]  # both nodes report the whole job


def test_a_rendezvous_that_fails_is_named_from_torchrun_own_words(tmp_path: Path) -> None:
    """No rank starts: node 0's port is taken, node 1 alone never meets node 0, node 1's node 0 does
    not resolve. Each row says what torchrun did and why, never that ranks hung."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        nodes, alone = {"gpus": 1, "nnodes": 2}, f"127.0.0.1:{free_port()}"
        matrix = write_matrix(
            tmp_path / "m.toml",
            {
                "taken": {**nodes, "rdzv_endpoint": f"127.0.0.1:{port}"},
                # 20 s: torchrun waits 5 s for the other node (torchrun.rendezvous_timeout_s)
                "alone": {**nodes, "rdzv_endpoint": alone, "timeout_s": 20},
                # 30 s: a connecting node tries twice, 7 s each, and waits between
                "unresolved": {**nodes, "node_rank": 1, "rdzv_endpoint": "no-such-host.invalid:29500", "timeout_s": 30},
            },
            base=PARALLEL,
        )
        done = gpubench("run", "--matrix", matrix, "--device", "cpu", "--out", tmp_path / "out")
    assert done.returncode == 1, done.stderr[-2000:]
    got = rows(tmp_path / "out")
    for name, row in got.items():
        assert "hung" not in row["error"] and "rank 0" not in row["error"], row["error"]
        assert row["exit_code"] == 1 and not list((tmp_path / "out" / "work" / f"{name}-r0").glob("rank-*.json"))
    assert got["taken"]["status"] == "crashed"
    assert got["taken"]["error"].startswith(
        f"torchrun exited with code 1 before starting any rank: port {port} is taken on this node "
        "(address already in use); torchrun said: DistNetworkError: "
    )
    assert got["alone"]["status"] == "timeout"
    assert got["alone"]["error"].startswith(
        "torchrun exited with code 1 before starting any rank: the rendezvous timed out waiting for the other "
        f"node(s): 1 of 2 nodes joined at {alone}; torchrun said: DistStoreError: "
    )
    assert got["unresolved"]["status"] == "crashed"
    assert got["unresolved"]["error"].startswith(
        "torchrun exited with code 1 before starting any rank: could not resolve host 'no-such-host.invalid'"
    )


def test_nodes_with_different_settings_fail_at_once_naming_them(tmp_path: Path) -> None:
    """Two nodes meet with different batch sizes: every rank of both stops right after the process
    group is up, each node's row naming the setting and the nodes, none blaming the other's silence."""
    job = {"gpus": 1, "nnodes": 2, "rdzv_endpoint": f"127.0.0.1:{free_port()}", "timeout_s": 60}
    matrices = [
        write_matrix(tmp_path / f"m{node}.toml", {"job": {**job, "batch_size": batch}}, base=PARALLEL)
        for node, batch in ((0, 4), (1, 8))
    ]
    node1 = start_gpubench(
        "run",
        "--matrix",
        matrices[1],
        "--device",
        "cpu",
        "--node-rank",
        "1",
        "--out",
        tmp_path / "node1",
        log_dir=tmp_path / "log1",
    )
    done = gpubench("run", "--matrix", matrices[0], "--device", "cpu", "--out", tmp_path / "node0")
    wait_for("node 1 to finish", lambda: node1.poll() is not None, timeout=120)
    assert (done.returncode, node1.returncode) == (1, 1), done.stderr[-2000:]
    differ = (
        "error: NodesDiffer: the nodes run different scenario settings: batch_size = 4 on node 0, 8 on node 1; "
        "start every node with the same matrix and options"
    )
    for node in (0, 1):
        row = rows(tmp_path / f"node{node}")["job"]
        assert (row["status"], row["error"]) == ("error", f"rank {node}: {differ}")


# -- in process ------------------------------------------------------------------------------------
def scenario(**settings: Any) -> Scenario:
    return Scenario(name="s", **{**PARALLEL, **settings})


CONTRADICTIONS = [
    {"strategy": "none"},  # gpus = 2 without a strategy
    {"strategy": "ddp", "zero_stage": 2},
    {"strategy": "deepspeed"},  # no zero_stage
    {"strategy": "ddp", "fsdp_sharding": "grad_op"},
    {"strategy": "ddp", "offload": "params"},
    {"strategy": "fsdp", "offload": "optimizer"},
    {"strategy": "deepspeed", "zero_stage": 2, "offload": "params"},
    {"strategy": "fsdp", "fsdp_sharding": "hybrid"},
    {"nnodes": 2},  # no rdzv_endpoint
    {"node_rank": 1},  # with nnodes = 1
    {"fault_rank": 1},  # without inject_fault
    {"rdzv_endpoint": "host-without-port"},
]


@pytest.mark.parametrize("bad", CONTRADICTIONS, ids=lambda b: ",".join(f"{k}={v}" for k, v in b.items()))
def test_contradictions_are_bad_input(bad: dict[str, Any]) -> None:
    with pytest.raises(BadInput, match="scenario 's'"):
        scenario(**bad)


@settings(max_examples=60, deadline=None)
@given(
    key=st.sampled_from(["gpus", "nnodes", "node_rank", "zero_stage", "fault_rank"]),
    value=st.one_of(st.integers(-(10**12), 10**12), st.floats(allow_nan=True), st.text(max_size=5), st.booleans()),
)
def test_any_count_is_checked(key: str, value: Any) -> None:
    """Any value of a multi-process count is a valid scenario or BadInput naming it; nothing else."""
    try:
        scenario(**{key: value, "strategy": "deepspeed", "zero_stage": 1} if key != "zero_stage" else {key: value})
    except BadInput as exc:
        assert key in str(exc) or "zero_stage" in str(exc) or "strategy" in str(exc)


def test_torchrun_command_one_node_and_several() -> None:
    one = torchrun.command(scenario(), Path("s.json"), Path("r.json"), 40)
    assert "--standalone" in one and "--nproc-per-node=2" in one and one[-3:] == ["bench.worker", "s.json", "r.json"]
    assert not any(a.startswith("--rdzv-conf") for a in one)
    two = torchrun.command(
        scenario(gpus=1, nnodes=2, node_rank=1, rdzv_endpoint="10.0.0.1:29500"), Path("s"), Path("r"), 1800
    )
    assert {"--nnodes=2", "--node-rank=1", "--master-addr=10.0.0.1", "--master-port=29500"} <= set(two)
    assert "--rdzv-conf=timeout=450" in two  # a quarter of the scenario's timeout
    assert torchrun.rendezvous_timeout_s(10) == 5


def test_ranks_combine_into_one_row() -> None:
    rank = {"window_s": 2.0, "window_samples": 40, "tokens_per_s": 640.0, "loss_finite": True, "nonfinite_losses": 0}
    ranks = [
        {**rank, "step_time_median_ms": 10.0, "torch_max_allocated_mb": 100.0, "host": "a", "samples_per_s": 20.0},
        {**rank, "window_s": 2.5, "step_time_median_ms": 12.0, "torch_max_allocated_mb": 80.0, "host": "b"},
    ]
    row = combine_ranks(ranks, "trainer")
    assert row["samples_per_s"] == 80 / 2.5 and row["window_s"] == 2.5 and row["slowest_rank"] == 1
    assert (row["torch_max_allocated_mb"], row["torch_max_allocated_sum_mb"]) == (100.0, 180.0)
    assert row["step_time_median_ms"] == 12.0 and "host" not in row and row["world_size"] == 2


RANK_LOSSES = st.fixed_dictionaries(
    {
        "final_loss": st.floats(allow_nan=True),
        "loss_finite": st.booleans(),
        "nonfinite_losses": st.integers(0, 1000),
    }
)


@given(ranks=st.lists(RANK_LOSSES, min_size=1, max_size=8))
def test_a_non_finite_loss_on_any_rank_makes_the_row_diverged_and_the_reason_names_it(
    ranks: list[dict[str, Any]],
) -> None:
    status, reason = loss_outcome(ranks)
    bad = {i for i, r in enumerate(ranks) if not r["loss_finite"] or r["nonfinite_losses"]}
    assert status == ("diverged" if bad else "ok") and bool(reason) == bool(bad)
    if len(ranks) > 1:
        named = [int(part.split(":")[0].removeprefix("rank ")) for part in reason.split("; rank ")] if bad else []
        assert sorted(named) == sorted(bad)
        counts = [ranks[i]["nonfinite_losses"] for i in named]
        assert counts == sorted(counts, reverse=True)  # the most first
    combined = combine_ranks([{**r, "window_s": 1.0} for r in ranks], "accelerate")
    assert combined["loss_finite"] == all(r["loss_finite"] for r in ranks)  # not rank 0's alone


def test_scaling_prefers_the_same_strategy_on_one_gpu() -> None:
    base = {"status": "ok", "batch_size": 4, "precision": "bf16", "engine": "accelerate"}
    rows_ = [
        {**base, "scenario": "single", "strategy": "none", "gpus": 1, "samples_per_s": 100.0},
        {**base, "scenario": "fsdp1", "strategy": "fsdp", "gpus": 1, "samples_per_s": 80.0},
        {**base, "scenario": "fsdp2", "strategy": "fsdp", "gpus": 2, "world_size": 2, "samples_per_s_per_gpu": 72.0},
        {**base, "scenario": "ddp2", "strategy": "ddp", "gpus": 2, "world_size": 2, "samples_per_s_per_gpu": 90.0},
    ]
    add_scaling(rows_)
    assert (rows_[2]["scaling_ref"], rows_[2]["scaling_efficiency"]) == ("fsdp1", 0.9)
    assert (rows_[3]["scaling_ref"], rows_[3]["scaling_efficiency"]) == ("single", 0.9)


def test_failure_names_the_root_cause_from_torchrun(tmp_path: Path) -> None:
    (tmp_path / "rank-0.json").write_text(json.dumps({"status": "running", "pid": 1}))
    (tmp_path / "rank-1.json").write_text(json.dumps({"status": "running", "pid": 2}))
    log = (
        "Root Cause (first observed failure):\n[0]:\n"
        "  rank      : 1 (local_rank: 1)\n  exitcode  : -9 (pid: 7)  (SIGKILL)\n"
    )
    status, reason = torchrun.failure(tmp_path, scenario(), ProcResult(1, 5.0), log_text=log) or ("", "")
    assert status == "crashed" and reason.startswith("rank 1 died (exit code -9 (SIGKILL))") and "rank 0 gave" in reason


def test_failure_puts_the_rank_that_raised_first(tmp_path: Path) -> None:
    waited = "RuntimeError: [gloo/transport/tcp/pair.cc:553] Connection closed by peer"
    (tmp_path / "rank-0.json").write_text(json.dumps({"status": "error", "reason": waited, "pid": 1}))
    raised = 'RuntimeError: injected failure (inject_fault = "raise")'
    (tmp_path / "rank-1.json").write_text(json.dumps({"status": "error", "reason": raised, "pid": 2}))
    status, reason = torchrun.failure(tmp_path, scenario(), ProcResult(1, 5.0)) or ("", "")
    assert status == "error"
    assert reason == f"rank 1: error: {raised}; rank 0 failed waiting for it in a collective"


def test_failure_when_torchrun_is_killed_names_its_signal(tmp_path: Path) -> None:
    for rank in (0, 1):
        (tmp_path / f"rank-{rank}.json").write_text(json.dumps({"status": "running", "pid": 1}))
    status, reason = torchrun.failure(tmp_path, scenario(), ProcResult(-9, 5.0)) or ("", "")
    assert (status, reason) == ("crashed", "ranks 0, 1 gave no result (torchrun was killed by signal SIGKILL)")
    for stale in tmp_path.glob("rank-*.json"):
        stale.unlink()
    told = torchrun.failure(tmp_path, scenario(), ProcResult(-9, 5.0))
    assert told == ("crashed", "torchrun was killed by signal SIGKILL before starting any rank")
    (tmp_path / "rank-0.json").write_text(json.dumps({"status": "running", "pid": 1}))
    told = torchrun.failure(tmp_path, scenario(), ProcResult(None, 40.0, timed_out=True))
    assert told == ("timeout", "rank 0 never finished (hung); rank 1 did not start (no rank file)")


def test_failure_on_one_node_speaks_of_its_own_ranks(tmp_path: Path) -> None:
    """Node 1 of 2 (ranks 2, 3) sees its own rank files only: ranks 0, 1 are neither hung nor
    silent here, and ranks that failed alike are one part."""
    sc = scenario(nnodes=2, node_rank=1, rdzv_endpoint="10.0.0.1:29500")
    waited = "DistBackendError: [gloo] Timed out waiting 20000ms for recv operation to complete"
    for rank in (2, 3):
        (tmp_path / f"rank-{rank}.json").write_text(json.dumps({"status": "error", "reason": waited, "pid": 1}))
    status, reason = torchrun.failure(tmp_path, sc, ProcResult(1, 5.0)) or ("", "")
    assert reason == "ranks 2, 3 failed waiting for a rank on another node (that node's row says why) in a collective"
    one = tmp_path / "one-node"  # no other node to wait for
    one.mkdir()
    (one / "rank-0.json").write_text(json.dumps({"status": "ok", "reason": "", "pid": 1}))
    (one / "rank-1.json").write_text(json.dumps({"status": "error", "reason": waited, "pid": 2}))
    assert torchrun.failure(one, scenario(), ProcResult(1, 5.0)) == ("crashed", "rank 1 failed waiting in a collective")
    differ = "NodesDiffer: the nodes run different scenario settings: timeout_s = 40 on node 0, 60 on node 1"
    for rank in (2, 3):
        (tmp_path / f"rank-{rank}.json").write_text(json.dumps({"status": "error", "reason": differ, "pid": 1}))
    assert torchrun.failure(tmp_path, sc, ProcResult(1, 5.0)) == ("error", f"ranks 2, 3: error: {differ}")


def test_model_states_shard_as_the_zero_paper_says() -> None:
    """Per-GPU weights + gradients + optimizer state of bert-large (fp32 Adam: 16 bytes a parameter)."""
    dims = load_dims("bert-large")

    def states(**s: Any) -> float:
        p = predict(scenario(model="bert-large", precision="bf16", **s), dims)
        return (p.weights + p.grads + p.optimizer) / (p.params * 1.0)

    one = predict(scenario(model="bert-large", strategy="none", gpus=1), dims)
    assert (one.weights + one.grads + one.optimizer) / one.params == pytest.approx(16, rel=0.01)
    assert states(strategy="fsdp", gpus=2) == pytest.approx(8, rel=0.01)
    assert states(strategy="fsdp", gpus=4) == pytest.approx(4, rel=0.01)
    assert states(strategy="deepspeed", zero_stage=1, gpus=2) == pytest.approx(2 + 2 + 12 / 2, rel=0.01)
    assert states(strategy="deepspeed", zero_stage=2, gpus=2) == pytest.approx(2 + 14 / 2, rel=0.01)
    assert states(strategy="deepspeed", zero_stage=3, gpus=2) == pytest.approx(20 / 2, rel=0.01)
    assert states(strategy="fsdp", offload="params") == 0
    ddp = predict(scenario(model="bert-large", precision="bf16"), dims)
    single = predict(scenario(model="bert-large", precision="bf16", strategy="none", gpus=1), dims)
    # the reducer's buckets, and the bucket in flight while gradients are reduced
    assert ddp.phases["backward"] - single.phases["backward"] == 2 * ddp.grads


@settings(max_examples=40, deadline=None)
@given(
    strategy=st.sampled_from(["none", "ddp", "fsdp"]),
    gpus=st.sampled_from(["all", 1, 2]),
    have=st.integers(min_value=0, max_value=4),
    device=st.sampled_from(["cpu", "cuda:0"]),
)
def test_spreading_over_one_gpu_is_a_skip_with_its_reason(strategy: str, gpus: Any, have: int, device: str) -> None:
    """gpus = "all" with a strategy is skipped on a host with one GPU (it would run its strategy in one
    process); an explicit number, no strategy, the CPU's gloo processes or 2+ GPUs run as asked."""
    from bench.run.plan import spread_skips

    if strategy == "none" and gpus != 1:
        return  # not a valid scenario
    sc = Scenario(name="s", strategy=strategy, gpus=gpus)
    uuids = tuple(f"GPU-{i}" for i in range(have))
    skips = spread_skips((sc,), device, uuids)
    expected = device != "cpu" and have < 2 and gpus == "all" and strategy != "none"
    assert ("s" in skips) == expected
    if expected:
        assert f'strategy = "{strategy}"' in skips["s"] and "--gpus 1" in skips["s"]


def test_a_skipped_plan_row_starts_no_worker(tmp_path: Path) -> None:
    """run_one returns the plan's skip as a skipped row, with the scenario's settings, and launches nothing."""
    from bench.run.plan import RunPlan
    from bench.run.runner import run_one

    sc = Scenario(name="spread", model="tiny", strategy="ddp", gpus=1)
    plan = RunPlan("m", (sc,), 1, "cuda:0", None, "tiny", tmp_path, 60.0, skips={"spread": "needs 2 GPUs"})
    row = run_one(plan, sc, 0, None, None, launcher=None)  # type: ignore[arg-type]
    assert (row["status"], row["error"], row["strategy"]) == ("skipped", "needs 2 GPUs", "ddp")
    assert plan.to_json()["skips"] == {"spread": "needs 2 GPUs"}
