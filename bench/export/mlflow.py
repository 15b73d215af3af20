"""A result directory logged to an MLflow tracking server: one MLflow run per scenario.

Each scenario's settings are its params, each figure of each `ok` repeat a metric at step =
repeat (the column names carry their units: samples_per_s, peak_mem_mb, ...), the median over
its ok repeats `<figure>.median` (the figure the summary, compare and history show), and the
result directory's env.json, scenarios.json, results.csv, report.html and the scenario's logs,
losses and profiler traces as artifacts. Tags tie the MLflow run to the gpubench run (gpubench.run_key, the
history's identity) and the scenario, so exporting a directory again skips what is already there
and replaces a scenario whose rows changed (a --resume added repeats): the old MLflow run is
deleted (MLflow keeps deleted runs restorable).

The `mlflow` package (`pip install 'gpubench[mlflow]'`, mlflow-skinny is enough) is imported only
here. A URL's password never appears in a message (redacted_uri)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import BadInput, GpubenchError
from ..redact import HIDDEN, SCHEME, redact_url
from ..results import ENV_JSON, NUMERIC_COLUMNS, RESULTS_CSV, SCENARIOS_JSON, SETTING_COLUMNS
from ..results.identity import content_sha256

DEFAULT_EXPERIMENT = "gpubench"
REPORT_HTML = "report.html"
RUN_FILES = (ENV_JSON, SCENARIOS_JSON, RESULTS_CSV, REPORT_HTML)
SCENARIO_FOLDERS = ("logs", "losses")  # per-scenario files (logs, traces, loss curves): <scenario>-r<N>...
BATCH = 500  # metrics per log_batch call (MLflow's limit is 1000)
PARAM_BATCH = 100  # MLflow's limit of params per log_batch call
PARAM_MAX = 6000  # MLflow's limit on a param value's length


class TrackingError(GpubenchError):
    """The tracking server refused or could not be reached."""


@dataclass(frozen=True)
class Exported:
    scenario: str
    run_id: str
    action: str  # "logged", "replaced" or "unchanged"


def redacted_uri(uri: str) -> str:
    """The URI with its password hidden (bench/redact.py); one without a scheme that holds an '@'
    shows only what follows it."""
    if SCHEME.search(uri) is None and "@" in uri:
        return f"{HIDDEN}@{uri.rsplit('@', 1)[1]}"
    return redact_url(uri)


def _client(uri: str) -> Any:
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise BadInput(
            "--mlflow needs the mlflow package, which is not installed",
            hint="pip install 'gpubench[mlflow]' (mlflow-skinny is enough for logging)",
        ) from None
    return MlflowClient(tracking_uri=uri)


def check_tracking(uri: str, timeout_s: float = 10.0) -> None:
    """Before any work: the mlflow package imports and an http(s) server answers its /health.
    BadInput (exit 2) otherwise, the URI shown without its password."""
    shown = redacted_uri(uri)
    if not uri.strip() or any(ord(ch) < 32 or ord(ch) == 127 for ch in uri):
        raise BadInput(f"--mlflow {shown!r}: not a tracking URI", hint="give one like http://127.0.0.1:5000")
    _client(uri)
    scheme = urllib.parse.urlsplit(uri).scheme if "://" in uri else ""
    if scheme not in ("http", "https"):
        return  # file:, sqlite:, databricks: the client itself says what is wrong when it logs
    health = uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(_plain_request(health), timeout=timeout_s) as answer:  # noqa: S310 - http(s) only
            answer.read(64)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        why = getattr(exc, "reason", None) or exc
        raise BadInput(
            f"--mlflow {shown}: the tracking server does not answer ({why})",
            hint="start it (mlflow server --host 127.0.0.1 --port 5000) or check the URI; nothing ran",
        ) from None


def _plain_request(url: str) -> urllib.request.Request:
    """A GET without the URL's userinfo (urllib refuses it); the password goes as basic auth."""
    parts = urllib.parse.urlsplit(url)
    host = f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname or ""
    request = urllib.request.Request(urllib.parse.urlunsplit(parts._replace(netloc=host)))
    if parts.username:
        token = base64.b64encode(f"{parts.username}:{parts.password or ''}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    return request


@contextlib.contextmanager
def _few_retries() -> Iterator[None]:
    """MLflow's client retries a failing request for minutes by default; an export gives up sooner
    (the user's own settings of these variables win)."""
    saved = {k: os.environ.get(k) for k in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT")}
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def export_dir(
    result_dir: Path, uri: str, experiment: str = DEFAULT_EXPERIMENT, info: Callable[[str], None] = lambda _m: None
) -> list[Exported]:
    """Log every scenario of RESULT_DIR as an MLflow run in EXPERIMENT; TrackingError on a refusal."""
    from ..history.ingest import read_result_dir  # the history's identity of a run, and its env checks

    record = read_result_dir(result_dir)  # BadInput: no env.json, a bad results.csv
    folder = Path(record.run["source"])
    client = _client(uri)
    try:
        with _few_retries():
            experiment_id = _experiment(client, experiment)
            done = []
            for result in record.results:  # one per scenario, its rows as results.csv holds them
                scenario = str(result.values["scenario"])
                rows = [json.loads(r["row_json"]) for r in result.repeats]
                done.append(_export_scenario(client, experiment_id, folder, record.run, scenario, rows))
                info(f"mlflow: {done[-1].action} {scenario} as run {done[-1].run_id}")
            return done
    except GpubenchError:
        raise
    except Exception as exc:  # noqa: BLE001 - the client raises many kinds; each is one line here
        raise TrackingError(
            f"--mlflow {redacted_uri(uri)}: {_first_line(exc)}",
            hint=f"the results are in {folder}; log them later with `gpubench export {folder} --mlflow URI`",
        ) from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__


def _experiment(client: Any, name: str) -> str:
    found = client.get_experiment_by_name(name)
    if found is not None:
        if getattr(found, "lifecycle_stage", "active") == "deleted":
            raise TrackingError(f"MLflow experiment {name!r} is deleted", hint="restore it or pass --experiment")
        return str(found.experiment_id)
    return str(client.create_experiment(name))


def _export_scenario(
    client: Any, experiment_id: str, folder: Path, run: dict[str, Any], scenario: str, rows: list[dict[str, Any]]
) -> Exported:
    from mlflow.entities import Metric, Param

    digest = content_sha256(rows)
    query = f"tags.`gpubench.run_key` = '{run['run_key']}' and tags.`gpubench.scenario` = '{_quoted(scenario)}'"
    earlier = client.search_runs([experiment_id], filter_string=query, max_results=10)
    same = next((r for r in earlier if r.data.tags.get("gpubench.content_sha256") == digest), None)
    if same is not None:
        return Exported(scenario, same.info.run_id, "unchanged")
    tags = scenario_tags(run, scenario, rows, digest)
    created = client.create_run(experiment_id, run_name=scenario, tags=tags)
    run_id = created.info.run_id
    params = [Param(k, v) for k, v in scenario_params(rows[0]).items()]
    for start in range(0, len(params), PARAM_BATCH):
        client.log_batch(run_id, params=params[start : start + PARAM_BATCH])
    metrics = [Metric(k, v, 0, step) for k, v, step in scenario_metrics(rows)]
    for start in range(0, len(metrics), BATCH):
        client.log_batch(run_id, metrics=metrics[start : start + BATCH])
    for path, artifact_dir in scenario_files(folder, scenario):
        client.log_artifact(run_id, str(path), artifact_dir)
    client.set_terminated(run_id, "FINISHED" if tags["gpubench.status"] in ("ok", "skipped") else "FAILED")
    for old in earlier:
        client.delete_run(old.info.run_id)
    return Exported(scenario, run_id, "replaced" if earlier else "logged")


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


def scenario_tags(run: dict[str, Any], scenario: str, rows: list[dict[str, Any]], digest: str) -> dict[str, str]:
    """The MLflow run's tags: what ties it to gpubench's run and scenario, and where it ran."""
    import pandas as pd

    from ..results import scenario_status

    tags = {
        "gpubench.run_key": str(run["run_key"]),
        "gpubench.scenario": scenario,
        "gpubench.content_sha256": digest,
        "gpubench.status": scenario_status(pd.DataFrame(rows)),
        "gpubench.repeats": str(len(rows)),
        "gpubench.ok_repeats": str(sum(r.get("status") == "ok" for r in rows)),
        "mlflow.source.name": "gpubench",
    }
    for key in (
        "gpu_model",
        "gpu_count",
        "host",
        "matrix",
        "gpubench",
        "torch",
        "transformers",
        "git_commit",
        "device",
    ):
        if run.get(key) not in (None, ""):
            tags[f"gpubench.{key}"] = str(run[key])
    if run.get("command"):
        tags["mlflow.note.content"] = f"gpubench run: `{run['command']}`"
    return tags


def scenario_params(row: dict[str, Any]) -> dict[str, str]:
    """The scenario's settings as MLflow params: only the settings the row holds (an empty cell is
    not logged: a row holds only what ran)."""
    params = {}
    for key in SETTING_COLUMNS:
        value = row.get(key)
        if value is None or value == "" or (isinstance(value, float) and value != value):
            continue
        text = json.dumps(value) if isinstance(value, list | dict) else str(value)
        params[key] = text if len(text) <= PARAM_MAX else text[: PARAM_MAX - 45] + f"... (sha256 {_sha(text)[:16]})"
    return params


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


FIGURE_COLUMNS = [c for c in NUMERIC_COLUMNS if c not in SETTING_COLUMNS and c != "repeat"]


def scenario_metrics(rows: list[dict[str, Any]]) -> list[tuple[str, float, int]]:
    """(name, value, step): each finite figure of each ok repeat at step = repeat, and its median
    over the ok repeats as `<figure>.median` (step 0). A figure no ok repeat measured is absent."""
    import statistics

    from ..history.ingest import number

    ok = [r for r in rows if r.get("status") == "ok"]
    metrics: list[tuple[str, float, int]] = []
    for column in FIGURE_COLUMNS:
        values = [(int(r["repeat"]), number(r.get(column))) for r in ok]
        finite = [(step, v) for step, v in values if v is not None]
        metrics += [(column, v, step) for step, v in finite]
        if finite:
            metrics.append((f"{column}.median", float(statistics.median(v for _, v in finite)), 0))
    return metrics


def scenario_files(folder: Path, scenario: str) -> list[tuple[Path, str | None]]:
    """The run's files (at the artifact root) and this scenario's own files under their folder."""
    files: list[tuple[Path, str | None]] = [(folder / name, None) for name in RUN_FILES if (folder / name).is_file()]
    for sub in SCENARIO_FOLDERS:
        base = folder / sub
        if not base.is_dir():
            continue
        for path in sorted(base.iterdir()):
            if path.is_file() and _of_scenario(path.name, scenario):
                files.append((path, sub))
    return files


def _of_scenario(name: str, scenario: str) -> bool:
    """logs/<scenario>-r0.log, losses/<scenario>-r1.json, traces/<scenario>-r0...: the scenario's."""
    if not name.startswith(f"{scenario}-r"):
        return False
    rest = name[len(scenario) + 2 :]
    digits = len(rest) - len(rest.lstrip("0123456789"))
    return digits > 0


def export_after_run(
    uri: str, experiment: str, out: Path, *, unfinished: bool, warn: Callable[[str], None], info: Callable[[str], None]
) -> None:
    """`gpubench run --mlflow URI`: log the run that just ended. Never raises: the results are on
    disk whatever happens here, and the run's exit code is not this function's to change."""
    again = f"gpubench export {out} --mlflow URI"
    if unfinished:
        warn(f"the run did not finish, so it is not logged to MLflow; finish it with `gpubench run --resume {out}`")
        return
    try:
        done = export_dir(out, uri, experiment)
    except GpubenchError as exc:
        warn(f"the run was not logged to MLflow ({exc}); its results are in {out}: log them later with `{again}`")
        return
    actions = {a: sum(e.action == a for e in done) for a in ("logged", "replaced", "unchanged")}
    said = ", ".join(f"{n} {a}" for a, n in actions.items() if n)
    info(f"mlflow: {said} in experiment {experiment!r} at {redacted_uri(uri)}")
