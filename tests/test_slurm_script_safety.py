"""No value reaches the sbatch script unquoted (docs/running.md, "What gpubench guarantees").

Hostile strings for every field: the header read as sbatch reads it (a port of its #SBATCH word
reader) holds exactly the intended directives, and the body run by bash (fake srun and scontrol on
PATH) runs exactly the intended commands and nothing else. A control character in any field is
refused before any text (exit 2 at the command line)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from harness import SHORT, error_lines, gpubench_in_process, write_matrix
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.errors import BadInput
from bench.run.slurm_script import SlurmOptions, Step, render

# printable and hostile: quotes, the shell's and sbatch's specials, spaces, non-ASCII
HOSTILE = "'\"`$;&|<>(){}[]*?!~#%\\ =,:@-_./aZ9éあ"
plain_text = st.text(alphabet=st.sampled_from(HOSTILE), min_size=1, max_size=24).filter(
    lambda s: "hetjob" not in s.lower() and "packjob" not in s.lower()
)
CONTROL = st.sampled_from(["\n", "\r", "\x00", "\x1b", "\t", "\x7f", "\x85", "\x9b", "\u2028"])


def sbatch_words(line: str) -> list[str]:
    """The words sbatch reads from an #SBATCH line, as Slurm's _get_argument (src/sbatch/opt.c) reads
    them: a word ends at an unquoted space (an escaped one too) or an unquoted '#'; ' and " quote; a
    backslash makes the next character plain, in quotes or not."""
    words, i, n = [], 0, len(line)
    while True:
        while i < n and line[i].isspace():
            i += 1
        if i == n:
            return words
        word, quote, escape = [], "", False
        while i < n and (quote or not line[i].isspace()):
            char = line[i]
            if escape:
                escape = False
            elif char == "\\":
                escape, i = True, i + 1
                continue
            elif quote:
                if char == quote:
                    quote, i = "", i + 1
                    continue
            elif char in "'\"":
                quote, i = char, i + 1
                continue
            elif char == "#":
                return [*words, "".join(word)] if word else words
            word.append(char)
            i += 1
        assert not quote, f"sbatch: unmatched {quote} in {line!r}"
        words.append("".join(word))


def header(text: str) -> list[list[str]]:
    return [sbatch_words(line[len("#SBATCH") :]) for line in text.splitlines() if line.startswith("#SBATCH")]


FAKES = {
    "srun": 'import json, os, sys\nopen(os.environ["CALLS"], "a").write(json.dumps(sys.argv[1:]) + "\\n")\n',
    "scontrol": 'print("node-a")\n',
}


def run_body(text: str, tmp: Path) -> list[list[str]]:
    """The script run by bash as a job would run it, srun and scontrol faked: the srun calls' argv."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in FAKES.items():
        path = bin_dir / name
        path.write_text(f"#!{sys.executable}\n{body}")
        path.chmod(0o755)
    calls = tmp / "calls.jsonl"
    calls.unlink(missing_ok=True)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "CALLS": str(calls), "SLURM_NODELIST": "node-a"}
    env |= {"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "1"}
    done = subprocess.run(["bash", "-c", text], cwd=tmp, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.is_file() else []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    partition=plain_text,
    account=plain_text,
    time=plain_text,
    job=plain_text,
    out=plain_text,
    workdir=plain_text,
    arg=plain_text,
    shard=plain_text,
)
def test_every_field_reaches_the_script_as_exactly_one_word(
    tmp_path: Path, partition: str, account: str, time: str, job: str, out: str, workdir: str, arg: str, shard: str
) -> None:
    options = SlurmOptions(partition=partition, account=account, time=time, gpus_per_node=2)
    argv = ["/venv/python", "-m", "bench", "run", "--cpu-affinity", arg]
    steps = [Step("a", Path("/s") / shard), Step("b.c", Path(shard))]
    text = render(options, job, steps, argv, Path(out), Path(workdir))
    assert header(text) == [
        [f"--job-name={job}"],
        ["--nodes=1"],
        ["--ntasks-per-node=1"],
        [f"--output={str(Path(out)).replace('%', '%%')}/job-%j.log"],
        [f"--chdir={Path(workdir)}"],  # the path as given, as Path spells it ('9/' is '9')
        ["--export=ALL"],
        [f"--partition={partition}"],
        [f"--account={account}"],
        [f"--time={time}"],
        ["--gpus-per-node=2"],
    ]
    assert subprocess.run(["bash", "-n"], input=text, text=True, timeout=10).returncode == 0
    calls = run_body(text, tmp_path)
    assert calls == [
        ["--nodes=1", "--ntasks=1", *argv, "--resume", str(step.shard)] for step in steps
    ]  # and nothing else ran: no file but the fakes' appeared
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "calls.jsonl"]


@settings(max_examples=60, deadline=None)
@given(
    field=st.sampled_from(["partition", "account", "time", "job", "out", "workdir", "arg", "shard", "scenario"]),
    before=plain_text,
    control=CONTROL,
    after=plain_text,
)
def test_a_control_character_in_any_field_is_refused_before_any_text(
    field: str, before: str, control: str, after: str
) -> None:
    bad = before + control + after
    values = dict.fromkeys(("partition", "account", "time", "job", "out", "workdir", "arg", "shard"), "x")
    values[field] = bad
    with pytest.raises(BadInput, match="control character"):
        render(
            SlurmOptions(partition=values["partition"], account=values["account"], time=values["time"]),
            values["job"],
            [Step(bad if field == "scenario" else "a", Path(values["shard"]))],
            ["python", values["arg"]],
            Path(values["out"]),
            Path(values["workdir"]),
        )


def test_a_word_sbatch_would_blank_is_refused() -> None:
    with pytest.raises(BadInput, match="hetjob"):
        render(SlurmOptions(partition="my-HetJob"), "j", [], ["p"], Path("/o"), Path("/w"))


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--partition", "gpu\n#SBATCH --qos=high"),
        ("--account", "lab\ntouch /tmp/gpubench-injected"),
        ("--slurm-time", "01:00:00\r"),
        ("--out", "run\n#SBATCH --uid=0"),
    ],
)
def test_a_newline_in_a_slurm_flag_is_exit_2_with_one_line(tmp_path: Path, flag: str, value: str) -> None:
    matrix = write_matrix(tmp_path / "m.toml", {"baseline": {}}, base=SHORT)
    out = ["--out", str(tmp_path / "run")] if flag != "--out" else []
    done = gpubench_in_process("run", "--launcher", "slurm", "--matrix", matrix, "--device", "cpu", "--dry-run",
                               *out, flag, str(tmp_path / value) if flag == "--out" else value)  # fmt: skip
    assert done.code == 2, done.out
    assert len(error_lines(done.err)) == 1 and "control character" in done.err
    assert "#SBATCH" not in done.out and not (tmp_path / "run").exists()


def test_a_newline_in_the_matrix_files_name_is_exit_2(tmp_path: Path) -> None:
    matrix = write_matrix(tmp_path / "m\n#SBATCH --qos=high\n.toml", {"baseline": {}}, base=SHORT)
    done = gpubench_in_process("run", "--launcher", "slurm", "--matrix", matrix, "--device", "cpu", "--dry-run",
                               "--out", tmp_path / "run")  # fmt: skip
    assert done.code == 2 and "control character" in done.err and len(error_lines(done.err)) == 1
    assert not (tmp_path / "run").exists()


def test_a_control_character_in_a_matrix_description_is_exit_2(tmp_path: Path) -> None:
    matrix = write_matrix(tmp_path / "m.toml", {"baseline": {"description": "fine\x1b]0;pwned\x07"}}, base=SHORT)
    done = gpubench_in_process("list", "--matrix", matrix)
    assert done.code == 2 and "control character (U+001B)" in done.err and "\x1b" not in done.err
