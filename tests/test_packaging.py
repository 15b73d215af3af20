"""Packaging and reproducibility: the wheel carries the matrices and the entry point, `--version`,
psycopg as an optional extra, and the constraints file of the published H200 results."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from harness import REPO, gpubench, user_env
from packaging.requirements import Requirement

import bench
from bench.cli import main
from bench.planner.matrix import available_matrices, scenario_dir

MATRICES = [f"{stem}.toml" for stem in sorted(p.stem for p in (REPO / "scenarios").glob("*.toml"))]
CONSTRAINTS = REPO / "constraints" / "h200-2026-11.txt"
# what the wheel is built from (setup.py: packages and package data; pyproject.toml: the rest)
SOURCES = ("bench", "scenarios", "claims", "pyproject.toml", "setup.py", "README.md")
CLAIMS = sorted(p.name for p in (REPO / "claims").glob("*.toml"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip install .` would install, built from a copy of the sources (the build writes
    build/ and *.egg-info beside them); a few seconds."""
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", root / "dist", src],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    (built,) = (root / "dist").glob("gpubench-*.whl")
    return built


def test_the_repository_has_matrices_and_a_checkout_finds_them() -> None:
    assert "quick.toml" in MATRICES
    assert scenario_dir() == REPO / "scenarios"
    assert available_matrices() == [Path(name).stem for name in MATRICES]


def test_the_wheel_holds_every_matrix_the_entry_point_and_one_version(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        info = f"gpubench-{bench.__version__}.dist-info"
        entry_points = zf.read(f"{info}/entry_points.txt").decode()
        metadata = zf.read(f"{info}/METADATA").decode()
    assert {f"bench/scenarios/{name}" for name in MATRICES} <= names
    assert CLAIMS == ["guide.toml", "libraries.toml", "talk.toml"]
    assert {f"bench/claims/{name}" for name in CLAIMS} <= names
    assert "bench/cli/__init__.py" in names
    assert "[console_scripts]\ngpubench = bench.cli:main" in entry_points
    assert f"\nVersion: {bench.__version__}\n" in metadata
    psycopg = [line for line in metadata.splitlines() if line.startswith("Requires-Dist: psycopg")]
    assert psycopg == [
        'Requires-Dist: psycopg[binary]>=3; extra == "postgres"',
        'Requires-Dist: psycopg[binary]>=3; extra == "dev"',
    ]


def python_in(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python ARGS` in cwd with site (an unpacked wheel: what pip puts in site-packages) on its path."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env={**user_env(), "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_the_unpacked_wheel_finds_its_matrices_from_any_folder(wheel: Path, tmp_path: Path) -> None:
    site, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    elsewhere.mkdir()
    found = python_in(site, elsewhere, "-c", "import bench.planner.matrix as m; print(m.scenario_dir())")
    assert found.stdout == f"{site / 'bench' / 'scenarios'}\n", found.stderr
    listed = python_in(site, elsewhere, "-m", "bench", "list", "--matrix", "quick")
    assert listed.returncode == 0, listed.stderr
    assert "baseline" in listed.stdout
    claims = python_in(site, elsewhere, "-c", "import bench.verify.claims as c; print(c.claims_dir())")
    assert claims.stdout == f"{site / 'bench' / 'claims'}\n", claims.stderr
    unknown = python_in(site, elsewhere, "-m", "bench", "list", "--matrix", "nosuch")
    names = ", ".join(Path(name).stem for name in MATRICES)
    assert (unknown.returncode, unknown.stderr) == (
        2,
        f"gpubench: error: unknown matrix 'nosuch' (choose one of {names} or give a path to a .toml file)\n",
    )


def test_version_prints_the_package_version_and_exits_0() -> None:
    done = gpubench("--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"gpubench {bench.version()}\n", "")
    assert re.fullmatch(r"\d+\.\d+\.\d+", bench.version())


def test_a_postgresql_url_without_psycopg_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # `import psycopg` fails as if it were not installed
    monkeypatch.setattr(sys, "argv", ["gpubench", "history", "list", "--db", "postgresql://bench:pw@db.example/h"])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "gpubench: error: --db postgresql+psycopg://bench:***@db.example/h: PostgreSQL needs the psycopg "
        "driver, which is not installed here (install it with: pip install 'gpubench[postgres]')\n"
    )


def pins() -> dict[str, str]:
    out = {}
    for line in CONSTRAINTS.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            (spec,) = req.specifier
            assert spec.operator == "==" and not req.extras and req.marker is None, line
            assert req.name not in out, f"{req.name} pinned twice"
            out[req.name] = spec.version
    return out


def test_the_constraints_pin_what_the_published_env_json_files_record() -> None:
    published = sorted((REPO / "results").glob("*/**/env.json"))  # multi-gpu/'s 2-GPU host had no bitsandbytes
    recorded = [json.loads(p.read_text()) for p in published if "multi-gpu" not in p.parts]
    assert len(recorded) > 30, "the published env.json files under results/ are not found"
    assert {"torch", "transformers", "accelerate"} <= set(pins())
    # not every run has them
    optional = {"peft", "liger-kernel", "torchao", "deepspeed", "datasets", "lightning-fabric"}
    for env in recorded:
        installed = {name: version for name, version in env["packages"].items() if version is not None}
        assert {name: pins()[name] for name in installed if name in pins()} == {
            name: version for name, version in installed.items() if name in pins()
        }
        assert set(pins()) - optional <= set(installed) and set(installed) - set(pins()) <= optional
    header = CONSTRAINTS.read_text(encoding="utf-8")
    assert "make install CONSTRAINTS=constraints/h200-2026-11.txt" in header
    assert "pip install -c constraints/h200-2026-11.txt ." in header


def test_the_constraints_pin_only_dependencies_of_gpubench() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = {Requirement(r).name for r in project["dependencies"]}
    assert set(pins()) <= names


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize("constraints", ["", "constraints/h200-2026-11.txt"])
def test_make_install_passes_the_constraints_to_both_pip_installs(tmp_path: Path, constraints: str) -> None:
    args = ["make", "-n", "install", f"VENV={tmp_path / 'venv'}", f"CONSTRAINTS={constraints}"]
    done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    installs = [line for line in done.stdout.splitlines() if "pip install" in line and "--upgrade pip" not in line]
    assert len(installs) == 2 and "torch_spec.py" in installs[0] and '-e ".[dev]"' in installs[1]
    for line in installs:
        assert ("-c " in line) == bool(constraints) and (f"-c {constraints} " in line or not constraints)


def test_ci_runs_the_lint_after_both_test_tiers() -> None:
    """.ci/run runs `make lint` (ruff check, ruff format --check, mypy) after `make test` and
    `make test-heavy`, as commands of its own (not in a comment), and the Makefile's lint runs all three."""
    commands = [
        line.strip() for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    make = [c for c in commands if c.startswith("make ")]
    assert make[-3:] == ["make test", "make test-heavy", "make lint"], make
    recipe = (REPO / "Makefile").read_text(encoding="utf-8").split("\nlint:", 1)[1].split("\n\n", 1)[0]
    for tool in ("ruff check bench tests tools validation", "ruff format --check", "mypy bench validation"):
        assert tool in recipe, recipe
