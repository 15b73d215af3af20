"""The sbatch script of `gpubench run --launcher slurm`: pure text from the job's options and steps.

One `srun` step per scenario, one after another, each a `gpubench run --resume SHARD` of the
scenario's shard (bench/run/shards.py), so a step cut off by `scancel` or the job's time limit
is finished by the next job. A single-process scenario is a step of one task on one node; a
multi-node one is a step of one task per node, each node's gpubench starting torchrun with its
rank from Slurm (SLURM_NODEID) and the rendezvous at the job's first host (`scontrol show
hostnames "$SLURM_NODELIST"`), on a port from the job id. Every value is quoted for the shell
in the script's commands and backslash-escaped on its #SBATCH lines (as sbatch's own reader takes
them), and a value holding a control character (a newline would start a new directive or a new
command) is refused (BadInput) before any text is written.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import BadInput
from ..safetext import check_plain

RDZV_PORT_BASE = 29500  # the job's rendezvous port: RDZV_PORT_BASE + job id % 10000
PLACEHOLDER_ENDPOINT = "slurm-first-host:29500"  # planned; each node's step gives the real one
SBATCH_SPECIAL = re.compile(r"[^A-Za-z0-9_@%+=:,./-]")  # a value with any other character is quoted
SBATCH_ESCAPED = re.compile(r'["\\#]')
SBATCH_WORDS = ("packjob", "hetjob")  # sbatch overwrites these with spaces wherever they are in a line


@dataclass(frozen=True)
class SlurmOptions:
    partition: str | None = None
    account: str | None = None
    time: str | None = None  # the job's --time (Slurm's formats: MINUTES, HH:MM:SS, D-HH:MM)
    gpus_per_node: int | None = None
    nodes: int = 1
    wait_timeout_s: float = 7 * 24 * 3600.0  # how long `gpubench run` waits for the job to end
    poll_s: float = 2.0
    dry_run: bool = False  # write the script and print it; submit nothing

    def __post_init__(self) -> None:
        for flag, value in (("--partition", self.partition), ("--account", self.account), ("--slurm-time", self.time)):
            if value is not None:
                check_plain(value, flag)


@dataclass(frozen=True)
class Step:
    scenario: str
    shard: Path  # nodes > 1: the scenario's folder, one shard per node under it (node-K)
    nodes: int = 1


def directives(options: SlurmOptions, job_name: str, log_dir: Path, workdir: Path) -> list[tuple[str, str]]:
    """The job's sbatch options as (flag, value), unquoted: what sbatch must read from the header."""
    pairs = [
        ("job-name", job_name),
        ("nodes", str(options.nodes)),
        ("ntasks-per-node", "1"),
        ("output", f"{str(log_dir).replace('%', '%%')}/job-%j.log"),  # %%: a '%' of the path, not a pattern
        ("chdir", str(workdir)),
        ("export", "ALL"),
    ]
    for flag, value in (("partition", options.partition), ("account", options.account), ("time", options.time)):
        if value:
            pairs.append((flag, value))
    if options.gpus_per_node:
        pairs.append(("gpus-per-node", str(options.gpus_per_node)))
    return pairs


def sbatch_quote(value: str) -> str:
    """`value` as one word of an #SBATCH line, read back whole by sbatch's reader: in double quotes
    (a space inside them stays in the word) with a backslash before each '"', '\\' and '#' (the
    reader drops it; older Slurm releases end the line at a '#' even in quotes)."""
    if not SBATCH_SPECIAL.search(value):
        return value
    return '"' + SBATCH_ESCAPED.sub(r"\\\g<0>", value) + '"'


def sbatch_lines(options: SlurmOptions, job_name: str, log_dir: Path, workdir: Path) -> list[str]:
    lines = []
    for flag, value in directives(options, job_name, log_dir, workdir):
        if any(word in value.lower() for word in SBATCH_WORDS):
            raise BadInput(
                f"--{flag} {value!r}: sbatch blanks the words {' and '.join(SBATCH_WORDS)} in its #SBATCH lines",
                hint="choose a name or folder without them",
            )
        lines.append(f"#SBATCH --{flag}={sbatch_quote(value)}")
    return lines


def step_lines(step: Step, argv: Sequence[str]) -> list[str]:
    """One srun step: `argv` (gpubench run without --resume) on the step's shard(s)."""
    q = shlex.quote
    if step.nodes == 1:
        cmd = ["srun", "--nodes=1", "--ntasks=1", *argv, "--resume", str(step.shard)]
        run = " ".join(map(q, cmd))
    else:
        inner = (
            'shard="$1" endpoint="$2"; shift 2; exec "$@" --resume "$shard/node-$SLURM_NODEID" '
            '--node-rank "$SLURM_NODEID" --rdzv-endpoint "$endpoint"'
        )
        head = ["srun", f"--nodes={step.nodes}", "--ntasks-per-node=1", "bash", "-c", inner, "gpubench-step"]
        run = " ".join(map(q, head)) + f' {q(str(step.shard))} "$HEAD_NODE:$RDZV_PORT" ' + " ".join(map(q, argv))
    return [
        f"# step {q(step.scenario)}",
        f'{run} || echo "gpubench: step "{q(step.scenario)}" exited with code $?"',
    ]


def render(
    options: SlurmOptions, job_name: str, steps: Sequence[Step], argv: Sequence[str], log_dir: Path, workdir: Path
) -> str:
    values = [job_name, str(log_dir), str(workdir), *argv, *(v for s in steps for v in (s.scenario, str(s.shard)))]
    for value in values:
        check_plain(value, "a value of the sbatch script")
    lines = [
        "#!/bin/bash",
        "# Written by `gpubench run --launcher slurm`: one srun step per scenario, each a `gpubench run",
        "# --resume` of the scenario's shard; `gpubench run --launcher slurm --resume DIR` submits the rest.",
        *sbatch_lines(options, job_name, log_dir, workdir),
        "set -u",
        'HEAD_NODE="$(scontrol show hostnames "$SLURM_NODELIST" | head -n 1)"',
        f"RDZV_PORT=$(( {RDZV_PORT_BASE} + SLURM_JOB_ID % 10000 ))",
        'echo "gpubench: job $SLURM_JOB_ID, $SLURM_JOB_NUM_NODES node(s), first host $HEAD_NODE"',
    ]
    for step in steps:
        lines += step_lines(step, argv)
    lines.append("exit 0  # each scenario's outcome is its row, not the job's state")
    return "\n".join(lines) + "\n"
