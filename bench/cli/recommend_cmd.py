"""`gpubench recommend`: the fastest recipe for a model that fits a GPU and trains the same."""

from __future__ import annotations

import re
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from ..errors import BadInput
from ..termtable import Column, FitTable, stdout_console
from .options import DbOpt, DeviceOpt, EngineOpt, ModelOpt, SeqLenOpt, db_target, path_value, split_names
from .output import emit
from .predict_cmd import GpuMemoryOpt


class Objective(StrEnum):
    speed = "speed"
    energy = "energy"
    cost = "cost"


class Format(StrEnum):
    table = "table"
    markdown = "markdown"
    json = "json"


def register(app: typer.Typer) -> None:
    app.command("recommend")(recommend)


def budget_seconds(text: str) -> float:
    """900, 900s, 15m, 1h: seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if match is None:
        raise BadInput(f"--budget {text!r}: give seconds or minutes, e.g. 900, 900s, 15m or 1h")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]


def recommend(
    model: ModelOpt = None,
    gpu_memory: GpuMemoryOpt = None,
    budget: Annotated[str, typer.Option("--budget", help="Wall time for the search: 900, 15m, 1h.")] = "15m",
    objective: Annotated[Objective, typer.Option("--objective", help="What the winner is best at.")] = Objective.speed,
    data: Annotated[
        str | None,
        typer.Option("--data", help="What the finalists' loss is judged on (default: the task's learnable kind)."),
    ] = None,
    allow: Annotated[str | None, typer.Option("--allow", help="Also search lora, qlora (comma-separated).")] = None,
    seq_len: SeqLenOpt = None,
    global_batch: Annotated[
        int, typer.Option("--global-batch", help="Samples per optimizer step, split as micro-batch x accumulation.")
    ] = 32,
    axes: Annotated[
        str | None,
        typer.Option("--axes", help="Search only these axes (precision,batch,checkpointing,optimizer,compile,...)."),
    ] = None,
    engine: EngineOpt = None,
    device: DeviceOpt = "auto",
    out: Annotated[
        Path | None, typer.Option(parser=path_value, help="Result directory. Default: results/<timestamp>/.")
    ] = None,
    exhaustive: Annotated[
        bool, typer.Option("--exhaustive", help="Measure every candidate (3 probes each), no elimination or stages.")
    ] = False,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume", help="Finish the search in --out: its measured candidates are kept, the rest measured."
        ),
    ] = False,
    record: Annotated[
        bool, typer.Option("--record", help="Store the winner and the plain recipe in the history (--db).")
    ] = False,
    db: DbOpt = None,
    twin: Annotated[
        Path | None,
        typer.Option(
            "--twin",
            parser=path_value,
            help="A finished --exhaustive of the same search: judge this answer against its best (within 5%).",
        ),
    ] = None,
    finalists: Annotated[int, typer.Option("--finalists", help="Candidates whose loss is judged.")] = 2,
    probe_steps: Annotated[int, typer.Option("--probe-steps", help="Timed steps per probe.")] = 3,
    parity_steps: Annotated[int, typer.Option("--parity-steps", help="Steps of each loss check.")] = 24,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.table,
    output: Annotated[Path | None, typer.Option("-o", "--output", parser=path_value, help="Write it here.")] = None,
) -> None:
    """Find the fastest recipe for a model that fits a GPU's memory and trains the same.

    Builds the combinations the model's family takes (precision, micro-batch x accumulation,
    checkpointing, optimizer, compile, Liger, LoRA/QLoRA with --allow), prunes those the memory
    model says cannot fit beyond its error, races the rest with short probes (a candidate leaves
    once its interval separates it from the best), judges the finalists' loss against the plain
    recipe on a learnable task, and writes DIR/recommend.json and DIR/recommended.toml, a matrix
    `gpubench run --matrix` reruns. On the CPU, --gpu-memory stands in through the memory model.
    The race is staged (precision; micro-batch with the memory savers; compile); --exhaustive
    measures every candidate, --resume finishes a search in its --out, --record stores the answer
    in the history.

    Example: gpubench recommend --model llama-1b --gpu-memory 24GB --budget 15m

    Exit codes: 0 a recipe is recommended; 1 none measured and judged equivalent; 2 bad input,
    nothing ran; 4 an --exhaustive search's --budget ran out (finish it with --resume); 130
    interrupted.
    """
    from .. import api
    from ..recommend.answer_text import HEADER, as_json, markdown, summary_lines, table_rows
    from ..recommend.searching import RecommendRequest
    from ..run.progress import RichReporter

    err = Console(stderr=True)
    request = RecommendRequest(
        model=model, gpu_memory=gpu_memory, device=device, out=out, objective=objective.value,
        budget_s=budget_seconds(budget), data=data, allow=tuple(split_names(allow, "--allow") or ()),
        seq_len=seq_len, global_batch=global_batch, engine=engine, probe_steps=probe_steps,
        parity_steps=parity_steps, finalists=finalists, exhaustive=exhaustive,
        axes=tuple(split_names(axes, "--axes") or ()) or None, command=["gpubench", *sys.argv[1:]],
        resume=resume, record=db_target(db) if record else None, twin=twin,
    )  # fmt: skip
    outcome = api.recommend(
        request,
        RichReporter(err),
        warn=lambda m: err.print(f"[yellow]warning:[/yellow] {escape(m)}"),
        info=lambda m: err.print(m, highlight=False, markup=False, soft_wrap=True),
    )
    answer = outcome.answer
    if fmt == Format.json:
        emit(as_json(answer), output)
    elif fmt == Format.markdown:
        emit(markdown(answer), output)
    else:
        rows, left = table_rows(answer)
        columns = [Column(HEADER[0], name=True), Column(HEADER[1])]
        columns += [Column(h, right=True, drop=i) for i, h in enumerate(HEADER[2:6], start=1)]
        columns += [Column(HEADER[6], drop=5), Column(HEADER[7]), Column(HEADER[8], note=True)]
        footer = [f"{left} more candidates in {outcome.out}/recommend.json"] if left else []
        console = stdout_console()
        console.print(FitTable(columns, rows, title=f"recommend on {answer.device}", footer=footer))
        for line in summary_lines(answer):
            console.print(line, highlight=False, markup=False, soft_wrap=True)
    err.print(f"results: {outcome.out}; rerun the answer: gpubench run --matrix {outcome.out}/recommended.toml",
              highlight=False, markup=False, soft_wrap=True)  # fmt: skip
    raise typer.Exit(int(outcome.exit_code))
