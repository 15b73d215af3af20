"""Progress on stderr while a run goes: scenario i/n, elapsed, ETA, one line per finished scenario."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from ..scenario import Scenario

STATUS_STYLE = {"ok": "green", "skipped": "yellow", "interrupted": "magenta"}


class RichReporter:
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("elapsed"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
        )
        self.task: Any = None

    def start(self, total: int, done: int) -> None:
        self.progress.start()
        self.task = self.progress.add_task("starting", total=total, completed=done)

    def scenario_start(self, sc: Scenario, repeat: int) -> None:
        self.progress.update(self.task, description=f"{sc.name} (repeat {repeat})")

    def scenario_end(self, row: dict[str, Any]) -> None:
        status = row["status"]
        style = STATUS_STYLE.get(status, "red")
        sps = row.get("samples_per_s")
        detail = f"{sps:8.2f} samples/s" if status == "ok" and sps else (row.get("error") or "")[:120]
        self.progress.console.print(
            f"  [{style}]{status:<11}[/{style}] {row['scenario']} r{row['repeat']}  {detail}",
            highlight=False,
        )
        self.progress.advance(self.task)

    def finish(self) -> None:
        self.progress.stop()
