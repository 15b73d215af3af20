"""`gpubench export --mlflow` and `run --mlflow`: each scenario an MLflow run whose params and
metrics are the stored settings and figures.

The server tests need a real MLflow tracking server: $GPUBENCH_TEST_MLFLOW_URI (.ci/run starts one
and sets it). Without it they are skipped with the reason, except under CI=true, where they fail:
CI must test against the real server."""

from __future__ import annotations

import os
import shutil
import statistics
import uuid
from pathlib import Path

import pytest
from harness import BASE, gpubench, write_matrix
from hypothesis import given
from hypothesis import strategies as st

from bench.export.mlflow import _of_scenario, redacted_uri, scenario_metrics, scenario_params
from bench.results import read_results

H200_RUN = Path(__file__).resolve().parent / "data" / "history" / "h200-full"  # a real H200 full run
URI_ENV = "GPUBENCH_TEST_MLFLOW_URI"


def server_uri() -> str:
    uri = os.environ.get(URI_ENV)
    if not uri:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must test MLflow against a real server: {URI_ENV} is unset (.ci/run starts one)")
        pytest.skip(f"no MLflow tracking server: set {URI_ENV} (e.g. http://127.0.0.1:5000)")
    return uri


def client(uri: str):  # noqa: ANN201 - mlflow's client type, imported lazily
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def runs_of(uri: str, experiment: str) -> dict[str, object]:
    c = client(uri)
    found = c.get_experiment_by_name(experiment)
    assert found is not None, f"no experiment {experiment}"
    return {r.data.tags["gpubench.scenario"]: r for r in c.search_runs([found.experiment_id], max_results=1000)}


@given(
    user=st.text(st.characters(codec="ascii", exclude_characters="@/:#?"), min_size=1, max_size=8),
    password=st.text(st.characters(codec="ascii", exclude_characters="@"), min_size=4, max_size=16),
    host=st.sampled_from(["h", "[::1", "h:port", "h:99999", "[", "h]:1", ""]),
    scheme=st.sampled_from(["http", "https", "databricks", ""]),
)
def test_a_password_in_a_tracking_uri_is_never_shown_whatever_is_malformed(
    user: str, password: str, host: str, scheme: str
) -> None:
    uri = f"{scheme}://{user}:{password}@{host}/x" if scheme else f"{user}:{password}@{host}"
    assert "***" in redacted_uri(uri)
    assert f":{password}@" not in redacted_uri(uri)


def test_settings_are_params_and_empty_settings_are_not_logged() -> None:
    params = scenario_params({"batch_size": 4, "engine": "torch", "seq_len": None, "optimizer": "", "compile": False})
    assert params == {"batch_size": "4", "engine": "torch", "compile": "False"}


def test_figures_of_ok_repeats_only_at_their_step_and_their_median() -> None:
    rows = [
        {"repeat": 0, "status": "ok", "samples_per_s": 10.0, "peak_mem_mb": 100.0},
        {"repeat": 1, "status": "ok", "samples_per_s": 14.0, "peak_mem_mb": float("nan")},
        {"repeat": 2, "status": "oom", "samples_per_s": 99.0, "peak_mem_mb": 999.0},
    ]
    metrics = {(name, step): value for name, value, step in scenario_metrics(rows)}
    assert metrics[("samples_per_s", 0)] == 10.0 and metrics[("samples_per_s", 1)] == 14.0
    assert ("samples_per_s", 2) not in metrics  # a failed repeat's figure is not a measurement
    assert metrics[("samples_per_s.median", 0)] == 12.0
    assert metrics[("peak_mem_mb.median", 0)] == 100.0  # the NaN is unmeasured, not a figure


@pytest.mark.parametrize(
    ("name", "scenario", "mine"),
    [("bf16-r0.log", "bf16", True), ("bf16-r12.trace.json", "bf16", True), ("bf16-x-r0.log", "bf16", False),
     ("bf16-r.log", "bf16", False), ("fp32-r0.log", "bf16", False)],
)  # fmt: skip
def test_a_scenarios_files_are_its_own(name: str, scenario: str, mine: bool) -> None:
    assert _of_scenario(name, scenario) is mine


def test_an_unreachable_server_is_refused_before_any_work_without_its_password(tmp_path: Path) -> None:
    matrix = write_matrix(tmp_path / "m.toml", {"baseline": {}})
    out = tmp_path / "out"
    done = gpubench(
        "run", "--matrix", matrix, "--out", out, "--mlflow", "http://me:s3cret-pw@127.0.0.1:9/", timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert "s3cret-pw" not in done.stderr + done.stdout
    assert "does not answer" in done.stderr and "nothing ran" in done.stderr
    assert not (out / "results.csv").exists()


def test_export_logs_each_scenario_with_the_stored_figures_and_skips_it_the_second_time(tmp_path: Path) -> None:
    uri = server_uri()
    experiment = f"test-export-{uuid.uuid4().hex[:8]}"
    run_dir = shutil.copytree(H200_RUN, tmp_path / "h200-full")
    done = gpubench("export", run_dir, "--mlflow", uri, "--experiment", experiment, timeout=180)
    assert done.returncode == 0, done.stderr
    frame = read_results(run_dir)
    runs = runs_of(uri, experiment)
    assert set(runs) == set(frame["scenario"])
    for scenario, group in frame.groupby("scenario"):
        data = runs[str(scenario)].data  # type: ignore[attr-defined]
        ok = group[group["status"] == "ok"]
        if len(ok):
            assert data.metrics["samples_per_s.median"] == pytest.approx(statistics.median(ok["samples_per_s"]))
        assert data.params["batch_size"] == str(group["batch_size"].iloc[0])
        assert data.tags["gpubench.gpu_model"] == "NVIDIA H200"
    artifacts = {f.path for f in client(uri).list_artifacts(runs[str(frame["scenario"].iloc[0])].info.run_id)}
    assert {"env.json", "results.csv"} <= artifacts
    again = gpubench("export", run_dir, "--mlflow", uri, "--experiment", experiment, timeout=180)
    assert again.returncode == 0 and f"0 logged, {len(runs)} already there" in again.stderr
    assert len(runs_of(uri, experiment)) == len(runs)


def test_run_with_mlflow_logs_the_run_it_just_made(tmp_path: Path) -> None:
    uri = server_uri()
    experiment = f"test-run-{uuid.uuid4().hex[:8]}"
    matrix = write_matrix(tmp_path / "m.toml", {"baseline": {}}, base={**BASE, "samples": 8})
    out = tmp_path / "out"
    done = gpubench(
        "run", "--matrix", matrix, "--out", out, "--mlflow", uri, "--mlflow-experiment", experiment, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert f"mlflow: 1 logged in experiment '{experiment}'" in done.stderr
    row = read_results(out).iloc[0]
    data = runs_of(uri, experiment)["baseline"].data  # type: ignore[attr-defined]
    assert data.metrics["samples_per_s"] == pytest.approx(row["samples_per_s"])
    assert data.params["model"] == "tiny" and data.tags["gpubench.status"] == "ok"
