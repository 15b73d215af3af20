"""The minimal results format (docs/results-format.md): a hand-written results.csv of only the
required columns works with `report`, `compare` and (with an env.json of host and created_at)
`history import`; a file short of them, or with a bad cell, is one BadInput naming what is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import gpubench_in_process
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.errors import BadInput
from bench.results import REQUIRED_COLUMNS, read_env, read_results
from bench.results.columns import RESULTS_FORMAT

MINIMAL = "scenario,repeat,status,samples_per_s,peak_mem_mb\nbase,0,ok,10.5,100\nfast,0,ok,12,90\nfast,1,oom,,\n"
FILE = settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)


def minimal_dir(tmp_path: Path, text: str = MINIMAL, env: dict[str, object] | None = None) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "results.csv").write_text(text, encoding="utf-8")
    if env is not None:
        (tmp_path / "env.json").write_text(json.dumps(env), encoding="utf-8")
    return tmp_path


def test_a_minimal_file_works_with_report_compare_and_history_import(tmp_path: Path) -> None:
    run = minimal_dir(tmp_path / "run")
    table = gpubench_in_process("report", run, "--format", "table")
    assert table.code == 0, table.err
    assert "base" in table.out and "fast" in table.out and "oom" in table.out
    assert gpubench_in_process("report", run, "--format", "markdown").code == 0  # once KeyError 'error'
    compared = gpubench_in_process("compare", run, run)
    assert compared.code == 0, compared.err
    db = f"sqlite:///{tmp_path / 'h.db'}"
    refused = gpubench_in_process("history", "import", run, "--db", db)
    assert refused.code == 2
    assert refused.err.strip().splitlines() == [
        f"gpubench: error: {run}: no env.json beside results.csv (the history needs env.json to know when, where "
        "and on what GPU the run was)"
    ]
    minimal_dir(run, env={"host": "lab-1", "created_at": "2026-01-02T03:04:05+00:00", "results_format": 1})
    imported = gpubench_in_process("history", "import", run, "--db", db)
    assert imported.code == 0, imported.err


@FILE
@given(dropped=st.sets(st.sampled_from(REQUIRED_COLUMNS), min_size=1))
def test_a_file_without_a_required_column_names_every_one_it_lacks(tmp_path: Path, dropped: set[str]) -> None:
    kept = [c for c in REQUIRED_COLUMNS if c not in dropped]
    rows = [dict(zip(REQUIRED_COLUMNS, ["base", "0", "ok", "10.5", "100"], strict=True))]
    text = ",".join(kept) + "\n" + "".join(",".join(r[c] for c in kept) + "\n" for r in rows)
    path = minimal_dir(tmp_path / "d") / "results.csv"
    path.write_text(text if kept else "x\n1\n", encoding="utf-8")
    with pytest.raises(BadInput) as err:
        read_results(path)
    missing = [c for c in REQUIRED_COLUMNS if c in dropped]
    assert str(err.value) == f"{path}: not a gpubench results file (missing columns: {', '.join(missing)})"


@FILE
@given(
    column=st.sampled_from(["repeat", "status", "samples_per_s", "peak_mem_mb"]),
    cell=st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters='\r\n",\x00'), max_size=12),
)
def test_a_bad_cell_is_a_bad_input_naming_its_line_or_reads_as_a_number(tmp_path: Path, column: str, cell: str) -> None:
    values = {"scenario": "base", "repeat": "0", "status": "ok", "samples_per_s": "10.5", "peak_mem_mb": "100"}
    values[column] = cell
    path = minimal_dir(tmp_path / "d") / "results.csv"
    path.write_text(",".join(values) + "\n" + ",".join(values.values()) + "\n", encoding="utf-8")
    try:
        frame = read_results(path)
    except BadInput as exc:
        assert str(exc).startswith(f"{path}: "), str(exc)
        assert "\n" not in str(exc)
        return
    row = frame.iloc[0]  # what was read is what a run could have written
    assert row["status"] in ("ok", "skipped", "oom", "timeout", "error", "crashed", "diverged", "interrupted")
    assert float(row["samples_per_s"]) > 0 and int(row["repeat"]) >= 0
    assert not float(row["peak_mem_mb"]) < 0


@FILE
@given(data=st.binary(max_size=200))
def test_any_bytes_are_read_or_refused_in_one_line(tmp_path: Path, data: bytes) -> None:
    path = minimal_dir(tmp_path / "d") / "results.csv"
    path.write_bytes(MINIMAL.encode()[:40] + data)
    try:
        read_results(path)
    except BadInput as exc:
        assert str(exc).startswith(f"{path}") and "\n" not in str(exc)


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (
            RESULTS_FORMAT + 1,
            f"results format {RESULTS_FORMAT + 1}, newer than this gpubench reads (up to 1) "
            "(upgrade gpubench to read it)",
        ),
        ("1", "results_format = '1' is not a format number (1, 2, ...)"),
    ],
)
def test_env_json_of_another_format_is_refused_by_name(tmp_path: Path, version: object, message: str) -> None:
    run = minimal_dir(tmp_path, env={"host": "h", "results_format": version})
    with pytest.raises(BadInput, match="results.format") as err:
        read_env(run)
    assert str(err.value) == f"{run / 'env.json'}: {message}"
    assert read_env(minimal_dir(tmp_path, env={"host": "h"})) == {"host": "h"}  # before it was recorded: 1
