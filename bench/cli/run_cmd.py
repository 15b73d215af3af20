"""`gpubench run`, `gpubench list` and `gpubench env`."""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from ..errors import BadInput
from ..fmt import mem_size
from ..measure import cpuspeed
from ..redact import redact_argv
from ..run import required
from ..run.launcher import DEFAULT_LAUNCHER
from ..run.request import DEFAULT_TIMEOUT_S, RunRequest
from ..termtable import stdout_console
from .options import (
    DbOpt,
    DeviceOpt,
    EngineOpt,
    MatrixOpt,
    ModelOpt,
    OnlyOpt,
    OutputFileOpt,
    SeqLenOpt,
    db_target,
    gpus_value,
    path_value,
    split_names,
)
from .output import emit


def _window(text: str | None) -> int | str | None:
    """--window: auto, epoch or a whole number of optimizer steps (the scenario checks its range)."""
    if text is None or text in ("auto", "epoch"):
        return text
    if not (text.isascii() and text.isdigit()):
        raise BadInput(f"--window {text!r} must be auto, epoch or a whole number of optimizer steps")
    return int(text)


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("list")(list_cmd)
    app.command("env")(env)


def run(
    matrix: MatrixOpt = None,
    model: ModelOpt = None,
    device: DeviceOpt = "auto",
    only: OnlyOpt = None,
    cmd: Annotated[
        str | None,
        typer.Option(
            "--cmd",
            help='Your own training command as the one scenario, e.g. "torchrun --nproc-per-node 2 train.py": split '
            "like a shell would (shlex), run without one; the script calls gpubench's step hook "
            "(docs/your-script.md). --warmup-steps, --window, --gpus, --repeats and --timeout apply.",
        ),
    ] = None,
    name: Annotated[str, typer.Option("--name", help="The --cmd scenario's name (its rows' scenario).")] = "cmd",
    repeats: Annotated[int, typer.Option(help="Runs of each scenario (interleaved).")] = 1,
    out: Annotated[
        Path | None, typer.Option(parser=path_value, help="Result directory. Default: results/<timestamp>/.")
    ] = None,
    timeout: Annotated[
        float, typer.Option(help="Seconds per scenario; a scenario's own timeout_s wins.")
    ] = DEFAULT_TIMEOUT_S,
    samples: Annotated[int | None, typer.Option(help="Samples in the epoch (guide: 512).")] = None,
    seq_len: SeqLenOpt = None,
    warmup_steps: Annotated[int | None, typer.Option(help="Optimizer steps kept out of the timed window.")] = None,
    window: Annotated[
        str | None,
        typer.Option(
            help="The timed window after warm-up, for every scenario: epoch (the rest of the epoch), auto (until "
            "the mean step time is known within 2%, at most about 5 s) or a number of optimizer steps.",
        ),
    ] = None,
    engine: EngineOpt = None,
    data: Annotated[
        str | None,
        typer.Option(
            metavar="KIND",
            help="What every scenario trains on: random (the guide's), lm-synthetic, cls-synthetic, "
            "vision-synthetic, text:PATH, saved:PATH or cifar10:DIR (docs/data.md).",
        ),
    ] = None,
    profile: Annotated[
        int | None,
        typer.Option(
            "--profile",
            metavar="N",
            min=0,
            help="N optimizer steps after each timed window under torch.profiler: a trace beside each row's log "
            "and kernel time per step by category (prof_* columns); the window stays unprofiled.",
        ),
    ] = None,
    eval_samples: Annotated[
        int | None,
        typer.Option(
            "--eval",
            metavar="N",
            min=0,
            help="After training, score each row's model on N held-out samples of its data (eval_accuracy, "
            "eval_loss; after the window); needs data with a held-out split (--data vision-synthetic, cifar10:DIR).",
        ),
    ] = None,
    ceiling: Annotated[
        bool,
        typer.Option(
            "--ceiling/--no-ceiling",
            help="On a GPU, measure the matmul ceiling per number format before the first worker (env.json; "
            "each row's mfu_ceiling), about 10-20 s.",
        ),
    ] = True,
    skip_preflight: Annotated[
        bool,
        typer.Option(
            "--skip-preflight",
            help="Do not time all-reduce, all-gather and reduce-scatter (bus GB/s, env.json interconnect) once "
            "per world size before the multi-process scenarios.",
        ),
    ] = False,
    gpus: Annotated[
        str | None,
        typer.Option(
            help='Processes per node for every multi-process scenario: a number or "all" (GPUs; gloo on the CPU).'
        ),
    ] = None,
    nnodes: Annotated[
        int | None, typer.Option(help="Nodes in each multi-process scenario (run gpubench on each).")
    ] = None,
    node_rank: Annotated[int | None, typer.Option("--node-rank", help="This node's rank, 0 to nnodes - 1.")] = None,
    rdzv_endpoint: Annotated[
        str | None, typer.Option("--rdzv-endpoint", help="HOST:PORT of node 0, the same on every node.")
    ] = None,
    exclusive: Annotated[bool, typer.Option(help="Refuse to run if other processes use the GPU.")] = False,
    resume: Annotated[
        Path | None, typer.Option(parser=path_value, help="Finish an interrupted run in this directory.")
    ] = None,
    retry_failed: Annotated[
        bool,
        typer.Option(
            "--retry-failed",
            help="With --resume: run again the rows that failed (error, crashed, oom, timeout, diverged), "
            "e.g. after fixing their cause; the failed rows are replaced.",
        ),
    ] = False,
    memory_sampling: Annotated[
        bool, typer.Option(help="Sample GPU memory with NVML at ~200 Hz (off: to measure its cost).")
    ] = True,
    time_limit: Annotated[
        float | None,
        typer.Option(
            "--time-limit",
            help="Seconds for the whole run: no worker starts once they have passed, or when an earlier "
            "repeat of its scenario took longer than the time left; then exit 4 (finish with --resume DIR).",
        ),
    ] = None,
    cpu_affinity: Annotated[
        str | None,
        typer.Option(
            "--cpu-affinity",
            help="CPUs the workers may run on, e.g. 2-5 (Linux; each row's cpu_affinity says where it ran). "
            "Steadies CPU-bound (launch-bound) scenarios on some machines; measure it on yours.",
        ),
    ] = None,
    launcher: Annotated[
        str,
        typer.Option(
            help="fork: a fork server imports torch/transformers once per run and forks each worker "
            "(Linux; the default); spawn: a fresh interpreter per worker; slurm: submit the matrix as one Slurm "
            "job (one srun step per scenario, docs/cluster.md) and wait for its rows.",
        ),
    ] = DEFAULT_LAUNCHER,
    lanes: Annotated[
        str | None,
        typer.Option(
            "--lanes",
            metavar="N|all",
            help="Run N single-GPU scenarios at once, one per GPU from --device on (all: every one; on the CPU, "
            "N worker processes at once); rows as a plain run writes them. Refused for multi-process scenarios.",
        ),
    ] = None,
    partition: Annotated[str | None, typer.Option(help="--launcher slurm: the job's partition.")] = None,
    account: Annotated[str | None, typer.Option(help="--launcher slurm: the account the job is charged to.")] = None,
    slurm_time: Annotated[
        str | None, typer.Option("--slurm-time", help="--launcher slurm: the job's time limit (sbatch --time).")
    ] = None,
    gpus_per_node: Annotated[
        int | None, typer.Option("--gpus-per-node", min=1, help="--launcher slurm: GPUs to ask for on each node.")
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            "--print-script",
            help="--launcher slurm: write DIR/slurm/job-N.sbatch and print it; submit nothing.",
        ),
    ] = False,
    wait_timeout: Annotated[
        float,
        typer.Option(
            "--wait-timeout",
            min=1.0,
            help="--launcher slurm: seconds to wait for the job; then exit 4, the job left running "
            "(collect it with --resume DIR).",
        ),
    ] = 7 * 24 * 3600.0,
    require: Annotated[
        list[str] | None,
        typer.Option(
            "--require",
            metavar="PATTERN",
            help="A scenario that must run, not be skipped (a missing optional package, an unsupported GPU): "
            "a name or a glob ('combo-*'; '*' for every one), repeatable, commas between several. A skipped "
            "row of one exits 5, its row still written.",
        ),
    ] = None,
    parity_seeds: Annotated[
        int | None,
        typer.Option(
            "--parity-seeds",
            metavar="N",
            help="Run the loss reference (baseline, or the matrix's parity_reference) at N seeds, for the band "
            "each row's loss is judged in (parity column; docs/parity.md). Default: the matrix's parity_seeds, or 1.",
        ),
    ] = None,
    record: Annotated[
        bool,
        typer.Option(
            "--record",
            help="Store the run in the history database (`gpubench history`); a failure there only warns.",
        ),
    ] = False,
    db: DbOpt = None,
    mlflow: Annotated[
        str | None,
        typer.Option(
            "--mlflow",
            metavar="URI",
            help="Log each scenario as an MLflow run at this tracking URI when the run ends (docs/mlflow.md); "
            "the server is checked before any work, and a failure to log only warns.",
        ),
    ] = None,
    mlflow_experiment: Annotated[
        str, typer.Option("--mlflow-experiment", metavar="NAME", help="The MLflow experiment for --mlflow.")
    ] = "gpubench",
    report: Annotated[
        bool,
        typer.Option(
            "--report/--no-report",
            help="Write DIR/report.html at the end (about 2 s of CPU); `gpubench report DIR` writes it later.",
        ),
    ] = True,
) -> None:
    """Run a matrix of training scenarios, each in its own subprocess.

    Writes DIR/results.csv (one row per scenario x repeat, rewritten atomically after each),
    DIR/env.json and DIR/scenarios.json, then prints a summary table (fitted to the terminal;
    other formats of it: `gpubench report DIR --format markdown|json|csv`).

    Example: gpubench run --matrix full --repeats 3 --out results/nightly

    Your own script: gpubench run --cmd "python train.py --lr 3e-4" --window auto --repeats 3

    Exit codes: 0 every scenario ok or skipped; 1 a scenario failed (results still written);
    2 bad input, nothing ran; 4 stopped at --time-limit and 130 interrupted (finished scenarios
    saved; finish with --resume DIR); 5 a scenario --require names was skipped (rows written).
    """
    from .. import api  # pandas and the run's machinery: only when a run starts
    from ..report.html import REPORT_HTML
    from ..report.table import summary_table
    from ..results import CPU_NOTE, caveats, read_env, summarize, to_frame
    from ..results.harness import time_line
    from ..run.progress import RichReporter

    err = Console(stderr=True)
    _sigterm_as_interrupt()
    request = RunRequest(
        matrix=matrix,
        model=model,
        device=device,
        only=split_names(only),
        repeats=repeats,
        out=out,
        timeout_s=timeout,
        overrides={
            "samples": samples,
            "seq_len": seq_len,
            "warmup_steps": warmup_steps,
            "window": _window(window),
            "engine": engine,
            "data": data,
            "profile_steps": profile,
            "eval_samples": eval_samples,
            "gpus": gpus_value(gpus),
            "nnodes": nnodes,
            "node_rank": node_rank,
            "rdzv_endpoint": rdzv_endpoint,
        },
        exclusive=exclusive,
        resume=resume,
        retry_failed=retry_failed,
        sample_memory=memory_sampling,
        command=["gpubench", *redact_argv(sys.argv[1:])],  # env.json: no --db password
        launcher=launcher,
        time_limit_s=time_limit,
        cpu_affinity=cpu_affinity,
        report=report,
        ceiling=ceiling,
        require=tuple(pattern for value in require or () for pattern in split_names(value, "--require") or ()),
        cmd=cmd,
        cmd_name=name,
        parity_seeds=parity_seeds,
        preflight=not skip_preflight,
        lanes=lanes,
    )
    slurm = launcher == "slurm"
    given = [flag for flag, v in (("--partition", partition), ("--account", account), ("--slurm-time", slurm_time),
             ("--gpus-per-node", gpus_per_node), ("--dry-run", dry_run or None)) if v is not None]  # fmt: skip
    if given and not slurm:
        raise BadInput(f"{', '.join(given)} without --launcher slurm")
    if mlflow is not None:
        if slurm:
            raise BadInput(
                "--mlflow with --launcher slurm", hint="log the finished job with `gpubench export DIR --mlflow URI`"
            )
        from ..export.mlflow import check_tracking

        check_tracking(mlflow)  # before any work: the package imports and the server answers
    if slurm:
        from ..run.slurm_script import SlurmOptions

        options = SlurmOptions(
            partition, account, slurm_time, gpus_per_node, nnodes or 1, wait_timeout, dry_run=dry_run
        )
        plan, outcome = api.run_slurm(
            dataclasses.replace(request, launcher=DEFAULT_LAUNCHER, overrides={**request.overrides, "nnodes": None}),
            options,
            RichReporter(err),
            info=lambda m: err.print(m, highlight=False, markup=False, soft_wrap=True),
            emit_script=lambda text: print(text, end=""),
        )
        if dry_run:
            raise typer.Exit(0)
    else:
        plan, outcome = api.run(
            request,
            RichReporter(err),
            warn=lambda m: err.print(f"[yellow]warning:[/yellow] {escape(m)}"),
            record_db=db_target(db) if record else None,
            info=lambda m: err.print(m, highlight=False, markup=False),
            mlflow=(mlflow, mlflow_experiment) if mlflow is not None else None,
        )
    if outcome.rows:
        frame = to_frame(outcome.rows)
        for caveat in caveats(read_env(plan.out), frame):  # before the table: what its figures are worth
            label = "note" if caveat == CPU_NOTE else "warning"
            err.print(f"{label}: {caveat}", highlight=False, markup=False, soft_wrap=True)
        summary = summarize(frame)
        stdout_console().print(summary_table(summary, title=f"{plan.matrix} on {plan.device} ({plan.model})"))
        spent = time_line(read_env(plan.out))  # this command's, a --resume's too
        if spent is not None:
            err.print(spent, highlight=False, markup=False, soft_wrap=True)
        err.print(f"results: {plan.results_csv}", highlight=False, markup=False, soft_wrap=True)
        html = plan.out / REPORT_HTML
        if report and html.is_file():  # not an older run's report under --no-report
            err.print(f"report:  {html}", highlight=False, markup=False, soft_wrap=True)
    elif outcome.discarded:
        left = "is as it was before the run" if plan.out.exists() else "is removed"
        err.print(f"interrupted before any scenario ran: nothing was measured, and {plan.out} {left}", markup=False)
    else:
        err.print(f"no scenario ran; the plan is in {plan.out}", markup=False)
    if outcome.skipped_required:
        err.print(required.message(outcome.skipped_required), highlight=False, markup=False, soft_wrap=True)
    again = f"gpubench run {'--launcher slurm ' if slurm else ''}--resume {plan.out}"
    if outcome.interrupted and not outcome.discarded:
        err.print(f"interrupted: finish the run with `{again}`", markup=False, soft_wrap=True)
    if outcome.time_limited and not slurm:
        err.print(
            f"stopped at --time-limit {time_limit:g} s with {len(outcome.rows)} of "
            f"{len(plan.scenarios) * plan.repeats} rows done: finish the run with `gpubench run --resume {plan.out}`",
            markup=False,
        )
        if outcome.limit_reason:
            err.print(f"  ({outcome.limit_reason})", markup=False, highlight=False, soft_wrap=True)
        kept = folder_bytes(plan.shared_dir)
        if kept:
            err.print(
                f"the random weights its workers share ({mem_size(kept / 2**20)}, {plan.shared_dir}) are kept "
                "for it; delete that folder if you will not resume",
                markup=False,
                soft_wrap=True,
            )
    raise typer.Exit(int(outcome.exit_code))


def _sigterm_as_interrupt() -> None:
    """SIGTERM (a CI job's timeout, `kill`) and SIGHUP (a closed terminal, a dropped ssh) stop the
    run like Ctrl-C: worker killed, rows saved, an `interrupted` row, exit 130."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGHUP, handler)


def list_cmd(
    matrix: MatrixOpt = "full",
    model: ModelOpt = None,
    engine: EngineOpt = None,
) -> None:
    """List a matrix's scenarios and what each changes versus the baseline.

    Plain text, one line per scenario (the matrix's TOML file is the data: no --format); a scenario
    that keeps its own engine under --engine says so on the next line. Refuses what `run` refuses.

    Example: gpubench list --matrix full
    """
    from .. import api

    rows = api.list_scenarios("full" if matrix is None else matrix, {"model": model, "engine": engine})
    for item in rows:
        sc, changes = item["scenario"], item["changes"]
        what = ", ".join(f"{k}={v}" for k, v in changes.items()) or f"(the reference: {item['reference']})"
        typer.echo(f"{sc.name:<18} {what:<60} {sc.description}")
        if item["note"]:
            typer.echo(f"{'':<18} note: {item['note']}")


def cpu_speed_line(speed: dict[str, Any]) -> str:
    spread = f"p10-p90, {speed['p90_over_p10']:.2f}x"
    line = f"{speed['p10_ms']:.1f}-{speed['p90_ms']:.1f} ms ({spread}) per fixed Python loop"
    return line + (", unsteady: small-batch figures will be noisy" if cpuspeed.warning(speed) else ", steady")


class EnvFormat(StrEnum):
    table = "table"
    json = "json"


def env(
    device: DeviceOpt = "auto",
    fmt: Annotated[
        EnvFormat,
        typer.Option("--format", "-f", help="Output format (key-value pairs: no markdown or csv)."),
    ] = EnvFormat.table,
    output: OutputFileOpt = None,
    as_json: Annotated[bool, typer.Option("--json", hidden=True, help="The same as --format json.")] = False,
) -> None:
    """Show the environment: GPU, driver, CUDA, torch/transformers/accelerate/bitsandbytes versions.

    Example: gpubench env --format json
    """
    from .. import api

    info = api.environment(device)
    if as_json or fmt is EnvFormat.json:
        emit(json.dumps(info, indent=2) + "\n", output)
        return
    gpu = info.get("gpu") or {}
    lines = [
        ("device", info["device"]),
        (
            "gpu",
            f"{gpu.get('name')} ({gpu.get('memory_total_mb', 0):.0f} MB, capability {gpu.get('capability')})"
            if gpu
            else "none",
        ),
        ("driver", gpu.get("driver", "-") if gpu else "-"),
        ("cuda runtime", info.get("cuda_runtime") or "-"),
        *[(name, version or "not installed") for name, version in info["packages"].items()],
        ("python", info["python"]),
        ("cpu", f"{info['cpu']} x{info['cpu_count']}"),
        ("cpu speed", cpu_speed_line(info["cpu_speed"])),
    ]
    emit("".join(f"{key:<14} {value}\n" for key, value in lines), output)


def folder_bytes(folder: Path) -> int:
    """The bytes of the files under `folder` (0 when it does not exist)."""
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) if folder.is_dir() else 0
