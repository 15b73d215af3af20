"""The sbatch script of `gpubench run --launcher slurm`: pure text from the job's options and steps.

One `srun` step per scenario, one after another, each a `gpubench run --resume SHARD` of the
scenario's shard (bench/run/shards.py), so a step cut off by `scancel` or the job's time limit
is finished by the next job. A single-process scenario is a step of one task on one node; a
multi-node one is a step of one task per node, each node's gpubench starting torchrun with its
rank from Slurm (SLURM_NODEID) and the rendezvous at the job's first host (`scontrol show
hostnames "$SLURM_NODELIST"`), on a port from the job id. Every value is quoted for the shell.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

RDZV_PORT_BASE = 29500  # the job's rendezvous port: RDZV_PORT_BASE + job id % 10000
PLACEHOLDER_ENDPOINT = "slurm-first-host:29500"  # planned; each node's step gives the real one


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


@dataclass(frozen=True)
class Step:
    scenario: str
    shard: Path  # nodes > 1: the scenario's folder, one shard per node under it (node-K)
    nodes: int = 1


def sbatch_lines(options: SlurmOptions, job_name: str, log_dir: Path, workdir: Path) -> list[str]:
    lines = [
        f"#SBATCH --job-name={job_name}",
        f"#SBATCH --nodes={options.nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --output={log_dir}/job-%j.log",
        f"#SBATCH --chdir={workdir}",
        "#SBATCH --export=ALL",
    ]
    for flag, value in (("partition", options.partition), ("account", options.account), ("time", options.time)):
        if value:
            lines.append(f"#SBATCH --{flag}={value}")
    if options.gpus_per_node:
        lines.append(f"#SBATCH --gpus-per-node={options.gpus_per_node}")
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
        f"# {step.scenario}",
        f'{run} || echo "gpubench: step {q(step.scenario)} exited with code $?"',
    ]


def render(
    options: SlurmOptions, job_name: str, steps: Sequence[Step], argv: Sequence[str], log_dir: Path, workdir: Path
) -> str:
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
