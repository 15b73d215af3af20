"""The torchvision family (bench/families/torchvision.py, tvmodel.py): its wrapper speaks
transformers' image-classifier interface, every engine trains it in a real run, a machine without
torchvision gives a skipped row, and what it cannot take is refused before any work. CI has no
torchvision (PyPI's cannot be installed beside the CPU torch): the tests write a plain-torch stub of
it (tests/tvstub.py) and put it on the path, the runs' PYTHONPATH included."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import error_lines, gpubench, gpubench_in_process, results, write_matrix
from tvstub import real_torchvision, torchvision_in_process, write_stub

from bench.worker.skips import Skip, require_family_package

TINY = "tv-vit-tiny"
BASE = {"model": TINY, "samples": 8, "warmup_steps": 1, "batch_size": 4}
ENGINES = ("trainer", "accelerate", "torch", "fabric")
# torchvision's vit_b_16 (86,567,656 parameters with its 1000 classes) with a 10-class head: 768 x 990 + 990 fewer
VIT_B_16_AT_10_CLASSES = 86_567_656 - 769 * 990


@pytest.fixture
def torchvision_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from torchvision_in_process(tmp_path, monkeypatch)


def test_the_wrapper_trains_as_a_transformers_image_classifier(torchvision_here: str) -> None:
    """pixel_values in, ImageClassifierOutput out (the cross-entropy loss with labels, none
    without); the config carries the preset and the dimensions read off the built module; the seam's
    extras that mean nothing to torchvision are ignored, any other is refused."""
    import torch
    from transformers.modeling_outputs import ImageClassifierOutput

    from bench.worker.model import build_model

    torch.manual_seed(0)
    model = build_model(TINY, torch.device("cpu"), "eager")
    assert type(model).__name__ == "TorchvisionClassifier" and model.main_input_name == "pixel_values"
    assert (model.config.model_type, model.config.architecture, model.config.num_labels) == (
        "torchvision",
        "VisionTransformer",
        10,
    )
    assert (model.config.num_hidden_layers, model.config.num_attention_heads, model.config.hidden_size) == (2, 2, 64)
    pixels, labels = torch.randn(3, 3, 32, 32), torch.tensor([0, 4, 9])
    out = model(pixel_values=pixels, labels=labels)
    assert isinstance(out, ImageClassifierOutput) and out.logits.shape == (3, 10)
    assert torch.allclose(out.loss, torch.nn.functional.cross_entropy(out.logits, labels))
    out.loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    assert model(pixels).loss is None
    with pytest.raises(TypeError, match="takes no quantization_config"):
        type(model).from_config(model.config, quantization_config=object())


def test_vit_b16_has_torchvisions_shape_and_its_flops_agree_with_the_counter(torchvision_here: str) -> None:
    """tv-vit-b16 is vit_b_16 at 224 px with 10 classes; the generic FLOP count sees
    nn.MultiheadAttention's packed q/k/v and the head under `heads` (once per image): it equals
    FlopCounterMode's count of a dense step of the tiny preset."""
    import torch

    from bench.families.build import build_on_meta
    from bench.measure.flopcount import counted_flops_per_sample, dense_flops_full_attention, matmul_weights
    from bench.worker import what_ran

    b16 = build_on_meta("tv-vit-b16")
    assert sum(p.numel() for p in b16.parameters()) == VIT_B_16_AT_10_CLASSES
    assert (b16.config.num_hidden_layers, b16.config.hidden_size, b16.config.num_attention_heads) == (12, 768, 12)
    assert what_ran.tokens(b16, "image-classification", 512) == ("image patches + class token", 197)
    assert matmul_weights(b16, 1.0)["head"]["trained"] == 768 * 10
    meta = torch.device("meta")
    inputs = {
        "pixel_values": torch.zeros((1, 3, 32, 32), device=meta),
        "labels": torch.zeros(1, dtype=torch.long, device=meta),
    }
    counted = counted_flops_per_sample(lambda: build_on_meta(TINY, attn_implementation="eager"), inputs)
    tokens = what_ran.tokens(build_on_meta(TINY), "image-classification", 0)[1]
    assert tokens == (32 // 8) ** 2 + 1
    assert counted == pytest.approx(dense_flops_full_attention(build_on_meta(TINY), tokens, vision=True), rel=1e-6)


def stub_path(tmp_path: Path) -> dict[str, str]:
    """The runs' environment with the stub first on PYTHONPATH (none where a real torchvision imports)."""
    if real_torchvision():
        return {}
    paths = [str(write_stub(tmp_path / "stub")), os.environ.get("PYTHONPATH", "")]
    return {"PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def test_every_engine_trains_the_tiny_preset_with_torchvision(tmp_path: Path) -> None:
    """A real run: each engine's row is ok, names the model, counts FLOPs that the meta-device
    counter confirms, and leaves the memory prediction empty (the parent never imports torchvision)."""
    matrix = write_matrix(tmp_path / "m.toml", {e: {"engine": e} for e in ENGINES}, base=BASE)
    out = tmp_path / "out"
    done = gpubench("run", "--device", "cpu", "--matrix", matrix, "--out", out, timeout=600, env=stub_path(tmp_path))
    assert done.returncode == 0, done.stderr
    rows = results(out).set_index("scenario")
    assert list(rows.index) == list(ENGINES)
    assert (rows["status"] == "ok").all(), rows[["status", "error"]]
    assert (rows["model"] == TINY).all()
    assert (rows["model_params"] == rows["model_params"].iloc[0]).all() and rows["model_params"].iloc[0] > 0
    assert (rows["flops_check_gap_pct"].abs() < 0.01).all(), rows["flops_check_gap_pct"]
    assert rows["pred_peak_allocated_mb"].isna().all()


def test_without_torchvision_the_row_is_skipped_saying_why(tmp_path: Path) -> None:
    if importlib.util.find_spec("torchvision") is not None:
        pytest.skip("torchvision is installed here")
    matrix = write_matrix(tmp_path / "m.toml", {"tv": {"engine": "torch"}}, base=BASE)
    out = tmp_path / "out"
    done = gpubench("run", "--device", "cpu", "--matrix", matrix, "--out", out)
    assert done.returncode == 0, done.stderr
    row = results(out).iloc[0]
    assert row["status"] == "skipped" and row["model"] == TINY
    assert row["error"].startswith(
        f"the torchvision family ({TINY}) needs torchvision, which is not installed here; pip install torchvision"
    ), row["error"]


def test_a_torchvision_that_fails_to_import_skips_saying_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PyPI's torchvision beside a torch it was not built for raises at import: a skip, not a crash."""
    broken = tmp_path / "broken" / "torchvision"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text('raise RuntimeError("operator torchvision::nms does not exist")\n')
    monkeypatch.syspath_prepend(str(broken.parent))
    for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
        monkeypatch.delitem(sys.modules, name)  # a real one an earlier test imported (given back after)
    with pytest.raises(Skip, match=r"fails to import here \(RuntimeError: operator torchvision::nms does not exist\)"):
        require_family_package(TINY)
    require_family_package("vit-tiny")  # transformers' ViT needs nothing more


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"grad_checkpointing": True}, "grad_checkpointing = True is not wired for the torchvision family"),
        ({"attn_implementation": "sdpa"}, "attn_implementation = 'sdpa' does not apply to the torchvision family"),
        ({"peft": "lora"}, "peft = 'lora' does not apply to 'tv-vit-tiny' (the torchvision family"),
    ],
    ids=["grad_checkpointing", "attn_implementation", "lora"],
)
def test_what_the_family_cannot_take_is_refused_before_any_work(tmp_path: Path, settings: dict, field: str) -> None:
    matrix = write_matrix(tmp_path / "m.toml", {"s": settings}, base=BASE)
    out = tmp_path / "out"
    done = gpubench_in_process("run", "--device", "cpu", "--matrix", matrix, "--out", out)
    assert done.code == 2 and len(error_lines(done.err)) == 1, done.err
    assert field in done.err, done.err
    assert not out.exists()


def test_a_checkpoint_directory_of_the_family_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    cfg = {"model_type": "torchvision", "architecture": "vit_b_16", "image_size": 224, "num_labels": 10}
    (folder / "config.json").write_text(json.dumps(cfg))
    (folder / "model.safetensors").write_bytes(b"")
    matrix = write_matrix(tmp_path / "m.toml", {"s": {}}, base={**BASE, "model": str(folder)})
    done = gpubench_in_process("run", "--device", "cpu", "--matrix", matrix, "--out", tmp_path / "out")
    assert done.code == 2 and len(error_lines(done.err)) == 1, done.err
    assert "the torchvision family trains random weights only" in done.err
    (folder / "model.safetensors").unlink()  # config.json alone: random weights, accepted at plan time
    from bench.families.resolve import check_model

    check_model(str(folder))


def test_its_encoder_blocks_are_the_repeated_blocks(torchvision_here: str) -> None:
    """FSDP's wrapping, compile_scope = "layers" and the device mesh shard or compile the repeated
    blocks: torchvision keeps them in an nn.Sequential (encoder.layers), not a ModuleList."""
    from bench.families.build import build_on_meta
    from bench.worker.compiling import repeated_blocks
    from bench.worker.parallel import layer_class

    model = build_on_meta(TINY)
    assert repeated_blocks(model) == list(model.model.encoder.layers)
    assert layer_class(model) == type(model.model.encoder.layers[0]).__name__
