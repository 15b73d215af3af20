"""A --resume reuses the matmul ceiling an earlier command of its run measured on the same GPU,
driver and torch for the same shapes (bench/run/probe.earlier_ceiling), and measures it again
otherwise; env.json's resume entry says which it did (bench/results/resultdir.write_plan)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.results import write_plan
from bench.run.probe import earlier_ceiling

SHAPE = (2048, 1024, 4096)
CEILING = {
    "formats": {"bf16": {"tflops": 784.4}, "fp32": {"tflops": 51.2}},
    "shapes": ["4096x4096x4096", "8192x8192x8192", "2048x1024x4096"],
}


def env(uuid: str = "GPU-a", driver: str = "580.159", torch: str = "2.11.0", **more: Any) -> dict[str, Any]:
    return {
        "created_at": "2026-12-06T09:00:00+00:00",
        "gpu": {"uuid": uuid, "driver": driver},
        "packages": {"torch": torch},
        **more,
    }


def test_the_same_gpu_driver_torch_and_shapes_reuse_the_first_commands_ceiling() -> None:
    got = earlier_ceiling(env(matmul_ceiling=CEILING), env(), [SHAPE])
    assert got == {**CEILING, "reused_from": "2026-12-06T09:00:00+00:00"}


@given(
    field=st.sampled_from(["uuid", "driver", "torch"]),
    other=st.text(min_size=1, max_size=8).filter(lambda t: t not in ("GPU-a", "580.159", "2.11.0")),
)
def test_another_gpu_driver_or_torch_measures_again(field: str, other: str) -> None:
    assert earlier_ceiling(env(matmul_ceiling=CEILING), env(**{field: other}), [SHAPE]) is None


@given(
    ceiling=st.one_of(
        st.none(),
        st.just({"reason": "the ceiling probe failed (exit 1): ..."}),
        st.just({"formats": {}}),
        st.just({"reused_from": "2026-12-06T09:00:00+00:00"}),
        st.just({**CEILING, "shapes": ["4096x4096x4096"]}),  # a shape this run needs was not timed
    )
)
def test_no_measured_ceiling_for_these_shapes_measures_again(ceiling: dict[str, Any] | None) -> None:
    assert earlier_ceiling(env(matmul_ceiling=ceiling), env(), [SHAPE]) is None


def test_the_latest_command_on_this_gpu_is_the_one_reused() -> None:
    other = {**CEILING, "formats": {"bf16": {"tflops": 700.0}}}
    mine_later = {**CEILING, "formats": {"bf16": {"tflops": 790.0}}}
    first = env(
        uuid="GPU-b",
        matmul_ceiling=other,
        resumes=[
            {"created_at": "t1", "gpu_uuid": "GPU-a", "driver": "580.159", "packages": {"torch": "2.11.0"},
             "matmul_ceiling": mine_later},
            {"created_at": "t2", "gpu_uuid": "GPU-c", "driver": "580.159", "packages": {"torch": "2.11.0"},
             "matmul_ceiling": CEILING},
            {"created_at": "t3", "gpu_uuid": "GPU-a", "driver": "580.159", "packages": {"torch": "2.11.0"},
             "matmul_ceiling": {"reused_from": "t1"}},
        ],
    )  # fmt: skip
    assert earlier_ceiling(first, env(), [SHAPE]) == {**mine_later, "reused_from": "t1"}
    assert earlier_ceiling(first, env(uuid="GPU-b"), [SHAPE]) == {**other, "reused_from": first["created_at"]}
    assert earlier_ceiling(None, env(), [SHAPE]) is None


def test_a_resume_entry_names_the_command_whose_ceiling_it_reused_and_keeps_one_it_measured(tmp_path: Path) -> None:
    write_plan(tmp_path, {"scenarios": []}, env(matmul_ceiling=CEILING), resumed=False)
    write_plan(tmp_path, {"scenarios": []}, env(matmul_ceiling={**CEILING, "reused_from": "t0"}), resumed=True)
    write_plan(tmp_path, {"scenarios": []}, env(uuid="GPU-z", matmul_ceiling=CEILING), resumed=True)
    written = json.loads((tmp_path / "env.json").read_text())
    assert written["matmul_ceiling"] == CEILING  # the first command's, as measured
    assert [r["matmul_ceiling"] for r in written["resumes"]] == [{"reused_from": "t0"}, CEILING]


def test_a_resume_on_the_same_gpu_does_not_measure_again_and_another_gpu_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """session.matmul_ceiling, as a GPU run's parent calls it: the run's env.json read back, the
    plan's own GEMM shapes; the probe child (monkeypatched) runs only where nothing can be reused."""
    from bench.recipe.scenario import Scenario
    from bench.run import session

    measured: list[str] = []

    def measure(device: str, shapes: list[tuple[int, int, int]], scratch: Path) -> dict[str, Any]:
        measured.append(device)
        return {"formats": {"bf16": {"tflops": 1.0}}, "shapes": ["x".join(map(str, s)) for s in shapes]}

    monkeypatch.setattr(session, "measure_ceiling", measure)
    plan = SimpleNamespace(
        scenarios=[Scenario(name="s", model="tiny", batch_size=4, seq_len=128)], out=tmp_path, device="cuda:0"
    )
    first = session.matmul_ceiling(replace_ns(plan, resume=False), env())
    assert measured == ["cuda:0"] and first["shapes"] == ["512x128x512"]
    write_plan(tmp_path, {"scenarios": []}, env(matmul_ceiling=first), resumed=False)
    again = session.matmul_ceiling(replace_ns(plan, resume=True), env())
    assert measured == ["cuda:0"] and again == {**first, "reused_from": "2026-12-06T09:00:00+00:00"}
    session.matmul_ceiling(replace_ns(plan, resume=True), env(uuid="GPU-other"))
    assert measured == ["cuda:0", "cuda:0"]


def replace_ns(ns: SimpleNamespace, **changes: Any) -> SimpleNamespace:
    return SimpleNamespace(**{**vars(ns), **changes})
