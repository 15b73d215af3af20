"""`--engine X` never leaves a row described as another engine (issue 58, item 6): the override
applies to the scenarios that take [base]'s engine; one that sets its own keeps it, with a note that
`list` and `run` print. Before, `--engine fabric` made quick's `accelerate` row ("the plain
Accelerate loop") a Fabric run."""

from __future__ import annotations

import re
from pathlib import Path

from harness import SHORT, gpubench, gpubench_in_process, results, write_matrix
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.errors import BadInput
from bench.planner import matrix as matrix_mod
from bench.recipe.engine_registry import ENGINES

# how a scenario's name or description names an engine
NAMED = {
    "trainer": re.compile(r"\bTrainer\b"),
    "accelerate": re.compile(r"\bAccelerate\b|^accelerate"),
    "fabric": re.compile(r"\bFabric\b|^fabric"),
    "torch": re.compile(r"plain PyTorch loop"),
}


def test_an_override_leaves_a_scenario_that_sets_its_own_engine() -> None:
    m = matrix_mod.load_matrix("quick", overrides={"engine": "fabric"})
    engines = {s.name: s.engine for s in m.scenarios}
    assert engines["accelerate"] == "accelerate" and engines["baseline"] == "fabric"
    assert list(m.notes) == ["accelerate"]
    assert "keeps its own engine = 'accelerate'" in m.notes["accelerate"] and "--engine fabric" in m.notes["accelerate"]


def test_an_override_equal_to_a_scenarios_own_engine_needs_no_note() -> None:
    assert not matrix_mod.load_matrix("quick", overrides={"engine": "accelerate"}).notes


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(matrix_mod.available_matrices()), engine=st.sampled_from(list(ENGINES)))
def test_no_scenario_named_for_an_engine_runs_another(name: str, engine: str) -> None:
    try:
        m = matrix_mod.load_matrix(name, overrides={"engine": engine})
    except BadInput:
        return  # refused before any work: no row at all
    for sc in m.scenarios:
        named = {e for e, pattern in NAMED.items() if pattern.search(sc.name) or pattern.search(sc.description)}
        assert not named or sc.engine in named, (name, sc.name, sc.description, sc.engine)
        assert (sc.name in m.notes) == (sc.engine != engine), (name, sc.name)


def test_list_says_which_scenarios_keep_their_engine() -> None:
    done = gpubench_in_process("list", "--matrix", "quick", "--engine", "fabric")
    assert done.code == 0, done.err
    lines = done.out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("accelerate "))
    assert "the plain Accelerate loop" in lines[at]
    assert lines[at + 1].strip().startswith("note: keeps its own engine = 'accelerate'")
    assert sum("note:" in line for line in lines) == 1


def test_run_keeps_a_scenarios_own_engine_and_says_so(tmp_path: Path) -> None:
    engine = "torch"
    matrix = write_matrix(
        tmp_path / "m.toml",
        {"baseline": {}, "accelerate": {"engine": "accelerate", "description": "the plain Accelerate loop"}},
        base={**SHORT, "engine": "trainer"},
    )
    done = gpubench("run", "--matrix", matrix, "--device", "cpu", "--out", tmp_path / "out", "--engine", engine)
    assert done.returncode == 0, done.stderr
    assert "scenario 'accelerate' keeps its own engine = 'accelerate'" in done.stderr
    rows = results(tmp_path / "out").set_index("scenario")
    assert rows.loc["baseline", "engine"] == engine and rows.loc["accelerate", "engine"] == "accelerate"
