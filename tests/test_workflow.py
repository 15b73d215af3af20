"""The nightly workflow (.github/workflows/nightly-gpu.yml) holds together offline: its structure,
its expressions, every gpubench command in it parsed by the real CLI, its pre-flight and verdict
scripts run under bash, and (the one slow test) two nights of its steps run end to end on the CPU:
the first night records, the second compares."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer
from harness import REPO, results, statuses
from packaging.requirements import Requirement
from workflow_support import (
    WORKFLOW,
    Evaluator,
    Runner,
    expressions,
    job,
    load_workflow,
)

from bench.cli import app
from bench.history import library
from bench.history.check import Params
from bench.run.request import DEFAULT_TIMEOUT_S

ACTIONS = {  # the actions the workflow may use, pinned to a major version
    "actions/checkout@v4",
    "actions/cache/restore@v4",
    "actions/cache/save@v4",
    "actions/upload-artifact@v4",
    "actions/github-script@v7",
}
ACTION_OUTPUTS = {"actions/cache/restore@v4": {"cache-hit", "cache-primary-key", "cache-matched-key"}}
STATE = "${{ runner.temp }}/gpubench-state"
# A night's run: one scenario, 1 warm-up and 1 timed step, one worker spawned with the plain loop
# (a fork server imports both engines first: ~3 s more CPU a night).
TINY = (
    "--only baseline --model tiny --device cpu --samples 8 --seq-len 16 --warmup-steps 1 "
    "--engine accelerate --launcher spawn"
)
BUSY_PROCESS = "other processes use the GPU (pid, name, memory): 4242, python, 1000 MiB"
IDLE_SMI = """#!/bin/sh
case "$*" in
  *query-compute-apps*) printf '%s' "$APPS" ;;
  *nounits*) echo "0, ${UTIL:-0}" ;;
  *) echo "0, NVIDIA H200, ${UTIL:-0} %, 1 MiB" ;;
esac
"""


def steps() -> list[dict[str, Any]]:
    return list(job(load_workflow())["steps"])


def named(name: str) -> dict[str, Any]:
    return next(s for s in steps() if s.get("name") == name)


# -- structure -------------------------------------------------------------------------------------
def test_the_workflow_runs_nightly_and_by_hand_on_a_gpu_runner_with_few_permissions() -> None:
    data = load_workflow()
    assert data["on"]["schedule"][0]["cron"] == "0 2 * * *"
    inputs = data["on"]["workflow_dispatch"]["inputs"]
    assert set(inputs) == {"matrix", "repeats", "baseline", "accept", "note", "resume"}
    assert (inputs["resume"]["type"], inputs["resume"]["default"]) == ("boolean", False)
    assert data["permissions"] == {"contents": "read", "issues": "write"}
    assert data["concurrency"]["cancel-in-progress"] is False
    assert data["defaults"]["run"]["shell"] == "bash"
    benchmark = job(data)
    assert "gpu" in benchmark["runs-on"] and benchmark["timeout-minutes"] > 0


def test_every_step_runs_a_script_or_a_pinned_action_and_ids_are_unique() -> None:
    ids = [s["id"] for s in steps() if "id" in s]
    assert len(ids) == len(set(ids))
    for step in steps():
        assert ("uses" in step) != ("run" in step), step
        if "uses" in step:
            assert step["uses"] in ACTIONS, step["uses"]
        else:
            assert "${{" not in step["run"], f"{step['name']}: pass values through env:, not into the script"
            assert step.get("name"), step


def test_every_step_output_read_is_written_by_an_earlier_step() -> None:
    seen: dict[str, dict[str, Any]] = {}
    for step in steps():
        for text in expressions(step):
            for found in re.finditer(r"\bsteps\.([\w-]+)\.(outputs\.([\w-]+)|outcome|conclusion)", text):
                source = seen.get(found.group(1))
                assert source is not None, f"{step.get('name')}: reads step {found.group(1)!r} before it runs"
                output = found.group(3)
                if output and "run" in source:
                    assert re.search(rf"\b{output}=", source["run"]) and "GITHUB_OUTPUT" in source["run"], output
                elif output:
                    assert output in ACTION_OUTPUTS[source["uses"]], output
        if "id" in step:
            seen[step["id"]] = step


def test_every_expression_is_one_these_tests_can_evaluate() -> None:
    evaluator = Evaluator({"steps": {}, "inputs": {}, "env": {}})
    found = expressions(load_workflow())
    assert len(found) > 20
    for text in found:
        evaluator.value(text)  # raises on anything it does not know


def test_the_expression_evaluator_follows_github_rules() -> None:
    contexts = {"inputs": {"matrix": ""}, "vars": {"M": "quick"}, "steps": {"run": {"outputs": {"code": "1"}}}}
    e = Evaluator(contexts)
    assert e.value("inputs.matrix || vars.M || 'full'") == "quick"
    assert e.value("inputs.absent || 'full'") == "full"
    assert e.value("steps.run.outputs.code == '1'") is True and e.value("steps.run.outputs.code == 1") is True
    assert e.value("inputs.accept != ''") is False  # null equals '' (both are 0)
    assert e.value("'ABC' == 'abc'") is True
    assert e.condition("steps.run.outputs.code == '1'") is True
    assert Evaluator(contexts, {"success": False}).condition("steps.run.outputs.code == '1'") is False
    assert Evaluator(contexts, {"success": False}).condition("always() && steps.run.outputs.code == '1'") is True
    with pytest.raises(ValueError, match="fromJSON"):
        e.value("fromJSON('[]')")


def test_the_caches_key_the_venv_on_what_the_install_reads_and_keep_the_state_outside_the_workspace() -> None:
    venv = named("Restore the virtual environment")
    key = venv["with"]["key"]
    for source in ("pyproject.toml", "setup.py", "tools/torch_spec.py", "constraints/*.txt"):
        assert f"'{source}'" in key
    assert named("Save the virtual environment")["with"]["key"] == "${{ steps.venv.outputs.cache-primary-key }}"
    assert named("Restore the gate's state")["with"]["path"] == STATE
    assert named("Save the gate's state")["with"]["path"] == STATE
    assert '"$RUNNER_TEMP/gpubench-state"' in named("History store")["run"]
    upload = named("Upload the results")
    assert upload["if"] == "always()" and upload["with"]["path"].startswith("${{ env.OUT }}")


def run_commands() -> list[str]:
    """The `gpubench run` command lines of the Benchmark step: a new night's and a resume's."""
    return [c for c in gpubench_commands(named("Benchmark")["run"]) if c.startswith("run ")]


def test_every_run_has_a_time_limit_that_ends_before_the_job_does() -> None:
    benchmark = job(load_workflow())
    limit = float(benchmark["env"]["TIME_LIMIT"])
    # a worker that starts just before the limit may run for its --timeout; 20 minutes stay for a cold
    # install (the multi-GB CUDA torch), the judging and the upload
    assert limit + DEFAULT_TIMEOUT_S + 20 * 60 <= benchmark["timeout-minutes"] * 60
    assert len(run_commands()) == 2
    for command in run_commands():
        assert '--time-limit "$TIME_LIMIT"' in command and "--record" in command and "--exclusive" in command


def test_every_run_requires_every_scenario_unless_told_otherwise() -> None:
    env = job(load_workflow())["env"]
    assert Evaluator({"vars": {}}).interpolate(env["REQUIRE"]) == "*"
    assert Evaluator({"vars": {"GPUBENCH_REQUIRE": "bf16,combo-*"}}).interpolate(env["REQUIRE"]) == "bf16,combo-*"
    for command in run_commands():
        assert '"${require[@]}"' in command
    assert 'require=(--require "$REQUIRE")' in named("Benchmark")["run"]


def test_the_install_gets_the_extras_the_matrices_need_and_keys_the_venv_on_them() -> None:
    env = job(load_workflow())["env"]
    extras = Evaluator({"vars": {}}).interpolate(env["EXTRAS"]).split(",")
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert set(extras) == {"postgres", "llm"} and set(extras) <= set(declared)
    assert {"liger-kernel", "torchao"} <= {Requirement(r).name for r in declared["llm"]}  # liger, fp8 rows
    assert "${{ env.EXTRAS }}" in named("Restore the virtual environment")["with"]["key"]
    assert "${{ steps.python.outputs.version }}" in named("Restore the virtual environment")["with"]["key"]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_install_installs_the_extras_it_is_given(tmp_path: Path) -> None:
    args = ["make", "-n", "install", f"VENV={tmp_path / 'venv'}", "EXTRAS=postgres,llm", "PYTHON=python3.12"]
    done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert '-e ".[postgres,llm]"' in done.stdout and "python3.12 -m venv" in done.stdout


@pytest.mark.parametrize(
    "history, gating, compare, opens",
    [
        ("1", "", "", True),
        ("0", "true", "1", True),
        ("0", "false", "1", False),
        ("2", "", "", False),
        ("0", "", "0", False),
    ],
)
def test_an_issue_is_opened_only_on_a_regression(history: str, gating: str, compare: str, opens: bool) -> None:
    step = named("Open an issue on a regression")
    outputs = {"history": {"code": history}, "compare": {"code": compare, "gating": gating}}
    contexts = {"steps": {key: {"outputs": value} for key, value in outputs.items()}}
    assert Evaluator(contexts).condition(step["if"]) is opens


# -- every gpubench command parses -----------------------------------------------------------------
def gpubench_commands(script: str) -> list[str]:
    """The gpubench command lines of a script (where a command starts: a line, or after `;`, `!`,
    `&&`, ...): continuation lines joined, cut at a redirection, a pipe, `;`, `&&` or a comment."""
    text = script.replace("\\\n", " ")
    text = "\n".join(re.sub(r"(^|\s)#.*$", "", line) for line in text.splitlines())  # comments out
    found = []
    start = r"(?:^|[;{(!]|&&|\|\||\bthen|\bdo)[ \t]*"  # where a command starts, not prose in a string
    for match in re.finditer(start + r"(?:\.venv/bin/)?gpubench((?:[ \t][^;|&#\n]*)?)", text, re.MULTILINE):
        words = re.split(r"\s\d?>>?\s*\S+", match.group(1))[0]
        found.append(words.strip())
    return found


def substituted(command: str, values: dict[str, str]) -> list[str]:
    command = command.replace('"${args[@]}"', "--scenario bf16").replace('"${require[@]}"', "--require '*'")
    command = re.sub(r"\$\{?(\w+)\}?", lambda m: values[m.group(1)], command)
    return shlex.split(command)


def parse(args: list[str]) -> str:
    """Parse a command line with the real CLI, options and values checked, without running it."""
    command = typer.main.get_command(app)
    path, ctx = ["gpubench"], None
    words = list(args)
    while hasattr(command, "get_command"):
        if words and words[0].startswith("-"):  # a group option: --version
            break
        ctx = command.make_context(" ".join(path), [], parent=ctx, resilient_parsing=True)
        name = words.pop(0)
        command = command.get_command(ctx, name)
        assert command is not None, f"no command {name!r}"
        path.append(name)
    try:
        command.make_context(" ".join(path), words, parent=ctx)
    except typer.Exit as done:  # an eager option (--version) ends the parse, as it ends the command
        assert done.exit_code == 0
    return " ".join(path)


def test_every_gpubench_command_in_the_workflow_parses_with_the_real_cli(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    values = {
        "OUT": str(out),
        "MATRIX": "full",
        "REPEATS": "3",
        "THRESHOLD": job(load_workflow())["env"]["THRESHOLD"],  # the workflow's own value
        "RUN_ARGS": "--only bf16,fp16",
        "NOTE": "torch upgrade",
        "reference": str(out),
        "TIME_LIMIT": job(load_workflow())["env"]["TIME_LIMIT"],
    }
    parsed = []
    for step in steps():
        for command in gpubench_commands(step.get("run", "")):
            parsed.append(parse(substituted(command, values)))
    assert parsed.count("gpubench run") == 2  # a new night, and the resume of one stopped at its time limit
    assert sorted(set(parsed)) == [
        "gpubench",
        "gpubench compare",
        "gpubench env",
        "gpubench history accept",
        "gpubench history check",
        "gpubench history import",
        "gpubench report",
        "gpubench run",
    ]


def test_the_command_check_rejects_a_wrong_option(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="No such option: --repeat"):
        parse(substituted("run --matrix full --repeat 3", {}))
    assert gpubench_commands('x\n  gpubench history check --run "$OUT" --format markdown 2> "$OUT/e" # c\n') == [
        'history check --run "$OUT" --format markdown'
    ]


@pytest.mark.skipif(shutil.which("actionlint") is None, reason="actionlint is not installed (optional)")
def test_actionlint_finds_nothing() -> None:
    done = subprocess.run(["actionlint", str(WORKFLOW)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


# -- the scripts under bash ------------------------------------------------------------------------
def fake_bin(tmp_path: Path, smi: bool = True) -> Path:
    """gpubench as this checkout runs it, and (when smi) an nvidia-smi that answers from $APPS, $UTIL."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    wrapper = bin_dir / "gpubench"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m bench "$@"\n')
    wrapper.chmod(0o755)
    if smi:
        (bin_dir / "nvidia-smi").write_text(IDLE_SMI)
        (bin_dir / "nvidia-smi").chmod(0o755)
    return bin_dir


def runner(tmp_path: Path, **kwargs: Any) -> Runner:
    workspace, temp = tmp_path / "workspace", tmp_path / "runner-temp"
    workspace.mkdir(exist_ok=True)
    temp.mkdir(exist_ok=True)
    return Runner(workspace, temp, [str(fake_bin(tmp_path, kwargs.pop("smi", True)))], **kwargs)


@pytest.mark.parametrize(
    "apps, util, smi, message",
    [
        ("", "3", True, None),
        ("4242, python, 1000 MiB\n", "0", True, BUSY_PROCESS),
        ("", "85", True, "the GPU is busy (GPU 0 at 85%; above 10%): another job is running on it"),
        ("", "0", False, "nvidia-smi is not on this runner: no NVIDIA driver here"),
    ],
    ids=["idle", "other-process", "busy", "no-driver"],
)
def test_the_gpu_pre_flight_stops_a_busy_or_missing_gpu(
    tmp_path: Path, apps: str, util: str, smi: bool, message: str | None
) -> None:
    if not smi and shutil.which("nvidia-smi", path="/usr/local/bin:/usr/bin:/bin"):
        pytest.skip("this machine has a real nvidia-smi")
    job_runner = runner(tmp_path, smi=smi, overrides={"APPS": apps, "UTIL": util})
    done = job_runner.run_step(job_runner.step("GPU pre-flight"))
    if message is None:
        assert done.outcome == "success", done.stdout + done.stderr
        assert "0, NVIDIA H200, 3 %, 1 MiB" in done.stdout
    else:
        assert done.outcome == "failure"
        assert f"::error title=GPU pre-flight::{message}" in done.stdout
        assert job_runner.summary == f"## GPU pre-flight failed\n\n{message}\n"


def fake_python(tmp_path: Path, prints: str) -> str:
    path = tmp_path / "old-python"
    path.write_text(f"#!/bin/sh\necho {prints}\n")
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize(
    "python, message",
    [
        (None, None),
        (
            "3.10",
            "{python} is Python 3.10, but gpubench needs 3.11 or newer: install it, or name one with the variable "
            "GPUBENCH_PYTHON",
        ),
        ("2.7", "{python} is Python 2.7, but gpubench needs 3.11 or newer"),
        ("garbage", "{python} prints garbage, not a Python version"),
        (
            "missing",
            "{python} is not on this runner: install Python 3.11 or newer, or name one with the variable "
            "GPUBENCH_PYTHON",
        ),
    ],
    ids=["this-python", "3.10", "2.7", "garbage", "missing"],
)
def test_the_python_check_stops_an_old_or_missing_python(
    tmp_path: Path, python: str | None, message: str | None
) -> None:
    if python is None:
        interpreter = sys.executable
    elif python == "missing":
        interpreter = "python3.99-not-here"
    else:
        interpreter = fake_python(tmp_path, python)
    job_runner = runner(tmp_path, overrides={"PYTHON": interpreter})
    done = job_runner.run_step(job_runner.step("Python version"))
    if message is None:
        version = "{}.{}".format(*sys.version_info[:2])
        assert done.outcome == "success", done.stdout + done.stderr
        assert done.outputs == {"version": version}
        return
    assert done.outcome == "failure" and "version" not in done.outputs
    text = message.format(python=interpreter)
    assert f"::error title=Python::{text}" in done.stdout
    assert job_runner.summary.startswith(f"## Python check failed\n\n{text}")


def test_the_install_builds_the_venv_with_that_python_and_the_extras(tmp_path: Path) -> None:
    bin_dir = fake_bin(tmp_path)
    (bin_dir / "make").write_text(
        '#!/bin/sh\necho "$@" >> "$RUNNER_TEMP/make.log"\nmkdir -p .venv/bin\n'
        "printf '#!/bin/sh\\necho gpubench 1\\n' > .venv/bin/gpubench\nchmod +x .venv/bin/gpubench\n"
    )
    (bin_dir / "make").chmod(0o755)
    job_runner = runner(tmp_path, overrides={"PYTHON": "python3.12"})
    done = job_runner.run_step(job_runner.step("Install"))
    assert done.outcome == "success", done.stdout + done.stderr
    assert (tmp_path / "runner-temp" / "make.log").read_text() == "install PYTHON=python3.12 EXTRAS=postgres,llm\n"


@pytest.mark.parametrize("store", ["", "postgresql://gpubench:secret@db:5432/gpubench"])
def test_a_history_kept_only_in_the_actions_cache_warns_that_it_can_be_evicted(tmp_path: Path, store: str) -> None:
    job_runner = runner(tmp_path, secrets={"GPUBENCH_DB": store} if store else {})
    done = job_runner.run_step(job_runner.step("History store"))
    assert done.outcome == "success", done.stderr
    warned = "::warning title=History store::the history is kept only in the Actions cache, which GitHub evicts"
    assert (warned in done.stdout) is (not store)
    if store:
        assert job_runner.env["GPUBENCH_DB"] == store
    else:
        assert "set the secret GPUBENCH_DB to a postgresql:// URL" in done.stdout
        assert job_runner.env["GPUBENCH_DB"].endswith("gpubench-state/history.sqlite")


def recording_gpubench(tmp_path: Path) -> Runner:
    """A job whose gpubench only writes its arguments to $RUNNER_TEMP/gpubench-args and exits $CODE."""
    bin_dir = tmp_path / "fake"
    bin_dir.mkdir()
    script = '#!/bin/sh\nprintf \'%s\\n\' "$@" > "$RUNNER_TEMP/gpubench-args"\nexit "${CODE:-0}"\n'
    (bin_dir / "gpubench").write_text(script)
    (bin_dir / "gpubench").chmod(0o755)
    temp = tmp_path / "runner-temp"
    (tmp_path / "workspace").mkdir()
    temp.mkdir()
    return Runner(tmp_path / "workspace", temp, [str(bin_dir)], overrides={"STATE": str(temp / "state")})


@pytest.mark.parametrize(
    "require, code, ran",
    [("*", "0", True), ("*", "1", True), ("*", "5", True), ("bf16,fp16", "4", False), ("none", "2", False)],
)
def test_the_benchmark_requires_the_scenarios_and_stops_at_the_time_limit(
    tmp_path: Path, require: str, code: str, ran: bool
) -> None:
    job_runner = recording_gpubench(tmp_path)
    job_runner.env.update({"REQUIRE": require, "CODE": code, "MATRIX": "nightly", "REPEATS": "10"})
    kept = tmp_path / "runner-temp" / "state" / "unfinished"
    kept.mkdir(parents=True)  # an older night stopped at its limit: a finished night drops it
    done = job_runner.run_step(job_runner.step("Benchmark"))
    args = (tmp_path / "runner-temp" / "gpubench-args").read_text().splitlines()
    expected = ["run", "--matrix", "nightly", "--repeats", "10", "--out", "results/nightly", "--exclusive", "--record"]
    expected += ["--time-limit", "10800", *(["--require", require] if require != "none" else [])]
    assert args == expected
    assert done.outputs == {"code": code, **({"ran": "true"} if ran else {})}
    assert kept.exists() is not ran
    out = tmp_path / "workspace" / "results" / "nightly"
    out.mkdir(parents=True)
    (out / "scenarios.json").write_text("{}")
    keep = job_runner.run_step(job_runner.step("Keep an unfinished night"))
    assert keep.outcome == ("success" if code == "4" else "skipped"), keep.stderr
    if code == "4":  # kept in the gate's state for a by-hand resume
        assert (kept / "scenarios.json").read_text() == "{}"
        assert "run this workflow by hand with `resume` ticked to finish the night" in job_runner.summary


def test_a_resume_without_a_kept_night_says_so(tmp_path: Path) -> None:
    job_runner = recording_gpubench(tmp_path)
    job_runner.inputs["resume"] = True  # type: ignore[assignment] # a boolean input
    done = job_runner.run_step(job_runner.step("Benchmark"))
    assert done.outcome == "failure" and not (tmp_path / "runner-temp" / "gpubench-args").exists()
    assert "::error title=resume::no night stopped at its time limit is kept in the gate's state" in done.stdout


@pytest.mark.parametrize(
    "run, history, compare, keeps",
    [
        ("0", "0", "0", True),
        ("1", "0", "0", True),
        ("5", "0", "0", False),
        ("0", "1", "0", False),
        ("4", None, None, False),  # judged nothing: a skipped step's outputs are null, and null == '0'
        ("2", None, None, False),
    ],
)
def test_a_night_is_kept_green_only_when_nothing_fails_it(
    run: str, history: str | None, compare: str | None, keeps: bool
) -> None:
    ran = {"ran": "true"} if run in ("0", "1", "5") else {}
    outputs: dict[str, dict[str, Any]] = {"run": {"code": run, **ran}, "history": {}, "compare": {}}
    if history is not None:
        outputs["history"] = {"code": history}
        outputs["compare"] = {"code": compare, "gating": "false"}
    contexts = {"steps": {key: {"outputs": value} for key, value in outputs.items()}}
    assert Evaluator(contexts).condition(named("Keep a green night")["if"]) is keeps


@pytest.mark.parametrize(
    "run, history, gating, compare, exit_code, line",
    [
        ("0", "0", "false", "0", 0, "- pass"),
        ("1", "0", "", "0", 0, "::warning title=gpubench run::exit 1: some scenarios failed"),
        ("2", "", "", "", 1, "::error title=gpubench run::exit 2: nothing ran: bad input, or another process"),
        ("130", "", "", "", 1, "::error title=gpubench run::exit 130: interrupted"),
        ("4", "", "", "", 1, "::error title=gpubench run::exit 4: stopped at its time limit (TIME_LIMIT, 10800 s)"),
        ("5", "0", "false", "0", 1, "::error title=gpubench run::exit 5: a scenario that must run (REQUIRE: *) was"),
        ("0", "1", "", "0", 1, "::error title=gpubench history::exit 1: a regression or a new failure"),
        ("0", "2", "", "0", 1, "::error title=gpubench history::exit 2: the history store could not be read"),
        ("0", "3", "", "0", 0, "::warning title=gpubench history::exit 3: no earlier night shares this GPU"),
        ("0", "0", "true", "1", 1, "::error title=gpubench compare::exit 1: a regression or a new failure against"),
        ("0", "0", "false", "1", 0, "::warning title=gpubench compare::exit 1: changes against the last green night"),
        ("0", "0", "false", "2", 1, "::error title=gpubench compare::exit 2: bad input"),
        ("0", "0", "true", "3", 1, "::error title=gpubench compare::exit 3: this runner's GPU model is not the one"),
        ("0", "0", "false", "3", 0, "::warning title=gpubench compare::exit 3: the last green night ran on another"),
    ],
)
def test_the_verdict_names_each_exit_code_and_fails_only_on_what_gates(
    tmp_path: Path, run: str, history: str, gating: str, compare: str, exit_code: int, line: str
) -> None:
    job_runner = runner(tmp_path)
    job_runner.contexts["steps"] = {
        "run": {"outputs": {"code": run}, "outcome": "success"},
        "history": {"outputs": {"code": history}},
        "compare": {"outputs": {"code": compare, "gating": gating}},
    }
    done = job_runner.run_step(job_runner.step("Verdict"))
    assert done.returncode == exit_code, done.stdout + done.stderr
    assert line in (done.stdout if line.startswith("::") else job_runner.summary)


# -- two nights on the CPU -------------------------------------------------------------------------
def night(tmp_path: Path, skip: tuple[str, ...] = (), inputs: dict[str, Any] | None = None, **overrides: str) -> Runner:
    """One night of the job: a fresh checkout (the results of the night before are gone), the state
    kept in the runner's temp folder as the Actions cache keeps it, and a tiny CPU run. The venv is
    this checkout's (no Install); `gpubench env` is parsed above, not run (it probes the CPU)."""
    shutil.rmtree(tmp_path / "workspace", ignore_errors=True)
    nightly = runner(
        tmp_path,
        inputs={"repeats": "1", **(inputs or {})},
        variables={"GPUBENCH_MATRIX": "quick"},
        overrides={"RUN_ARGS": TINY, "PYTHON": sys.executable, **overrides},
        skip=("Install", "Environment", *skip),
    )
    return nightly.run()


@pytest.mark.slow
def test_two_nights_from_a_fresh_fork_the_first_records_the_second_compares(tmp_path: Path) -> None:
    store = tmp_path / "runner-temp" / "gpubench-state" / "history.sqlite"
    out = tmp_path / "workspace" / "results" / "nightly"

    first = night(tmp_path)
    outcomes = {k: v.outcome for k, v in first.steps.items()}
    assert all(outcomes[k] == "success" for k in ("run", "history", "compare", "Verdict")), outcomes
    assert first.steps["run"].outputs == {"code": "0", "ran": "true"}
    assert "history: recorded run 1 in" in first.steps["run"].stderr  # run --record, into GPUBENCH_DB
    stored = f"run 1: already stored {out.relative_to(tmp_path / 'workspace')} (1 scenarios)\n"
    assert first.steps["history"].stdout == stored  # --record stored it: the import finds it there
    assert (out / "report.html").is_file() and (out / "history.md").is_file()
    assert first.steps["history"].outputs == {"code": "0"}
    assert "## gpubench history check: PASS (exit 0): run 1" in first.summary
    assert "run 1 is the first run stored: nothing to judge it against yet" in first.summary
    assert "The first night: no earlier green night to compare with yet." in first.summary
    assert "<details><summary>The run: every scenario</summary>" in first.summary
    assert first.summary.rstrip().endswith("- pass")
    [run] = library.list_runs(str(store))
    assert (run["gpu_model"], run["status"], run["scenarios"]) == ("CPU", "ok", 1)
    assert run["command"].startswith("gpubench run --matrix quick --repeats 1") and "--record" in run["command"]
    assert run["source"] == str(out.resolve())
    kept = tmp_path / "runner-temp" / "gpubench-state" / "last-green"
    assert sorted(p.name for p in kept.iterdir()) == ["env.json", "results.csv"]

    second = night(tmp_path, skip=("The run's summary",))  # night 1 ran it
    assert second.steps["run"].outputs["code"] == "0"
    assert "run 2: already stored" in second.steps["history"].stdout  # --record stored it; import is a no-op
    assert second.steps["history"].outputs == {"code": "0"}  # a young series cannot fail
    assert "## gpubench history check: PASS (exit 0): run 2" in second.summary
    assert second.steps["compare"].outputs["gating"] == "false"
    assert second.steps["compare"].outputs["code"] in ("0", "1")  # CPU figures: for information only
    assert "## gpubench compare against the last green night" in second.summary
    assert (out / "compare.md").read_text() in second.summary
    assert second.steps["Verdict"].returncode == 0
    check = library.check(str(store), Params())
    assert set(check.rows["baseline_n"]) == {1} and check.run["id"] == 2

    accepting = runner(
        tmp_path, inputs={"accept": "baseline", "note": "a new tokenizer, on purpose"}, skip=("Install", "Environment")
    )
    accepting.run(until="History store")
    accepted = accepting.run_step(accepting.step("Accept an intended change"))
    assert accepted.stdout == "accepted: baseline (all metrics) from run 2 on: a new tokenizer, on purpose\n"


@pytest.mark.slow
def test_a_night_stopped_at_its_time_limit_is_resumed_by_hand_and_a_required_skip_fails_it(tmp_path: Path) -> None:
    state = tmp_path / "runner-temp" / "gpubench-state"
    out = tmp_path / "workspace" / "results" / "nightly"
    tf32 = TINY.replace("--only baseline", "--only baseline,tf32")  # tf32: skipped on the CPU

    stopped = night(tmp_path, RUN_ARGS=tf32, TIME_LIMIT="0.001")  # no worker starts
    assert stopped.steps["run"].outputs == {"code": "4"}
    assert "stopped at --time-limit 0.001 s with 0 of 2 rows done" in stopped.steps["run"].stderr
    assert stopped.steps["Keep an unfinished night"].outcome == "success"
    assert (state / "unfinished" / "scenarios.json").is_file()
    assert all(stopped.steps[k].outcome == "skipped" for k in ("history", "compare", "Keep a green night"))
    assert stopped.steps["Verdict"].returncode == 1
    assert "::error title=gpubench run::exit 4: stopped at its time limit" in stopped.steps["Verdict"].stdout
    assert not (state / "history.sqlite").exists()  # an unfinished run is not recorded

    resumed = night(tmp_path, inputs={"resume": True}, RUN_ARGS="--no-such-option")  # a resume takes no RUN_ARGS
    run = resumed.steps["run"]
    assert run.outputs == {"code": "5", "ran": "true"}, run.stderr
    line = "required by --require but skipped: tf32 (tf32 is a CUDA matmul mode (Ampere or newer); it has no "
    assert line in run.stderr
    assert statuses(results(out)) == {"baseline": "ok", "tf32": "skipped"}
    assert not (state / "unfinished").exists()  # finished: nothing is left to resume
    assert resumed.steps["history"].outputs == {"code": "0"}  # the rows that ran are judged
    [stored] = library.list_runs(str(state / "history.sqlite"))
    assert stored["scenarios"] == 2 and "--require *" in stored["command"]  # env.json: the first part's command
    assert resumed.steps["Keep a green night"].outcome == "skipped"
    verdict = resumed.steps["Verdict"]
    assert verdict.returncode == 1
    assert "::error title=gpubench run::exit 5: a scenario that must run (REQUIRE: *) was skipped" in verdict.stdout
