"""The decoder models and their techniques (bench/worker/llm.py, offload.py, optimizers.py, skips.py).

One real `gpubench run` of the llm-tiny matrix on the CPU, plus a row that trains a llama-tiny
checkpoint saved by this module, is shared by the end-to-end tests; the rest are in-process checks
of the cheap parts."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
import typer
from harness import gpubench, results
from typer.testing import CliRunner

from bench.cli import run_cmd
from bench.errors import BadInput
from bench.planner.matrix import load_matrix
from bench.planner.rules import check
from bench.recipe.scenario import CUDA_AT_IMPORT, Scenario
from bench.worker.__main__ import keep_cuda_imports_out
from bench.worker.llm import float8_eligible
from bench.worker.model import count_parameters, count_trainable
from bench.worker.offload import OffloadActivations, offload_forward
from bench.worker.optimizers import AdamSettings, decay_groups, make_optimizer
from bench.worker.skips import Skip, check_runnable, require

SEQ_LEN = 16
RUN = ["--device", "cpu", "--samples", "4", "--seq-len", str(SEQ_LEN), "--warmup-steps", "1"]
# what a CPU run cannot do, and the word of its reason that names the technique
CUDA_ONLY = {
    "liger": "Liger",
    "liger-accelerate": "Liger",
    "liger-compile": "Liger",
    "fp8": "float8",
    "compile-cudagraphs": "CUDA graphs",
    "qlora": "nf4",
    "qlora-accelerate": "nf4",
    "paged-8bit": "paged",
    "offload": "offloading",
    "offload-accelerate": "offloading",
}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A llama-tiny checkpoint (random weights) saved with save_pretrained, as a user's would be."""
    from bench.worker.model import build_model

    path = tmp_path_factory.mktemp("ckpt") / "llama-tiny"
    build_model("llama-tiny", torch.device("cpu"), "default").save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def llm_run(
    tmp_path_factory: pytest.TempPathFactory, checkpoint: Path
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """llm-tiny, and one more row: the saved checkpoint by path (the matrix extended, one run)."""
    folder = tmp_path_factory.mktemp("llm")
    matrix = folder / "llm-ckpt.toml"
    matrix.write_text(
        '[matrix]\nextends = "llm-tiny"\ndescription = "llm-tiny and a checkpoint"\n\n'
        f'[scenarios.checkpoint]\ndescription = "llama-tiny saved by the test"\nmodel = "{checkpoint}"\n'
    )
    out = folder / "run"
    return gpubench("run", "--matrix", str(matrix), *RUN, "--out", str(out), timeout=600), out


@pytest.mark.slow
def test_every_llm_row_trains_or_says_which_technique_needs_cuda(
    llm_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    done, out = llm_run
    assert done.returncode == 0, done.stderr[-3000:]
    frame = results(out).set_index("scenario")
    assert list(frame.index) == [*load_matrix("llm-tiny").names(), "checkpoint"]
    skipped = frame[frame["status"] == "skipped"]
    assert set(skipped.index) == set(CUDA_ONLY)
    for name, word in CUDA_ONLY.items():
        assert word in frame.loc[name, "error"], (name, frame.loc[name, "error"])
    ok = frame[frame["status"] == "ok"]
    assert set(ok.index) == {"baseline", "grad-ckpt", "lora", "adamw-foreach", "adam8bit-manual", "checkpoint"}
    assert (ok["tokens_per_s"] > 0).all() and (ok["tokens_per_s"] == ok["samples_per_s"] * SEQ_LEN).all()
    assert ok["loss_finite"].all() and (ok["final_loss"] > math.log(100)).all()  # ~ln(4096) at random weights


@pytest.mark.slow
def test_lora_trains_a_small_fraction_and_the_checkpoint_is_the_preset(
    llm_run: tuple[subprocess.CompletedProcess[str], Path], checkpoint: Path
) -> None:
    frame = results(llm_run[1]).set_index("scenario")
    base, lora, ckpt = frame.loc["baseline"], frame.loc["lora"], frame.loc["checkpoint"]
    assert base["trainable_params"] == base["model_params"] > 1e6
    # r16 adapters on the 7 linear layers of 2 blocks; model_params counts the frozen base too
    assert lora["model_params"] == base["model_params"] + lora["trainable_params"]
    assert 0 < lora["trainable_params"] < 0.1 * lora["model_params"]
    assert ckpt["model_resolved"] == str(checkpoint) and ckpt["model_params"] == base["model_params"]
    assert frame.loc["adam8bit-manual", "optimizer"] == "adam8bit_manual"
    # peft stays out of the fork server: the LoRA worker was forked by the second server, `--with peft`
    assert all("forked" in json.loads(r["startup_breakdown"]) for r in (lora, base))
    assert (llm_run[1] / "logs" / "forkserver-with-peft-bitsandbytes.log").is_file()  # one server a set
    # a worker's wall time holds its start-up and its loop: the first `--with` row's wait for its
    # server's imports was in startup_s but not in worker_wall_s (an H100 row: overhead_s - startup_s = -14 s)
    ok = frame[frame["status"] == "ok"]
    assert (ok["worker_wall_s"] >= ok["startup_s"] + ok["train_loop_s"] - 0.05).all(), ok[
        ["worker_wall_s", "startup_s"]
    ]


def test_the_matrix_lists_every_technique() -> None:
    """`gpubench list --matrix llm-tiny`: one line per scenario, saying what it changes."""
    app = typer.Typer()
    run_cmd.register(app)
    result = CliRunner().invoke(app, ["list", "--matrix", "llm-tiny"], terminal_width=200)
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line for line in result.output.splitlines()}
    assert list(lines) == load_matrix("llm-tiny").names()
    assert "quantize_base=nf4" in lines["qlora"] and "optimizer=adam8bit_manual" in lines["adam8bit-manual"]


# -- in process: the cheap parts -----------------------------------------------------------


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(32, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.out = torch.nn.Linear(32, 8, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.norm(self.proj(x))))


def test_adam8bit_manual_is_the_guides_two_groups() -> None:
    model = Block()
    model.out.weight.requires_grad_(False)  # frozen (a LoRA base): in neither group
    decay, no_decay = decay_groups(model, 0.1)
    names = {id(p): n for n, p in model.named_parameters()}
    assert [names[id(p)] for p in decay["params"]] == ["proj.weight"] and decay["weight_decay"] == 0.1
    assert sorted(names[id(p)] for p in no_decay["params"]) == ["norm.bias", "norm.weight", "proj.bias"]
    assert no_decay["weight_decay"] == 0.0
    bnb = pytest.importorskip("bitsandbytes")
    opt = make_optimizer("adam8bit_manual", model, AdamSettings(lr=1e-3, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1))
    assert type(opt) is bnb.optim.Adam8bit
    assert [g["weight_decay"] for g in opt.param_groups] == [0.1, 0.0]
    assert all((g["lr"], g["betas"], g["eps"]) == (1e-3, (0.8, 0.9), 1e-6) for g in opt.param_groups)


def test_rmsnorm_weights_get_no_decay() -> None:
    class LlamaRMSNorm(torch.nn.Module):  # matched by class name, as transformers' models name theirs
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(4))

    model = torch.nn.ModuleDict({"input_layernorm": LlamaRMSNorm(), "q_proj": torch.nn.Linear(4, 4, bias=False)})
    decay, no_decay = decay_groups(model, 0.01)
    assert len(decay["params"]) == 1 and decay["params"][0] is model["q_proj"].weight
    assert no_decay["params"] == [model["input_layernorm"].weight]


def test_adamw_foreach_is_torchs_with_foreach() -> None:
    opt = make_optimizer("adamw_foreach", Block())
    assert type(opt) is torch.optim.AdamW and opt.defaults["foreach"] is True


def test_offload_packs_activations_but_not_weights() -> None:
    model = Block()
    x = torch.randn(16, 32)
    hooks = OffloadActivations(list(model.parameters()), min_bytes=256)
    activation = torch.randn(64, 32)
    packed = hooks.pack_hook(activation)
    assert isinstance(packed, tuple) and packed[1] is not activation
    assert torch.equal(hooks.unpack_hook(packed), activation)
    # a weight, a view of one, a small tensor, a broadcast
    for kept in (model.proj.weight, model.proj.weight.t(), torch.randn(8), torch.randn(1, 32).expand(64, 32)):
        assert hooks.pack_hook(kept) is kept

    # through a model's forward: the same gradients as without, and the activations went out
    reference = Block()
    reference.load_state_dict(model.state_dict())
    tally = offload_forward(model, min_bytes=256)
    model(x).square().sum().backward()
    reference(x).square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        assert p.grad is not None and torch.equal(p.grad, q.grad), name
    assert tally["tensors"] >= 3 and tally["bytes"] >= 3 * 16 * 32 * 4  # proj's output, norm's, relu's


@pytest.mark.parametrize(
    ("settings", "module", "package"),
    [
        ({"peft": "lora"}, "peft", "peft"),
        ({"optimizer": "adam8bit_manual"}, "bitsandbytes", "bitsandbytes"),
    ],
)
def test_a_missing_package_is_a_skip_that_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, settings: dict[str, Any], module: str, package: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import fails, as when it is not installed
    sc = Scenario(name="s", model="llama-tiny", **settings)
    with pytest.raises(Skip, match=rf"needs the {package} package .*; pip install {package}$"):
        check_runnable(sc, torch.device("cpu"))


@pytest.mark.parametrize(
    ("module", "technique", "package"),
    [("liger_kernel.transformers", "liger = true", "liger-kernel"), ("torchao.float8", "fp8 = true", "torchao")],
)
def test_gpu_only_packages_are_skips_too(
    monkeypatch: pytest.MonkeyPatch, module: str, technique: str, package: str
) -> None:
    monkeypatch.setitem(sys.modules, module.split(".")[0], None)
    with pytest.raises(Skip, match=rf"^{technique} needs the {package} package .*; pip install {package}$"):
        require(module, technique, package)


def test_an_optimizer_the_trainer_refuses_under_fsdp_is_bad_input() -> None:
    with pytest.raises(BadInput, match=r"optimizer = 'adam8bit_manual' is built by gpubench .* refuses under FSDP"):
        check(Scenario(name="s", model="llama-tiny", optimizer="adam8bit_manual", strategy="fsdp", gpus=2))
    check(
        Scenario(
            name="s", model="llama-tiny", optimizer="adam8bit_manual", strategy="fsdp", gpus=2, engine="accelerate"
        )
    )


def test_float8_skips_lm_head_and_odd_shapes() -> None:
    assert float8_eligible(torch.nn.Linear(128, 352), "model.layers.0.mlp.up_proj")
    assert not float8_eligible(torch.nn.Linear(128, 4096), "lm_head")
    assert not float8_eligible(torch.nn.Linear(100, 128), "model.layers.0.mlp.down_proj")


def test_a_4bit_weight_counts_as_its_unpacked_size() -> None:
    model = torch.nn.Linear(64, 32, bias=False)
    packed = torch.nn.Parameter(torch.zeros(1024, 1, dtype=torch.uint8), requires_grad=False)
    packed.quant_state = SimpleNamespace(shape=torch.Size([32, 64]))  # type: ignore[attr-defined]
    model.weight = packed
    assert count_parameters(model) == 32 * 64 and count_trainable(model) == 0


def test_causal_lm_labels_are_the_tokens() -> None:
    from bench.worker.dataset import make_dataset

    row = make_dataset(4, 16, 4096, 0, "memory", causal=True)[0]
    assert torch.equal(row["labels"], row["input_ids"]) and int(row["input_ids"].max()) < 4096


@pytest.mark.parametrize(
    ("peft", "fp8", "optimizer", "quantize_base"),
    [
        ("none", False, "adamw", "none"),
        ("lora", False, "adamw", "none"),
        ("none", True, "adamw", "none"),
        ("lora", True, "adamw", "none"),
        ("none", False, "adamw_8bit", "none"),
        ("none", False, "paged_adamw_8bit", "none"),
        ("none", True, "adam8bit_manual", "none"),
        ("lora", False, "adafactor", "nf4"),
    ],
)
def test_a_worker_blocks_the_cuda_at_import_packages_its_scenario_does_not_use(
    peft: str, fp8: bool, optimizer: str, quantize_base: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bitsandbytes, peft and torchao create a CUDA context on import (too early for the fork server):
    a worker blocks each one its scenario does not use; one that uses one goes to the server `--with`
    it. An 8-bit optimizer's worker imported bitsandbytes itself, 2.6-3.7 s of each start on an H100."""
    sc = Scenario(
        name="s", model="llama-tiny", precision="bf16", peft=peft, fp8=fp8, optimizer=optimizer,
        quantize_base=quantize_base,
    )  # fmt: skip
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"scenario": dataclasses.asdict(sc)}))
    for name in CUDA_AT_IMPORT:  # undone in reverse: the blocking None goes, an imported module comes back
        monkeypatch.setitem(sys.modules, name, sys.modules.get(name))
        monkeypatch.delitem(sys.modules, name)
    keep_cuda_imports_out(str(spec))
    blocked = {name for name in CUDA_AT_IMPORT if name in sys.modules and sys.modules[name] is None}
    used = ({"peft"} if peft == "lora" else set()) | ({"torchao"} if fp8 else set())
    if peft == "lora" or quantize_base != "none" or "8bit" in optimizer:
        used.add("bitsandbytes")
    assert blocked == set(CUDA_AT_IMPORT) - used
    assert set(sc.cuda_at_import) == used


def test_a_random_checkpoint_is_built_once_and_is_what_the_seed_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QLoRA's random base: the run's first worker builds and saves it, the others load that copy.
    The weights are those torch.manual_seed(seed) gives, the caller's RNG is untouched, and a partial
    copy left by a killed worker is never read."""
    from bench.worker import llm as llm_mod

    builds: list[str] = []
    real_build = llm_mod.build_random_on_cpu

    def counting_build(*args: Any, **kwargs: Any) -> Any:
        builds.append(args[0])
        return real_build(*args, **kwargs)

    monkeypatch.setattr(llm_mod, "build_random_on_cpu", counting_build)
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / ".llama-tiny-bfloat16-seed7-killed").mkdir()  # a worker killed while saving
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    first = llm_mod.random_checkpoint("llama-tiny", torch.bfloat16, 7, shared)
    assert torch.equal(torch.random.get_rng_state(), state)
    again = llm_mod.random_checkpoint("llama-tiny", torch.bfloat16, 7, shared)
    other_seed = llm_mod.random_checkpoint("llama-tiny", torch.bfloat16, 8, shared)
    assert first == again != other_seed and builds == ["llama-tiny", "llama-tiny"]
    torch.manual_seed(7)
    direct = real_build("llama-tiny", torch.bfloat16).state_dict()
    loaded = llm_mod.load_checkpoint(first, torch.device("cpu"), torch.bfloat16).state_dict()
    assert all(torch.equal(direct[k], loaded[k]) for k in loaded)
    assert sorted(p.name for p in shared.iterdir() if not p.name.startswith(".")) == [first.name, other_seed.name]


def test_a_whole_model_compile_runs_ligers_fused_loss_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dynamo cannot trace Liger's fused linear cross-entropy (its autograd Function fails under fake
    tensors on the H200), so with the whole model compiled the loss is a graph break: the function
    Liger's loss calls through its module runs outside the trace, is wrapped once, and still gives
    its result and gradient."""
    from bench.worker.llm import fused_loss_eager

    traced: list[bool] = []

    class FusedLoss(torch.autograd.Function):  # stands in for LigerFusedLinearCrossEntropyFunction
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            traced.append(torch.compiler.is_compiling())
            ctx.save_for_backward(x)
            return (x @ w).sum()

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, torch.Tensor]:
            (x,) = ctx.saved_tensors
            return None, x.sum(0, keepdim=True).T * grad

    def liger_fused_linear_cross_entropy(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return FusedLoss.apply(x, w)

    functional = SimpleNamespace(liger_fused_linear_cross_entropy=liger_fused_linear_cross_entropy)
    package = SimpleNamespace(functional=functional)
    monkeypatch.setitem(sys.modules, "liger_kernel", SimpleNamespace(transformers=package))
    monkeypatch.setitem(sys.modules, "liger_kernel.transformers", package)
    monkeypatch.setitem(sys.modules, "liger_kernel.transformers.functional", functional)

    def step(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:  # as Liger's loss_utils calls it
        return functional.liger_fused_linear_cross_entropy(torch.relu(x), w) * 2

    x, w = torch.ones(3, 2), torch.ones(2, 1, requires_grad=True)
    torch._dynamo.reset()
    torch.compile(step, backend="eager")(x, w)
    assert traced == [True]  # without the break, dynamo traces into the Function
    sc = Scenario(name="s", model="llama-tiny", liger=True, compile=True)
    fused_loss_eager(Scenario(name="s", model="llama-tiny", liger=True, compile=True, compile_scope="layers"))
    assert functional.liger_fused_linear_cross_entropy is liger_fused_linear_cross_entropy  # layers: no break
    fused_loss_eager(sc)
    fused_loss_eager(sc)  # once: a second call does not wrap the wrapper
    assert functional.liger_fused_linear_cross_entropy.__wrapped__ is liger_fused_linear_cross_entropy
    torch._dynamo.reset()
    loss = torch.compile(step, backend="eager")(x, w)
    loss.backward()
    assert traced[1:] == [False] and loss.item() == 12.0
    assert w.grad is not None and w.grad.flatten().tolist() == [6.0, 6.0]
