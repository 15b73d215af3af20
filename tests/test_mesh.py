"""Device meshes (tensor parallel, HSDP) and the interconnect check: one `gpubench run` of two gloo
processes on the CPU trains llama-tiny with tp = 2 and with HSDP 2x1 (dp_replicate = 2), after the
interconnect check; everything else in process: the plan-time refusals (hypothesis over mesh
sizes, world sizes and the model's heads), a rank's place in the mesh, the counting of samples once
per data-parallel replica, the memory model's division, and the bus-bandwidth arithmetic. Context
parallelism runs on CUDA only (torch's context_parallel shards the CUDA SDPA kernels): its
refusals are tested here, its training on a GPU (tests/test_gpu.py's matrix)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness import BASE, error_lines, gpubench, gpubench_in_process, write_matrix
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.errors import BadInput
from bench.families.memory_model import load_dims, predict
from bench.fmt import fmt_num
from bench.planner.rules import check, needs_cuda
from bench.recipe import mesh
from bench.recipe.scenario import Scenario
from bench.report.html import interconnect_line
from bench.report.scaling_curves import scaling_lines
from bench.results import read_results
from bench.results.scaling import allreduce_busbw
from bench.worker.collectives import OPS, SIZES, bus_factor
from bench.worker.ranks import combine_ranks

MESH = {**BASE, "model": "llama-tiny", "engine": "accelerate", "gpus": 2, "strategy": "fsdp", "timeout_s": 90}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("mesh")
    matrix = write_matrix(tmp / "m.toml", {"tp2": {"tp": 2}, "hsdp": {"dp_replicate": 2}}, base=MESH)
    done = gpubench("run", "--matrix", matrix, "--device", "cpu", "--out", tmp / "out", timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp / "out"


def rows(out: Path) -> dict[str, dict[str, Any]]:
    return {r["scenario"]: r for r in read_results(out / "results.csv").to_dict("records")}


def test_tensor_parallel_and_hsdp_train_on_gloo_and_count_samples_per_replica(run: Path) -> None:
    got = rows(run)
    steps = MESH["samples"] // MESH["batch_size"] - MESH["warmup_steps"]
    for name, wrapper, replicas in (("tp2", "TP 2", 1), ("hsdp", "HSDP 2x1", 2)):
        row = got[name]
        assert (row["status"], row["world_size"], row["parallel_wrapper"]) == ("ok", 2, wrapper), row["error"]
        ranks = json.loads(row["rank_figures"])
        assert [r["counts_samples"] for r in ranks] == [True, replicas == 2]
        # both tp ranks train the same batches: the job's samples are one replica's
        assert row["window_samples"] == replicas * steps * MESH["batch_size"], name
        assert row["samples_per_s_per_gpu"] == pytest.approx(row["samples_per_s"] / 2)
    tp_losses = [r["final_loss"] for r in json.loads(got["tp2"]["rank_figures"])]
    # one model split in two, fed the same batches (the loader is sharded by replica, not by process)
    assert tp_losses[0] == pytest.approx(tp_losses[1], rel=1e-5)
    hsdp_losses = [r["final_loss"] for r in json.loads(got["hsdp"]["rank_figures"])]
    assert hsdp_losses[0] != hsdp_losses[1]  # two replicas, two shards of the data


def test_the_interconnect_check_is_in_env_json_and_the_report(run: Path) -> None:
    check = json.loads((run / "env.json").read_text())["interconnect"]
    assert list(check) == ["2"] and (check["2"]["world_size"], check["2"]["backend"]) == (2, "gloo")
    results = check["2"]["results"]
    assert [(r["op"], r["bytes"]) for r in results] == [(op, size) for op in OPS for size in SIZES["cpu"]]
    for r in results:
        assert r["algbw_gbps"] == pytest.approx(r["bytes"] / (r["time_us"] * 1e-6) / 1e9)
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * bus_factor(r["op"], 2))
    largest = max((r for r in results if r["op"] == "all_reduce"), key=lambda r: r["bytes"])
    assert allreduce_busbw({"interconnect": check}) == {2: largest["busbw_gbps"]}
    env = json.loads((run / "env.json").read_text())
    assert (
        interconnect_line(env)
        == f"2 processes: all-reduce {fmt_num(largest['busbw_gbps'], 3)} bus GB/s (gloo, largest message)"
    )
    assert interconnect_line({"interconnect": {"reason": "--skip-preflight"}}) == "not measured (--skip-preflight)"


def test_a_mesh_that_does_not_divide_the_world_is_exit_2_before_any_work(tmp_path: Path) -> None:
    matrix = write_matrix(tmp_path / "m.toml", {"tp": {"tp": 2, "dp_replicate": 2}}, base=MESH)
    done = gpubench_in_process("run", "--matrix", matrix, "--device", "cpu", "--out", tmp_path / "out")
    assert done.code == 2 and len(error_lines(done.err)) == 1, done.err
    assert "tp = 2 does not fit the job: dp_replicate x cp x tp = 2 x 1 x 2 = 4 does not divide" in done.err
    assert not (tmp_path / "out").exists()


# -- in process ------------------------------------------------------------------------------------
HEADS = {"llama-tiny": (4, 2, 352), "llama-1b": (32, 8, 8192)}  # attention heads, kv heads, intermediate


@settings(max_examples=80, deadline=None)
@given(
    model=st.sampled_from(sorted(HEADS)),
    gpus=st.integers(1, 16),
    tp=st.integers(1, 16),
    cp=st.integers(1, 4),
    replicate=st.integers(1, 8),
    shard=st.one_of(st.just("auto"), st.integers(1, 16)),
)
def test_a_mesh_is_valid_exactly_when_it_multiplies_to_the_world_and_tp_splits_the_heads(
    model: str, gpus: int, tp: int, cp: int, replicate: int, shard: int | str
) -> None:
    sizes = {"tp": tp, "cp": cp, "dp_replicate": replicate, "dp_shard": shard}
    rest = tp * cp * replicate
    fits = gpus % rest == 0 if shard == "auto" else rest * int(shard) == gpus
    splits = all(n % tp == 0 for n in HEADS[model])
    try:
        sc = check(
            Scenario(name="s", **{**MESH, "model": model, "gpus": gpus, "seq_len": 48, **sizes})
        )  # 2 x cp divides 48
    except BadInput as exc:
        assert not (fits and splits), str(exc)
        message = str(exc)
        assert message.count("\n") == 0 and "scenario 's': " in message
        if not fits:
            assert "does not fit the job" in message and f"{gpus}" in message
        else:
            assert message.startswith("scenario 's': tp = ") and "must divide the model's" in message
        return
    assert fits and splits
    m = mesh.resolve(vars(sc), gpus)
    assert m.size == gpus and (m.tp, m.cp, m.dp_replicate) == (tp, cp, replicate)


@pytest.mark.parametrize(
    ("settings_", "key", "words"),
    [
        ({"strategy": "ddp", "tp": 2}, "tp", 'needs strategy = "fsdp"'),
        ({"engine": "trainer", "dp_replicate": 2}, "dp_replicate", 'use engine = "accelerate"'),
        ({"tp": 2, "precision": "fp16"}, "precision", "is not wired through a device mesh"),
        ({"cp": 2, "seq_len": 30}, "cp", "seq_len = 30 must be a multiple of 4"),
        ({"cp": 2, "attn_implementation": "eager"}, "cp", "needs attn_implementation sdpa"),
        ({"model": "tiny", "tp": 2}, "tp", "needs a decoder whose config gives num_key_value_heads"),
        ({"dp_shard": 0}, "dp_shard", 'or "auto"'),
        ({"fsdp_sharding": "hybrid"}, "fsdp_sharding", "HSDP is dp_replicate = N"),
    ],
)
def test_what_a_mesh_cannot_take_is_refused_naming_the_setting(settings_: dict[str, Any], key: str, words: str) -> None:
    with pytest.raises(BadInput, match=rf"scenario 's': {key} = .*{words}"):
        check(Scenario(name="s", **{**MESH, "seq_len": 64, **settings_}))


def test_context_parallel_is_a_cuda_scenario() -> None:
    assert "CUDA SDPA" in (needs_cuda(check(Scenario(name="s", **{**MESH, "cp": 2}))) or "")
    assert needs_cuda(check(Scenario(name="s", **{**MESH, "tp": 2}))) is None


@given(shape=st.tuples(*(st.integers(1, 4) for _ in mesh.DIMS)))
def test_each_replica_counts_its_samples_once_in_torch_mesh_order(shape: tuple[int, int, int, int]) -> None:
    m = mesh.Mesh(*shape)
    counting = [r for r in range(m.size) if m.counts_samples(r)]
    assert len(counting) == m.dp and sorted(m.dp_rank(r) for r in counting) == list(range(m.dp))
    for r in range(m.size):  # row-major, as init_device_mesh lays ranks out (tp innermost)
        c = m.coords(r)
        flat = ((c["dp_replicate"] * m.dp_shard + c["dp_shard"]) * m.cp + c["cp"]) * m.tp + c["tp"]
        assert flat == r


def test_ranks_that_do_not_count_add_no_samples() -> None:
    rank = {"window_s": 2.0, "window_samples": 40, "tokens_per_s": 640.0, "loss_finite": True}
    row = combine_ranks([{**rank, "counts_samples": True}, {**rank, "counts_samples": False}], "accelerate")
    assert (row["window_samples"], row["samples_per_s"], row["tokens_per_s"]) == (40, 20.0, 640.0)
    assert row["samples_per_s_per_gpu"] == 10.0 and "counts_samples" not in row


def test_model_states_divide_by_the_shards_of_one_replica() -> None:
    """Per-GPU weights + gradients + optimizer state of llama-1b (16 bytes a parameter on one GPU)."""
    dims = load_dims("llama-1b")

    def per_param(**s: Any) -> float:
        p = predict(
            check(Scenario(name="s", **{**MESH, "model": "llama-1b", "precision": "bf16", "gpus": 4, **s})), dims
        )
        return (p.weights + p.grads + p.optimizer) / p.params

    assert per_param() == pytest.approx(4, rel=0.01)  # FSDP over 4
    assert per_param(tp=2) == pytest.approx(4, rel=0.01)  # tp 2 x dp_shard 2
    assert per_param(dp_replicate=2) == pytest.approx(8, rel=0.01)  # HSDP 2x2: one copy per replica
    assert per_param(tp=4) == pytest.approx(4, rel=0.01)
    one = predict(check(Scenario(name="s", **{**MESH, "model": "llama-1b", "precision": "bf16", "gpus": 4})), dims)
    tp4 = predict(
        check(Scenario(name="s", **{**MESH, "model": "llama-1b", "precision": "bf16", "gpus": 4, "tp": 4})), dims
    )
    assert tp4.activations < one.activations  # a layer's activations are split four ways; the head's are not


def test_bus_bandwidth_follows_nccl_tests() -> None:
    assert bus_factor("all_reduce", 8) == 2 * 7 / 8
    assert bus_factor("all_gather", 4) == bus_factor("reduce_scatter", 4) == 3 / 4
    env = {
        "interconnect": {
            "2": {
                "results": [
                    {"op": "all_reduce", "bytes": 1, "busbw_gbps": 1.0},
                    {"op": "all_reduce", "bytes": 9, "busbw_gbps": 5.0},
                ]
            },
            "4": {"reason": "the interconnect check failed (exit 1)"},
        }
    }
    assert allreduce_busbw(env) == {2: 5.0} and allreduce_busbw({"interconnect": {"reason": "--skip-preflight"}}) == {}
    base = {"status": "ok", "batch_size": 4, "engine": "accelerate", "strategy": "ddp"}
    lines = scaling_lines(
        [
            {**base, "scenario": "one", "gpus": 1, "samples_per_s": 10.0},
            {**base, "scenario": "two", "gpus": 2, "world_size": 2, "samples_per_s": 18.0},
        ],
        allreduce_busbw(env),
    )
    assert [(p.gpus, p.busbw_gbps) for p in lines[0].points] == [(1, None), (2, 5.0)]
