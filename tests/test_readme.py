"""The README keeps its promises: it is short, its links (and those of docs/ and results/README.md)
resolve inside the repository, and every `gpubench` command it shows runs as shown.

Commands are taken from the README's fenced code blocks, one per line, trailing `# comment` cut
off. `gpubench run` runs as a real `python -m bench` subprocess; the other commands run in process
(typer's CliRunner, with errors turned into exit codes as `gpubench` does: a subprocess each cost
about 2 s of CPU for the imports alone), in a scratch folder that holds copies of the published
result sets they name, with the history database there too (GPUBENCH_DB). A command
exits 0 unless its comment says `exit N`. `gpubench run` would train: it runs as shown plus
`--time-limit 0.001`, so it does everything a run does before its first worker (parses every
option, loads the matrix, applies --only/--model/--samples..., probes torch, checks the output
directory, writes scenarios.json and env.json) and stops there with exit 4; the test then reads
the plan it wrote. Commands that depend on each other (a run and its resume, the history commands)
run in README order; the rest run side by side."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from harness import REPO, gpubench_cmd, user_env

README = REPO / "README.md"
MAX_LINES = 250
LINKED_DOCS = [README, REPO / "results" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
COMMAND_KINDS = {"run", "list", "env", "compare", "report", "predict", "history"}  # the README shows each
TIMEOUT_S = 300  # per command: a hang guard, far above what any of them takes
STOP_BEFORE_TRAINING = ["--time-limit", "0.001"]
TIME_LIMIT_EXIT = 4  # gpubench run: stopped at --time-limit

# [text](target) and ![alt](target), the target up to a space or ')'; and [label]: target
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
EXIT_IN_COMMENT = re.compile(r"\bexit (\d+)\b")


@dataclass(frozen=True)
class Command:
    line: str  # as the README shows it, comment cut off
    args: list[str]  # after `gpubench`
    expected_exit: int

    @property
    def kind(self) -> str:
        return self.args[0] if self.args else ""

    def option(self, *names: str) -> str | None:
        for i, arg in enumerate(self.args):
            for name in names:
                if arg == name and i + 1 < len(self.args):
                    return self.args[i + 1]
                if arg.startswith(name + "="):
                    return arg.split("=", 1)[1]
        return None


def fenced_lines(text: str) -> list[str]:
    """The lines inside ``` fences, continuation lines (ending in a backslash) joined."""
    lines, inside, pending = [], False, ""
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside
            continue
        if not inside:
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    return lines


def split_comment(line: str) -> tuple[str, str]:
    """`code  # comment` -> (code, comment): a `#` outside quotes, at the start or after a space."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].strip(), line[i + 1 :].strip()
    return line.strip(), ""


def readme_commands(text: str) -> list[Command]:
    commands = []
    for line in fenced_lines(text):
        code, comment = split_comment(line)
        words = shlex.split(code)
        if not words or words[0] != "gpubench":
            continue
        found = EXIT_IN_COMMENT.search(comment)
        commands.append(Command(code, words[1:], int(found.group(1)) if found else 0))
    return commands


def readme_make_targets(text: str) -> list[str]:
    targets = []
    for line in fenced_lines(text):
        words = shlex.split(split_comment(line)[0])
        if words[:1] == ["make"]:
            targets += [w for w in words[1:] if "=" not in w and not w.startswith("-")] or ["all"]
    return targets


# ---------------------------------------------------------------------------------------------
# length and links


def test_readme_is_at_most_250_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; the limit is {MAX_LINES}"


RESULTS = REPO / "results"
MAX_FINDINGS_LINES = 400  # results/README.md: findings, not a diary
MAX_RESULT_FILES = 200  # results/: a set of answers, not a lab notebook


def test_results_are_a_set_of_answers_each_with_its_provenance_and_machine() -> None:
    """At most 200 files and a 400-line README of findings; each set a folder with its NOTES.md, and
    every result folder (a results.csv) with the env.json of the machine that made it beside it."""
    files = [f for f in RESULTS.rglob("*") if f.is_file()]
    assert len(files) <= MAX_RESULT_FILES, f"results/ holds {len(files)} files; the limit is {MAX_RESULT_FILES}"
    findings = (RESULTS / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(findings) <= MAX_FINDINGS_LINES, f"results/README.md has {len(findings)} lines"
    sets = [d for d in RESULTS.iterdir() if d.is_dir()]
    assert sets and [d.name for d in sets if not (d / "NOTES.md").is_file()] == []
    assert [str(f.parent) for f in RESULTS.rglob("results.csv") if not (f.parent / "env.json").is_file()] == []


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    headings = [line.lstrip("#").strip() for line in text.splitlines() if re.match(r"^#{1,6} ", line)]
    return {github_anchor(h) for h in headings}


def links(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)  # code blocks hold no links
    return INLINE_LINK.findall(prose) + REFERENCE_LINK.findall(prose)


@pytest.mark.parametrize("doc", LINKED_DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves_inside_the_repository(doc: Path) -> None:
    bad = []
    for target in links(doc):
        if re.match(r"^(https?|mailto):", target):
            continue
        path_part, _, anchor = target.partition("#")
        if re.match(r"^[a-z][a-z0-9+.-]*:", path_part) or path_part.startswith("/"):
            bad.append(f"{target}: not a relative link")
            continue
        resolved = (doc.parent / path_part).resolve() if path_part else doc.resolve()
        if not resolved.is_relative_to(REPO.resolve()):
            bad.append(f"{target}: outside the repository")
        elif not resolved.exists():
            bad.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            bad.append(f"{target}: no heading #{anchor} in {resolved.relative_to(REPO)}")
    assert not bad, f"{doc.relative_to(REPO)}: " + "; ".join(bad)


def test_link_check_finds_links_and_rejects_outside_ones(tmp_path: Path) -> None:
    """The link check above is not vacuous: it sees both link forms and an outside target."""
    doc = tmp_path / "x.md"
    doc.write_text("[a](../shared/seed-tables.md) ![b](docs/report.png)\n[c]: results/README.md\n")
    assert links(doc) == ["../shared/seed-tables.md", "docs/report.png", "results/README.md"]
    assert len(links(README)) >= 10
    assert github_anchor("## Predicted beside measured".lstrip("# ")) == "predicted-beside-measured"


# ---------------------------------------------------------------------------------------------
# the commands


def test_readme_shows_a_command_of_every_kind() -> None:
    commands = readme_commands(README.read_text(encoding="utf-8"))
    assert {c.kind for c in commands} >= COMMAND_KINDS, f"found only {sorted({c.kind for c in commands})}"


def test_every_make_target_in_the_readme_exists() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    defined = set(re.findall(r"^([A-Za-z0-9_-]+)\s*:(?!=)", makefile, re.MULTILINE))
    targets = readme_make_targets(README.read_text(encoding="utf-8"))
    assert {"run", "test"} <= set(targets)
    assert set(targets) <= defined, f"the README names make targets the Makefile lacks: {set(targets) - defined}"


def copy_published_sets(commands: list[Command], work: Path) -> None:
    """Each argument that names a file or folder under the repository's results/ is copied into the
    scratch folder at the same relative path (a command may write there, e.g. report.html)."""
    for command in commands:
        for arg in command.args:
            source = REPO / arg
            if not arg.startswith("results/") or not source.exists() or (work / arg).exists():
                continue
            (work / arg).parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, work / arg)
            else:
                shutil.copy2(source, work / arg)


def invocation(command: Command) -> tuple[list[str], int]:
    """The argument list to run and the exit code it must give."""
    if command.kind != "run" or "--help" in command.args:
        return command.args, command.expected_exit
    args, skip = [], False
    for arg in command.args:  # a --time-limit of the README's own gives way to ours
        if skip or arg == "--time-limit" or arg.startswith("--time-limit="):
            skip = arg == "--time-limit"
            continue
        args.append(arg)
    return [*args, *STOP_BEFORE_TRAINING], TIME_LIMIT_EXIT


def check_outcome(command: Command, done: subprocess.CompletedProcess[str], expected: int, work: Path) -> str:
    """'' if the command did what the README says, else why not."""
    if done.returncode != expected:
        return f"exit {done.returncode}, expected {expected}"
    if command.kind == "run" and "--help" not in command.args:
        if "stopped at --time-limit" not in done.stderr:
            return "the run did not stop at the time limit before its first worker"
        out = command.option("--resume") or command.option("--out")
        if out is None:
            return ""  # a timestamped folder under results/; the exit code is the proof
        plan = json.loads((work / out / "scenarios.json").read_text())
        if command.option("--resume") is None:
            names = [s["name"] for s in plan["scenarios"]]
            only = command.option("--only")
            if only is not None and names != [n.strip() for n in only.split(",") if n.strip()]:
                return f"the plan holds {names}, not --only {only}"
            if plan["repeats"] != int(command.option("--repeats") or 1):
                return f"the plan has {plan['repeats']} repeats"
        return ""
    written = command.option("--output", "-o")
    if written is not None and not (work / written).is_file():
        return f"{written} was not written"
    if command.kind == "report" and written is None and command.option("--format", "-f") in (None, "html"):
        report = work / command.args[1] / "report.html"
        if not report.is_file():
            return f"{report.relative_to(work)} was not written"
    if written is None and command.kind != "report" and expected == 0 and not done.stdout.strip():
        return "printed nothing on stdout"
    return ""


def in_process(args: list[str], work: Path) -> subprocess.CompletedProcess[str]:
    """`gpubench ARGS` in this process, in `work`, its exit code as bench.cli.main would give it."""
    from typer.testing import CliRunner

    from bench.cli import app
    from bench.errors import GpubenchError

    old = Path.cwd()
    os.chdir(work)
    try:
        result = CliRunner().invoke(app, args, env={"GPUBENCH_DB": str(work / "history.sqlite"), "COLUMNS": "120"})
    finally:
        os.chdir(old)
    code = result.exit_code
    if isinstance(result.exception, GpubenchError):
        code = int(result.exception.exit_code)
    elif result.exception is not None and not isinstance(result.exception, SystemExit):
        code = 1
    stderr = result.stderr + (f"\n{type(result.exception).__name__}: {result.exception}" if code == 1 else "")
    return subprocess.CompletedProcess(args, code, result.stdout, stderr)


def run_command(command: Command, work: Path, env: dict[str, str]) -> str:
    args, expected = invocation(command)
    if command.kind != "run":
        done = in_process(args, work)
    else:
        done = subprocess.run(
            gpubench_cmd(*args),
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    why = check_outcome(command, done, expected, work)
    return f"`gpubench {' '.join(args)}`: {why}\n{done.stderr[-1500:]}" if why else ""


def run_all(commands: list[Command], work: Path) -> list[str]:
    """Run every command; the failures, each with its stderr. The runs (a run and its resume) go in
    README order in a thread of their own; the in-process commands (which change the working
    folder) in README order in this one, the history commands among them."""
    env = {
        **user_env(),
        "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "GPUBENCH_DB": str(work / "history.sqlite"),
    }
    work.mkdir(parents=True, exist_ok=True)
    copy_published_sets(commands, work)
    runs = [c for c in commands if c.kind == "run"]
    rest = [c for c in commands if c.kind != "run"]

    def run_group(group: list[Command]) -> list[str]:
        return [why for why in (run_command(c, work, env) for c in group) if why]

    with ThreadPoolExecutor(max_workers=1) as pool:
        running = pool.submit(run_group, runs)
        failures = run_group(rest)
        return running.result() + failures


def test_every_readme_command_runs_as_shown(tmp_path: Path) -> None:
    commands = readme_commands(README.read_text(encoding="utf-8"))
    assert commands, "no gpubench command found in the README's code blocks"
    failures = run_all(commands, tmp_path / "work")
    assert not failures, "README commands that do not run as shown:\n" + "\n".join(failures)


def test_a_wrong_run_option_fails_the_check(tmp_path: Path) -> None:
    """The check of `gpubench run` is not vacuous: the option it adds does not hide a wrong one."""
    wrong = readme_commands(
        "```\ngpubench run --matrix full --repeat 3 --out results/x\ngpubench list --matrix nope\n"
        "gpubench compare results/none/a results/none/b   # exit 1\n```\n"
    )
    failures = run_all(wrong, tmp_path / "work")
    assert len(failures) == 3, failures
    assert "exit 2, expected 4" in failures[0] and "exit 2, expected 0" in failures[1]
    assert "exit 2, expected 1" in failures[2]


def test_command_extraction() -> None:
    text = '```bash\ngpubench history accept --note "a # b"   # exit 3 here\nmake bench BENCH_LIMIT=5\n```\n'
    (command,) = readme_commands(text)
    assert command.args == ["history", "accept", "--note", "a # b"]
    assert command.expected_exit == 3
    assert readme_make_targets(text) == ["bench"]
