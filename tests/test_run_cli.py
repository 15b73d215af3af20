"""`gpubench run`, `list` and `env` as users meet them: help, listings, and bad input caught before
any scenario runs (exit 2, one line, no traceback)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from harness import BASE, error_lines, gpubench, gpubench_in_process, write_matrix
from typer.testing import CliRunner

from bench import cpus
from bench.cli import app as gpubench_app
from bench.cli import run_cmd
from bench.errors import BadInput
from bench.planner.matrix import load_matrix
from bench.run import session

runner = CliRunner()


def local_app() -> typer.Typer:
    app = typer.Typer()
    run_cmd.register(app)
    return app


def command_names() -> list[str]:
    return [c.name or (c.callback.__name__ if c.callback else "") for c in gpubench_app.registered_commands]


def test_the_app_has_the_run_list_and_env_commands() -> None:
    assert {"run", "list", "env"} <= set(command_names())
    result = runner.invoke(gpubench_app, ["--help"])
    assert result.exit_code == 0
    for name in command_names():
        assert name in result.output


@pytest.mark.parametrize("name", command_names())
def test_every_command_has_help_with_an_example(name: str) -> None:
    (command,) = [c for c in gpubench_app.registered_commands if (c.name or c.callback.__name__) == name]
    doc = command.callback.__doc__ or ""
    summary = doc.strip().splitlines()[0]
    assert summary.endswith(".") and len(summary) < 100, f"{name}: one-line summary"
    assert f"gpubench {name}" in doc.split("Example", 1)[-1], f"{name}: an example in its docstring"
    result = runner.invoke(gpubench_app, [name, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert summary in result.output and "Example" in result.output


def test_list_full_shows_the_13_scenarios_and_what_each_changes() -> None:
    result = runner.invoke(local_app(), ["list", "--matrix", "full"], terminal_width=200)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    names = [line.split()[0] for line in lines]
    assert names == load_matrix("full").names() and len(names) == 13
    by_name = {line.split()[0]: line for line in lines}
    expected = {
        "baseline": "(the reference: baseline)",
        "grad-accum": "batch_size=1, grad_accum_steps=4",
        "grad-ckpt": "batch_size=1, grad_accum_steps=4, grad_checkpointing=True",
        "fp16": "precision=fp16",
        "bf16": "precision=bf16",
        "tf32": "tf32=True",
        "adafactor": "optimizer=adafactor",
        "adam-8bit": "optimizer=adamw_8bit",
        "workers": "dataloader_workers=4, pin_memory=True",
        "compile": "compile=True",
        "combo-fp16": "batch_size=1, grad_accum_steps=4, grad_checkpointing=True, precision=fp16",
        "combo-adafactor": "grad_checkpointing=True, precision=fp16, optimizer=adafactor",
        "combo-8bit": "grad_checkpointing=True, precision=fp16, optimizer=adamw_8bit",
    }
    for name, change in expected.items():
        assert change in by_name[name], by_name[name]
    assert by_name["grad-accum"].rstrip().endswith("batch 1, gradient accumulation 4")  # the description


def test_list_a_matrix_file_and_reject_an_unknown_model(tmp_path: Path) -> None:
    path = write_matrix(tmp_path / "m.toml", {"baseline": {}, "small": {"batch_size": 2}})
    result = runner.invoke(local_app(), ["list", "--matrix", str(path)])
    assert result.exit_code == 0
    assert [line.split()[:2] for line in result.output.splitlines()] == [
        ["baseline", "(the"],
        ["small", "batch_size=2"],
    ]
    result = runner.invoke(local_app(), ["list", "--matrix", str(path), "--model", "bert-larg"])
    assert isinstance(result.exception, BadInput)
    assert str(result.exception) == (
        "unknown model 'bert-larg': not a preset, a local directory or config file, or a hub id (org/name) "
        "(did you mean 'bert-large'?)"
    )


def test_env_reports_the_cpu_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    real, probes = session.probe_torch, []

    def probe_once(scratch: Path) -> dict[str, Any]:
        """What torch says, asked in a child once (~2.5 s of CPU); the other formats reuse it."""
        if not probes:
            probes.append(real(scratch))
        return probes[0]

    monkeypatch.setattr(session, "probe_torch", probe_once)
    result = runner.invoke(local_app(), ["env", "--device", "cpu", "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["device"] == "cpu" and info["gpu"] is None
    assert info["torch_build"].split("+")[0] == info["packages"]["torch"].split("+")[0]  # the one the worker imports
    assert info["cpu_speed"]["passes"] >= 4 and info["cpu_speed"]["p90_over_p10"] >= 1.0
    assert {"created_at", "host", "python", "cpu", "cpu_count", "cuda_runtime", "git"} <= set(info)
    assert runner.invoke(local_app(), ["env", "--device", "cpu", "--format", "json"]).output.startswith("{")
    text = runner.invoke(local_app(), ["env", "--device", "cpu"])
    assert text.exit_code == 0
    assert text.output.splitlines()[0].split() == ["device", "cpu"]
    assert any(line.split()[:2] == ["gpu", "none"] for line in text.output.splitlines())
    speed = next(line for line in text.output.splitlines() if line.startswith("cpu speed"))
    assert "per fixed Python loop" in speed and speed.endswith(("steady", "will be noisy"))


# -- bad input: exit 2, one line, nothing run -----------------------------------------------------
# In this process (bench.cli.main, as the console script calls it); test_unknown_matrix_scenario_and_model
# and test_debug_shows_the_traceback run the real `python -m bench` too.


@pytest.fixture(autouse=True)
def no_worker_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that got past its checks would start workers: here that is a failure."""

    def execute(*args: object, **kwargs: object) -> None:
        raise AssertionError("the run went past its checks")

    monkeypatch.setattr(session, "execute", execute)


def assert_bad_input(args: list[str], *parts: str, out: Path | None = None) -> str:
    done = gpubench_in_process("run", *args)
    lines = error_lines(done.err)
    assert done.code == 2, done.err
    assert len(lines) == 1, done.err
    assert lines[0].startswith("gpubench: error: ")
    assert "Traceback" not in done.err and done.out == ""
    for part in parts:
        assert part in lines[0]
    if out is not None:
        assert not (out / "results.csv").exists()
    return lines[0]


@pytest.fixture
def matrix(tmp_path: Path) -> Path:
    return write_matrix(tmp_path / "m.toml", {"baseline": {}, "fp16": {"precision": "fp16"}})


def test_unknown_matrix_scenario_and_model(tmp_path: Path, matrix: Path) -> None:
    out = tmp_path / "out"
    line = assert_bad_input(["--matrix", "quik", "--out", str(out)], "unknown matrix 'quik' (did you mean 'quick'?)")
    real = gpubench("run", "--matrix", "quik", "--out", out, timeout=120)  # the console script: the same
    assert (real.returncode, error_lines(real.stderr), real.stdout) == (2, [line], "")
    assert_bad_input(
        ["--matrix", str(matrix), "--only", "baselin,fp16", "--out", str(out)],
        f"--only: no scenario 'baselin' in {matrix} (did you mean 'baseline'?)",
        out=out,
    )
    assert_bad_input(
        ["--matrix", str(matrix), "--model", "bert-larg", "--out", str(out)],
        "unknown model 'bert-larg': not a preset, a local directory or config file, or a hub id (org/name)",
        "(did you mean 'bert-large'?)",
        out=out,
    )
    assert not out.exists()  # refused before anything was created


def test_model_directory_without_config_or_safetensors(tmp_path: Path, matrix: Path) -> None:
    empty = tmp_path / "ckpt"
    empty.mkdir()
    assert_bad_input(["--matrix", str(matrix), "--model", str(empty)], f"model directory {empty} has no config.json")
    (empty / "config.json").write_text("{}")
    (empty / "pytorch_model.bin").write_bytes(b"pickle")
    assert_bad_input(
        ["--matrix", str(matrix), "--model", str(empty)],
        f"model directory {empty.resolve()} has weights only as pickle files (.bin/.pt), which gpubench never loads",
        "safe_serialization=True",
    )


@pytest.mark.parametrize(
    ("scenario", "parts"),
    [
        ({"batchsize": 8}, ["[scenarios.bad]: unknown key 'batchsize' (did you mean 'batch_size'?)"]),
        ({"batch_size": 0}, ["scenario 'bad': batch_size = 0 must be a whole number of at least 1"]),
        ({"precision": "bfloat16"}, ["scenario 'bad': precision = 'bfloat16'", "did you mean 'bf16'?"]),
        ({"optimizer": "adam"}, ["scenario 'bad': optimizer = 'adam'", "did you mean 'adamw'?"]),
        ({"fp16": True, "bf16": True}, ["[scenarios.bad]: fp16 and bf16 are both true"]),
    ],
)
def test_bad_matrix_values(tmp_path: Path, scenario: dict, parts: list[str]) -> None:
    path = write_matrix(tmp_path / "m.toml", {"good": {}, "bad": scenario})
    out = tmp_path / "out"
    line = assert_bad_input(["--matrix", str(path), "--out", str(out)], *parts, out=out)
    assert line.startswith(f"gpubench: error: {path}: ")


def test_toml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text('[base]\nmodel = "tiny"\n[scenarios.a]\nbatch_size = = 4\n')
    assert_bad_input(["--matrix", str(path)], f"{path}: not valid TOML", "line 4")


def test_bad_command_line_values(tmp_path: Path, matrix: Path) -> None:
    out = tmp_path / "out"
    assert_bad_input(
        ["--matrix", str(matrix), "--samples", "0", "--out", str(out)],
        "scenario 'baseline': samples = 0 must be a whole number of at least 1",
        out=out,
    )
    assert_bad_input(
        ["--matrix", str(matrix), "--warmup-steps", "4", "--out", str(out)],
        "warmup_steps = 4 leaves no timed steps",
        out=out,
    )
    assert_bad_input(["--matrix", str(matrix), "--repeats", "0"], "--repeats 0 must be a whole number of at least 1")
    assert_bad_input(["--matrix", str(matrix), "--timeout", "0"], "--timeout 0.0 must be a positive number")
    assert_bad_input(
        ["--matrix", str(matrix), "--engine", "deepspeed"], "engine = 'deepspeed' is not one of trainer, accelerate"
    )


def test_device_that_is_not_there(tmp_path: Path, matrix: Path) -> None:
    out = tmp_path / "out"
    assert_bad_input(
        ["--matrix", str(matrix), "--device", "cuda", "--out", str(out)],
        "--device cuda: torch sees no CUDA GPU on this machine (use --device cpu or auto)",
        out=out,
    )
    assert_bad_input(
        ["--matrix", str(matrix), "--device", "gpu", "--out", str(out)],
        "--device 'gpu' is not one of auto, cpu, cuda, cuda:N",
        out=out,
    )
    assert not out.exists()  # no empty result directory left behind


def test_output_directory_that_cannot_be_written(tmp_path: Path, matrix: Path) -> None:
    regular_file = tmp_path / "a-file"
    regular_file.write_text("not a directory")
    out = regular_file / "results"
    assert_bad_input(
        ["--matrix", str(matrix), "--device", "cpu", "--out", str(out)],
        f"--out {out}: cannot write there",
        "choose another directory with --out",
    )
    existing = tmp_path / "done"
    existing.mkdir()
    (existing / "results.csv").write_text("scenario,repeat,status,samples_per_s,peak_mem_mb\n")
    (existing / "scenarios.json").write_text("{}")
    assert_bad_input(
        ["--matrix", str(matrix), "--device", "cpu", "--out", str(existing)],
        f"--out {existing} already holds a results.csv",
        f"use --resume {existing}",
    )


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    result = gpubench("run", "--matrix", "quik", "--debug", timeout=60)
    assert result.returncode != 0 and "Traceback" in result.stderr and "BadInput" in result.stderr


def test_matrix_base_fixture_is_the_small_workload() -> None:
    # The end-to-end tests rely on this workload being small; a test that guards the guard.
    assert BASE["samples"] // BASE["batch_size"] > BASE["warmup_steps"]


def test_command_line_settings_are_checked_on_the_selected_scenarios_only(tmp_path: Path) -> None:
    path = write_matrix(tmp_path / "m.toml", {"small": {}, "big": {"batch_size": 8}})
    out = tmp_path / "out"
    # 8 samples are too few for big's batch of 8 after a warm-up step, but only small is selected: the run gets as far
    # as the device check (this machine has no GPU) instead of refusing big's settings
    assert_bad_input(
        ["--matrix", str(path), "--only", "small", "--samples", "8", "--device", "cuda", "--out", str(out)],
        "--device cuda: torch sees no CUDA GPU on this machine",
        out=out,
    )
    assert_bad_input(
        ["--matrix", str(path), "--samples", "8", "--device", "cuda", "--out", str(out)],
        "scenario 'big': warmup_steps",
        out=out,
    )


def test_cpu_affinity_that_cannot_be(tmp_path: Path, matrix: Path) -> None:
    out = tmp_path / "out"
    assert_bad_input(
        ["--matrix", str(matrix), "--cpu-affinity", "2-x", "--out", str(out)],
        "--cpu-affinity '2-x' is not a CPU list (write it as Linux does, for example 2-5 or 0,2,4-7)",
        out=out,
    )
    assert_bad_input(
        ["--matrix", str(matrix), "--cpu-affinity", "0,9999", "--out", str(out)],
        f"--cpu-affinity 0,9999: CPU 9999 is not available to this process (choose from {cpus.current()})",
        out=out,
    )


@pytest.mark.parametrize(
    ("text", "parsed", "written"),
    [("3", (3,), "3"), ("2-5,8", (2, 3, 4, 5, 8), "2-5,8"), ("8, 0-1,1", (0, 1, 8), "0-1,8")],
)
def test_cpu_lists_read_and_written_as_linux_does(text: str, parsed: tuple[int, ...], written: str) -> None:
    assert cpus.parse(text) == parsed and cpus.format_list(parsed) == written


@pytest.mark.parametrize("text", ["", "a", "5-2", "-1", "1-", "1,,2"])
def test_what_is_not_a_cpu_list(text: str) -> None:
    with pytest.raises(BadInput, match="is not a CPU list"):
        cpus.parse(text)


def test_a_resume_folder_that_cannot_be_written_names_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`run --resume DIR` on a read-only DIR: the message names --resume, never advises another --out
    (the run can only be finished in its own folder). Root writes anywhere: the write is refused here."""
    import tempfile

    matrix = write_matrix(tmp_path / "m.toml", {"a": {}}, base=BASE)
    out = tmp_path / "run"
    stopped = gpubench("run", "--matrix", matrix, "--device", "cpu", "--out", out, "--time-limit", "0.001")
    assert stopped.returncode == 4, stopped.stderr  # planned, ran nothing: --resume finishes it

    def read_only(*args: object, **kwargs: object) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", read_only)
    for launcher in ((), ("--launcher", "slurm", "--print-script")):
        done = gpubench_in_process("run", *launcher, "--resume", out)
        assert done.code == 2, done.err
        assert error_lines(done.err) == [
            f"gpubench: error: --resume {out}: cannot write there: Read-only file system (the run is finished in "
            "its own folder: make it writable, then resume again)"
        ]
