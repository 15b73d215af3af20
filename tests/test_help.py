"""Every command's --help carries an example, and every example runs as shown.

The examples are the lines of each command's help text (its docstring, and a group's help) that
start with `gpubench`, a leading `Example:` cut off, a trailing `# comment` and any shell
redirection (`>> FILE`) too. They run in process through typer's CliRunner in a scratch folder,
in order (`history import` first, so the other history commands have runs to read), with the
history database there. A result directory an example names is a copy of the published set of
that name, or, for a name of the user's own (results/nightly, baselines/h200), of a published
A/A pair: the first such directory in an example is aa/a, the second aa/b. `gpubench run` would
train: its example is only parsed (every option, type, choice and existing path checked); the
README's run commands are run up to their first worker by tests/test_readme.py.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from rich.markup import render
from test_readme import EXIT_IN_COMMENT, Command, copy_published_sets, split_comment
from typer.testing import CliRunner

from bench.cli import app
from bench.errors import GpubenchError

REPO = Path(__file__).resolve().parents[1]
AA_PAIR = (REPO / "results/gate-noise/aa/a", REPO / "results/gate-noise/aa/b")
REDIRECTS = (">", ">>", "|", "2>")
RESULT_DIR = re.compile(r"^(results|baselines)/[^.]*/?$")  # a path with no file suffix
PARSE_ONLY = {"run", "fit", "export", "verify", "recommend"}  # they train or need a server: tests of their own run them


def commands() -> Iterator[tuple[list[str], Any]]:
    """(path, click command) for the app, its groups and every command in them."""
    root = typer.main.get_command(app)
    stack: list[tuple[list[str], Any]] = [([], root)]
    while stack:
        path, command = stack.pop(0)
        yield path, command
        if hasattr(command, "list_commands"):
            ctx = command.make_context("gpubench", [], resilient_parsing=True)
            stack += [([*path, name], command.get_command(ctx, name)) for name in command.list_commands(ctx)]


EXAMPLE = re.compile(r"(?:^\s*|\bExamples?:\s*)(gpubench\s.*)$")  # a line's start, or after "Example:"


def examples(help_text: str) -> list[Command]:
    found = []
    for line in help_text.splitlines():
        match = EXAMPLE.search(line)
        if match is None:
            continue
        code, comment = split_comment(match.group(1))
        words = shlex.split(code)
        cut = next((i for i, w in enumerate(words) if w in REDIRECTS), len(words))
        exit_code = EXIT_IN_COMMENT.search(comment)
        found.append(Command(code, words[1:cut], int(exit_code.group(1)) if exit_code else 0))
    return found


ALL = [(path, command, examples(command.help or "")) for path, command in commands()]


def test_every_command_has_an_example() -> None:
    leaves = [(path, found) for path, command, found in ALL if path and not hasattr(command, "list_commands")]
    assert len(leaves) >= 11  # run, list, env, compare, predict, report, history list/show/check/import/accept
    missing = [" ".join(path) for path, found in leaves if not found]
    assert not missing, f"commands whose --help has no `gpubench ...` example: {missing}"
    for path, found in leaves:
        assert all(c.args[: len(path)] == path for c in found), f"{path}: an example of another command: {found}"


def test_no_help_text_loses_words_to_rich_markup() -> None:
    """typer renders help through rich: a `[model]` in a help string was read as a style tag and
    vanished ("its  table"). Every command's and option's help shows as written (`\\[` escapes)."""
    lost = []
    for path, command in commands():
        texts = [command.help or "", *(getattr(p, "help", None) or "" for p in command.params)]
        lost += [(path, t) for t in texts if render(t).plain != t.replace("\\[", "[")]
    assert not lost, f"help text rich would swallow part of (escape `[` as `\\[`): {lost}"


def test_example_extraction() -> None:
    text = 'Run it.\n\nExample: gpubench history check --format markdown >> "$GITHUB_STEP_SUMMARY"\n'
    text += "Examples:\n  gpubench compare a b   # exit 1: slower\n  not gpubench\nthen `gpubench run` writes\n"
    found = examples(text)
    assert [c.args for c in found] == [["history", "check", "--format", "markdown"], ["compare", "a", "b"]]
    assert [c.expected_exit for c in found] == [0, 1]


def prepare(command: Command, work: Path) -> None:
    """Copies of the result directories the example names (see the module's docstring)."""
    copy_published_sets([command], work)
    own = [a for a in command.args if RESULT_DIR.match(a) and not (REPO / a).exists()]
    for source, arg in zip(AA_PAIR * len(own), own, strict=False):
        if not (work / arg).exists():
            shutil.copytree(source, work / arg)


def outcome(args: list[str], work: Path) -> tuple[int, str]:
    """The exit code an example gives (as bench.cli.main turns errors into codes), and its output."""
    if args[0] in PARSE_ONLY:
        command = typer.main.get_command(app).get_command(None, args[0])  # type: ignore[arg-type]
        try:
            command.make_context(f"gpubench {args[0]}", list(args[1:]))
        except Exception as exc:  # a usage error: what `gpubench` would exit 2 on
            return 2, f"{type(exc).__name__}: {exc}"
        return 0, ""
    result = CliRunner().invoke(app, args, env={"GPUBENCH_DB": str(work / "history.sqlite"), "COLUMNS": "120"})
    if isinstance(result.exception, GpubenchError):
        return int(result.exception.exit_code), f"{result.exception}"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return 1, f"{type(result.exception).__name__}: {result.exception}"
    return result.exit_code, result.output[-1500:]


def test_every_help_example_runs_as_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = [c for _, _, cs in ALL for c in cs]
    found.sort(key=lambda c: c.args[:2] != ["history", "import"])  # stable: the rest keep their order
    assert len(found) >= 12
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    failures = []
    for command in found:
        prepare(command, work)
        code, output = outcome(command.args, work)
        if code != command.expected_exit:
            failures.append(f"`{command.line}`: exit {code}, expected {command.expected_exit}\n{output}")
    assert not failures, "help examples that do not run as shown:\n" + "\n".join(failures)


def test_a_wrong_example_fails_the_check(tmp_path: Path) -> None:
    """The check is not vacuous: a misspelt option fails, in a parsed run and in an executed command."""
    assert outcome(["run", "--matrix", "full", "--repeat", "3"], tmp_path)[0] == 2
    assert outcome(["history", "show", "--scenario", "bf16", "-m", "peak_mem_mb"], tmp_path)[0] == 2
    assert outcome(["list", "--matrix", "full"], tmp_path)[0] == 0
