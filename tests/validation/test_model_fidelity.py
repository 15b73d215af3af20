"""`python -m validation.model_fidelity` and `validation.model_loop` end to end on the CPU: a
gpubench run of a tiny decoder and ViT, then the hand-written loop beside each row, then the table
(figures from a CPU mean nothing; the GPU figures are in results/moe/ and results/fabric-talk/)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from harness import REPO, gpubench, write_matrix

pytestmark = pytest.mark.validation
HANG_GUARD_S = 1800


def test_the_loop_runs_beside_every_ok_row_and_the_table_pairs_them(tmp_path: Path) -> None:
    base = {"samples": 12, "seq_len": 32, "warmup_steps": 1, "batch_size": 4, "engine": "accelerate"}
    matrix = write_matrix(
        tmp_path / "m.toml",
        {
            "qwen": {"model": "qwen2-tiny"},
            "vit": {"model": "vit-tiny", "precision": "bf16"},
            "vitf": {"model": "vit-tiny", "engine": "fabric", "precision": "bf16-mixed"},
        },
        base=base,
    )
    run = tmp_path / "run"
    done = gpubench("run", "--no-report", "--matrix", matrix, "--out", run, timeout=HANG_GUARD_S)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "fidelity"
    cmd = [sys.executable, "-m", "validation.model_fidelity", "--results", str(run), "--matrix", str(matrix)]
    cmd += ["--out", str(out), "--repeats", "1", "--device", "cpu"]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(out / "fidelity.csv").set_index("scenario")
    assert list(table.index) == ["qwen", "vit", "vitf"]
    assert table["loop"].tolist() == ["plain", "plain", "fabric"]  # the Fabric row's yardstick is Fabric's loop
    assert (table["loop_samples_per_s"] > 0).all() and (table["engine_repeats"] == 1).all()
    assert table["ratio"].tolist() == pytest.approx(
        (table["engine_samples_per_s"] / table["loop_samples_per_s"]).tolist()
    )
    # the plain loop beside the Fabric row: Fabric's own cost, in a table of its own
    done = subprocess.run(
        [*cmd, "--loop", "plain", "--only", "vitf"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    plain = pd.read_csv(out / "fidelity-plain.csv")
    assert plain["scenario"].tolist() == ["vitf"] and plain["loop"].tolist() == ["plain"]
    assert (out / "loop-plain-vitf-r0.json").is_file() and (out / "loop-vitf-r0.json").is_file()
    # the loop's batches come from a shuffled DataLoader, as the engines' do
    assert json.loads((out / "loop-vitf-r0.json").read_text())["feed"] == "loader"


@pytest.mark.parametrize("loop", ["fabric", "plain"])
def test_fabrics_loop_takes_its_batches_through_setup_dataloaders_as_the_talks_scripts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loop: str
) -> None:
    """The talk's Fabric scripts hand their loaders to `fabric.setup_dataloaders` (batches copied to
    the device without blocking, as the Fabric engine's); its plain scripts copy with `.to(device)`."""
    import torch
    from lightning_fabric import Fabric

    from bench.families.resolve import resolve_model
    from bench.planner import matrix as matrix_mod
    from validation.model_loop import make_step

    handed: list[object] = []
    original = Fabric.setup_dataloaders

    def spy(self: Fabric, *loaders: object, **kwargs: object) -> object:
        handed.extend(loaders)
        return original(self, *loaders, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Fabric, "setup_dataloaders", spy)
    base = {"model": "vit-tiny", "batch_size": 2, "samples": 8, "warmup_steps": 1, "engine": "fabric"}
    matrix = write_matrix(tmp_path / "m.toml", {"f": {"precision": "32-true"}}, base=base)
    sc = matrix_mod.load_matrix(str(matrix), only=["f"]).scenarios[0]
    step = make_step(sc, resolve_model(sc.model, "cpu"), torch.device("cpu"), tmp_path / "scratch", loop)
    losses = [float(step(i).detach()) for i in range(5)]  # past the end of the first epoch (4 batches)
    assert all(torch.isfinite(torch.tensor(losses)))
    assert [type(x).__name__ for x in handed] == (["DataLoader"] if loop == "fabric" else [])
