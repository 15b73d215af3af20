"""The `gpubench` command: a thin layer over the library. Each command group is its own module,
wired here; errors become one line on stderr and a named exit code (bench.errors.ExitCode)."""

from __future__ import annotations

import errno
import os
import sys
from typing import Annotated

import typer

from .. import version
from ..errors import ExitCode, GpubenchError
from ..safetext import for_terminal
from . import (
    compare_cmd,
    cost_cmd,
    export_cmd,
    fit_cmd,
    history_cmd,
    merge_cmd,
    predict_cmd,
    recommend_cmd,
    report_cmd,
    run_cmd,
    verify_cmd,
)

# errors of writing that the user must fix (space, permissions, a read-only mount), not bugs
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG)

app = typer.Typer(
    name="gpubench",
    help="Benchmark the single-GPU efficient-training techniques of the Hugging Face guide "
    "on your own GPU, and gate nightly jobs on regressions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
run_cmd.register(app)
compare_cmd.register(app)
history_cmd.register(app)
predict_cmd.register(app)
fit_cmd.register(app)
report_cmd.register(app)
cost_cmd.register(app)
merge_cmd.register(app)
export_cmd.register(app)
recommend_cmd.register(app)
verify_cmd.register(app)


def _print_version(value: bool) -> None:
    if value:
        print(f"gpubench {version()}")
        raise typer.Exit()


@app.callback()
def _options(
    _version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print gpubench's version and exit."),
    ] = False,
) -> None:
    pass


def usage_line(exc: Exception) -> str:
    """A click usage error (a bad option value, an unknown option) as one line, like GpubenchError."""
    message = " ".join(exc.format_message().split())  # type: ignore[attr-defined]
    ctx = getattr(exc, "ctx", None)
    return f"{message} (see '{ctx.command_path} --help')" if ctx is not None else message


def main() -> None:
    """Console-script entry point: run the app, turning GpubenchError into one line + exit code."""
    debug = "--debug" in sys.argv or os.environ.get("GPUBENCH_DEBUG") == "1"
    if "--debug" in sys.argv:
        sys.argv.remove("--debug")
    try:
        code = app(standalone_mode=False)
    except GpubenchError as exc:
        if debug:
            raise
        print(f"gpubench: error: {for_terminal(exc)}", file=sys.stderr)
        sys.exit(int(exc.exit_code))
    except KeyboardInterrupt:
        print("gpubench: interrupted", file=sys.stderr)
        sys.exit(int(ExitCode.INTERRUPTED))
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, EOFError):
        sys.exit(int(ExitCode.INTERRUPTED))
    except OSError as exc:
        if debug or exc.errno not in WRITE_ERRNOS:
            raise
        # a full disk or a read-only folder met outside bench.fsio: still one line, not a crash
        print(f"gpubench: error: {for_terminal(exc.filename or 'a file')}: {exc.strerror or exc}", file=sys.stderr)
        sys.exit(int(ExitCode.BAD_INPUT))
    except Exception as exc:  # usage errors arrive here in standalone_mode=False
        # typer >= 0.2x ships its own copy of click, so match the class by name, not identity
        if any(cls.__name__ == "ClickException" for cls in type(exc).__mro__):
            if type(exc).__name__ == "NoArgsIsHelpError":  # `gpubench history` alone: its help
                exc.show()  # type: ignore[attr-defined]
            else:
                print(f"gpubench: error: {for_terminal(usage_line(exc))}", file=sys.stderr)
            sys.exit(int(ExitCode.BAD_INPUT))
        if debug:
            raise
        print(
            f"gpubench: internal error: {type(exc).__name__}: {for_terminal(exc)} (rerun with --debug for the "
            "traceback, and please report it)",
            file=sys.stderr,
        )
        sys.exit(int(ExitCode.FAILED))
    sys.exit(code if isinstance(code, int) else 0)
