"""Progress on stderr while a run goes: a live bar (scenario, i/n, elapsed, ETA) on a terminal, and
one line per finished worker everywhere, `[i/n] status scenario rN figure`, with an ETA where
there is no live bar (a CI log). A race's count of workers is not known ahead: its lines read `[i]`
and its ETA is the deadline's."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..recipe.scenario import Scenario
from ..safetext import for_terminal

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
            TextColumn("{task.fields[eta]}"),  # eta_text's: capped by the deadline, as the lines are
            console=self.console,
            transient=True,
        )
        self.task: Any = None
        self.total: int | None = 0
        self.done = 0
        self.ran = 0  # workers finished in this process (a resumed run's earlier rows excluded)
        self.started_at = 0.0
        self.deadline: float | None = None

    def start(self, total: int | None, done: int, deadline: float | None = None) -> None:
        """`deadline` (time.monotonic()): when the command stops starting workers (run's --time-limit,
        recommend's --budget); the ETA never reaches past it. `total` None: not known ahead (a race
        runs until it decides; a count the race could pass would print [29/28])."""
        self.total, self.done, self.ran, self.started_at = total, done, 0, time.monotonic()
        self.deadline = deadline
        first = "the first waits while torch and transformers load"
        if total is None:
            until = f", by {_hms(round(deadline - self.started_at))} at the latest" if deadline else ""
            self.console.print(f"  workers until the search decides{until}; {first}", highlight=False)
        elif total > done:
            self.console.print(f"  {total - done} worker(s) to run; {first}", highlight=False)
        self.progress.start()
        self.task = self.progress.add_task("starting", total=total, completed=done, eta="-")

    def scenario_start(self, sc: Scenario, repeat: int) -> None:
        self.progress.update(self.task, description=escape(f"{for_terminal(sc.name)} (repeat {repeat})"))

    def scenario_end(self, row: dict[str, Any]) -> None:
        status = row["status"]
        style = STATUS_STYLE.get(status, "red")
        sps = row.get("samples_per_s")
        detail = f"{sps:8.2f} samples/s" if status == "ok" and sps else for_terminal(row.get("error") or "")[:120]
        self.done += 1
        self.ran += 1
        eta = self.eta_text()
        count = f"{self.done}" if self.total is None else f"{self.done}/{self.total}"
        self.progress.console.print(
            f"  \\[{count}] [{style}]{status:<11}[/{style}] {escape(for_terminal(row['scenario']))} "
            f"r{row['repeat']}  {escape(detail)}{'' if self.console.is_terminal else eta}",
            highlight=False,
        )
        self.progress.update(self.task, eta=eta.removeprefix("  ETA ") or "-")
        self.progress.advance(self.task)

    def eta_text(self) -> str:
        """'  ETA 0:01:05': the mean time of this process's workers so far times the workers left, or
        the time to the deadline where that is sooner ('  ETA 0:00:40, the time limit'); with no
        count ahead, the deadline's ('  ETA at most 0:02:10, the time limit') or none."""
        now = time.monotonic()
        if self.total is None:
            return f"  ETA at most {_hms(self.deadline - now)}, the time limit" if self.deadline else ""
        left = self.total - self.done
        if left <= 0 or self.ran == 0:
            return ""
        seconds = int((now - self.started_at) / self.ran * left)
        if self.deadline is not None and self.deadline - now < seconds:
            return f"  ETA {_hms(self.deadline - now)}, the time limit"
        return f"  ETA {_hms(seconds)}"

    def finish(self) -> None:
        self.progress.stop()


def _hms(seconds: float) -> str:
    """H:MM:SS of whole seconds (truncated; none below 0)."""
    whole = max(0, int(seconds))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"
