"""Helpers for tests/test_workflow.py: read the nightly GitHub Actions workflow, evaluate the
`${{ }}` expressions it uses, and run its steps' scripts here as a runner would (bash, the step's
`env:`, $GITHUB_OUTPUT, $GITHUB_ENV, $GITHUB_PATH, $GITHUB_STEP_SUMMARY, `if:` conditions).

The expression evaluator covers the part of the GitHub expression language the workflow uses:
literals, context paths (`steps.run.outputs.code`), `==`, `!=`, `!`, `&&`, `||` (which return an
operand, as in JavaScript), parentheses and the status functions; anything else raises, so a new
expression in the workflow fails the tests until it is understood here. Steps that `uses:` an
action are not run (their effect, a cache or an upload, is the test's to stand in for).
"""

from __future__ import annotations

import math
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from harness import REPO

WORKFLOW = REPO / ".github" / "workflows" / "nightly-gpu.yml"
BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]  # what `shell: bash` runs
STATUS_FUNCTIONS = ("always", "success", "failure", "cancelled")
EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||[!(),])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*))"
)


def load_workflow(path: Path = WORKFLOW) -> dict[str, Any]:
    """The workflow as data; YAML 1.1 reads the key `on` as True, so it is put back as "on"."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if True in data:
        data["on"] = data.pop(True)
    return data


def job(data: Mapping[str, Any]) -> dict[str, Any]:
    (only,) = data["jobs"].values()
    return dict(only)


# -- expressions -----------------------------------------------------------------------------------
def tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        found = TOKEN.match(text, pos)
        if not found or found.end() == pos:
            raise ValueError(f"cannot read the expression {text!r} at {text[pos:]!r}")
        kind = found.lastgroup or ""
        out.append((kind, found.group(kind)))
        pos = found.end()
    return out


def truthy(value: Any) -> bool:
    if isinstance(value, float) and math.isnan(value):
        return False
    return value not in (None, False, 0, "")


def _number(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    if not text:
        return 0.0
    try:
        return float(text)
    except ValueError:
        return math.nan


def loose_equal(a: Any, b: Any) -> bool:
    """GitHub's ==: strings compare without case; other mixes are compared as numbers."""
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    if a is None and b is None:
        return True
    return _number(a) == _number(b)


@dataclass
class Evaluator:
    contexts: Mapping[str, Any]
    status: Mapping[str, bool] = field(default_factory=dict)  # success, failure, cancelled

    def value(self, text: str) -> Any:
        self._tokens = tokens(text)
        self._pos = 0
        result = self._or()
        if self._pos != len(self._tokens):
            raise ValueError(f"cannot read the expression {text!r}: {self._tokens[self._pos :]}")
        return result

    def condition(self, text: str) -> bool:
        """An `if:`: without a status function, success() && (it) is meant."""
        inner = EXPRESSION.fullmatch(text.strip())
        text = inner.group(1) if inner else text
        if not any(re.search(rf"\b{f}\s*\(", text) for f in STATUS_FUNCTIONS):
            text = f"success() && ({text})"
        return truthy(self.value(text))

    def interpolate(self, text: str) -> str:
        """A string with ${{ }} parts, as a step's env value or a `with:` input sees it."""

        def one(found: re.Match[str]) -> str:
            value = self.value(found.group(1))
            if value is None:
                return ""
            if isinstance(value, bool):
                return "true" if value else "false"
            return str(value)

        return EXPRESSION.sub(one, str(text))

    # recursive descent: or -> and -> equality -> unary -> primary
    def _peek(self) -> tuple[str, str] | None:
        return self._tokens[self._pos] if self._pos < len(self._tokens) else None

    def _take(self, op: str) -> bool:
        if self._peek() == ("op", op):
            self._pos += 1
            return True
        return False

    def _or(self) -> Any:
        left = self._and()
        while self._take("||"):
            right = self._and()
            left = left if truthy(left) else right
        return left

    def _and(self) -> Any:
        left = self._equality()
        while self._take("&&"):
            right = self._equality()
            left = right if truthy(left) else left
        return left

    def _equality(self) -> Any:
        left = self._unary()
        while True:
            if self._take("=="):
                left = loose_equal(left, self._unary())
            elif self._take("!="):
                left = not loose_equal(left, self._unary())
            else:
                return left

    def _unary(self) -> Any:
        if self._take("!"):
            return not truthy(self._unary())
        return self._primary()

    def _primary(self) -> Any:
        token = self._peek()
        if token is None:
            raise ValueError("the expression ends too early")
        self._pos += 1
        kind, text = token
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return float(text)
        if token == ("op", "("):
            inner = self._or()
            if not self._take(")"):
                raise ValueError("a ( without its )")
            return inner
        if kind == "name":
            if text in ("true", "false", "null"):
                return {"true": True, "false": False, "null": None}[text]
            if self._take("("):
                args = []
                while not self._take(")"):
                    args.append(self._or())
                    self._take(",")
                return self._call(text, args)
            return self._lookup(text)
        raise ValueError(f"unexpected {text!r}")

    def _call(self, name: str, args: list[Any]) -> Any:
        if name == "always":
            return True
        if name in ("success", "failure", "cancelled"):
            return bool(self.status.get(name, name == "success"))
        if name == "hashFiles":
            return "hash-of-" + "-".join(map(str, args))
        raise ValueError(f"the workflow calls {name}(), which these tests do not know")

    def _lookup(self, path: str) -> Any:
        value: Any = self.contexts
        for part in path.split("."):
            if not isinstance(value, Mapping):
                return None
            value = value.get(part)
        return value


def expressions(node: Any) -> list[str]:
    """Every ${{ }} expression and every `if:` in a piece of the workflow."""
    found: list[str] = []
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key == "if" and isinstance(value, str):
                inner = EXPRESSION.fullmatch(value.strip())
                found.append(inner.group(1) if inner else value)
            else:
                found += expressions(value)
    elif isinstance(node, list):
        for item in node:
            found += expressions(item)
    elif isinstance(node, str):
        found += [m.group(1) for m in EXPRESSION.finditer(node)]
    return found


# -- running steps ---------------------------------------------------------------------------------
@dataclass
class StepRun:
    outcome: str  # success, failure, skipped
    outputs: dict[str, str] = field(default_factory=dict)
    stdout: str = ""
    stderr: str = ""
    returncode: int | None = None


@dataclass
class Runner:
    """One job on one night: its steps run in order in `workspace`, as GitHub would run them."""

    workspace: Path
    runner_temp: Path
    path: list[str]  # directories put before the system PATH (the fake gpubench, nvidia-smi)
    inputs: dict[str, str] = field(default_factory=dict)
    variables: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    overrides: dict[str, str] = field(default_factory=dict)  # job env values the test replaces
    skip: tuple[str, ...] = ()  # steps (by name) not to run here
    summary: str = ""
    steps: dict[str, StepRun] = field(default_factory=dict)  # by id, or by name when it has none

    def __post_init__(self) -> None:
        self.data = load_workflow()
        self.job = job(self.data)
        self.env: dict[str, str] = {}
        self.failed = False
        github = {"run_id": "1001", "run_attempt": "1", "workspace": str(self.workspace)}
        self.contexts: dict[str, Any] = {
            "inputs": self.inputs,
            "vars": self.variables,
            "secrets": self.secrets,
            "github": github,
            "runner": {"os": "Linux", "arch": "X64", "temp": str(self.runner_temp)},
            "steps": {},
            "env": self.env,
        }
        for key, value in (self.job.get("env") or {}).items():
            self.env[key] = Evaluator(self.contexts).interpolate(str(value))
        self.env.update(self.overrides)

    def run(self, *, until: str | None = None) -> Runner:
        for step in self.job["steps"]:
            self.run_step(step)
            if until is not None and step.get("name") == until:
                break
        return self

    def step(self, name: str) -> dict[str, Any]:
        return next(s for s in self.job["steps"] if s.get("name") == name)

    def run_step(self, step: Mapping[str, Any], *, force: bool = False) -> StepRun:
        key = step.get("id") or step.get("name") or step.get("uses", "")
        evaluator = Evaluator(self.contexts, {"success": not self.failed, "failure": self.failed})
        if step.get("name") in self.skip or (not force and not evaluator.condition(str(step.get("if", "success()")))):
            result = StepRun("skipped")
        elif "uses" in step:
            result = StepRun("success")  # an action: what it does is the test's to stand in for
        else:
            result = self._bash(step, evaluator)
        self.steps[key] = result
        self.contexts["steps"][key] = {"outputs": result.outputs, "outcome": result.outcome}
        self.failed = self.failed or result.outcome == "failure"
        return result

    def _bash(self, step: Mapping[str, Any], evaluator: Evaluator) -> StepRun:
        files = {name: self.runner_temp / f"_{name.lower()}" for name in ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH")}
        summary = self.runner_temp / "_step_summary"
        for f in (*files.values(), summary):
            f.write_text("")
        script = self.runner_temp / "_step.sh"
        script.write_text(step["run"])
        env = {
            "HOME": os.environ.get("HOME", "/tmp"),
            "LANG": "C.UTF-8",
            "PATH": os.pathsep.join([*self.path, "/usr/local/bin", "/usr/bin", "/bin"]),
            "RUNNER_TEMP": str(self.runner_temp),
            "GITHUB_WORKSPACE": str(self.workspace),
            "GITHUB_STEP_SUMMARY": str(summary),
            "CI": "true",
            **{k: str(v) for k, v in files.items()},
            **self.env,
            **{k: evaluator.interpolate(str(v)) for k, v in (step.get("env") or {}).items()},
        }
        done = subprocess.run(
            [*BASH, str(script)],
            cwd=self.workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )
        self.summary += summary.read_text()
        for line in files["GITHUB_ENV"].read_text().splitlines():
            name, _, value = line.partition("=")
            self.env[name] = value
        self.path = [*files["GITHUB_PATH"].read_text().split(), *self.path]
        outputs = dict(line.partition("=")[::2] for line in files["GITHUB_OUTPUT"].read_text().splitlines() if line)
        outcome = "success" if done.returncode == 0 else "failure"
        return StepRun(outcome, outputs, done.stdout, done.stderr, done.returncode)
