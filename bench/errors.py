"""One base exception and the exit codes every command uses."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  # everything ok or skipped / no regression
    FAILED = 1  # a scenario failed / a regression was found
    BAD_INPUT = 2  # bad command line, matrix file or result file (nothing ran); or an output not writable
    INCOMPARABLE = 3  # compare: the two runs come from different GPU models
    TIME_LIMIT = 4  # run: --time-limit reached before every scenario ran; finish with --resume
    SKIPPED_REQUIRED = 5  # run: a scenario that --require names was skipped (its row is written)
    INTERRUPTED = 130  # Ctrl-C: what finished is saved


class GpubenchError(Exception):
    """An error the user can fix; printed as one line, no traceback."""

    exit_code: ExitCode = ExitCode.BAD_INPUT

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class BadInput(GpubenchError):
    exit_code = ExitCode.BAD_INPUT


class CannotWrite(GpubenchError):
    """An output that cannot be written: a full disk, a read-only or forbidden folder. Exit 2, never
    1 (which says "regression" for compare); what was written before stays as it was."""

    exit_code = ExitCode.BAD_INPUT


class IncomparableRuns(GpubenchError):
    exit_code = ExitCode.INCOMPARABLE


def did_you_mean(word: str, choices: list[str] | tuple[str, ...]) -> str | None:
    """A hint naming the closest valid choice, or None."""
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.5)
    return f"did you mean '{close[0]}'?" if close else None
