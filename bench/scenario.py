"""A scenario: one training configuration, fully resolved, validated on construction."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any

from .checks import MAX_SECONDS, bounded
from .errors import BadInput, did_you_mean

ENGINES = ("trainer", "accelerate")
PRECISIONS = ("fp32", "fp16", "bf16")
# our name -> the HF Trainer's `optim` string
OPTIMIZERS = {
    "adamw": "adamw_torch",
    "adamw_fused": "adamw_torch_fused",
    "adafactor": "adafactor",
    "adamw_8bit": "adamw_bnb_8bit",
    "sgd": "sgd",
}
ATTENTION = ("default", "eager", "sdpa")
# torch.compile over the whole model (what the Trainer's torch_compile does) or over each repeated
# transformer block ("regional compilation": one compiled graph reused by every layer).
COMPILE_SCOPES = ("model", "layers")
DATA_SOURCES = ("memory", "datasets")
# Faults the worker can inject on purpose, to test the harness itself (never used by shipped matrices).
FAULTS = ("none", "hang", "sigkill", "nan", "raise", "oom", "exit3", "slow")
# (least, most) of each whole-number setting: far beyond any benchmark, well inside what the worker
# and its libraries take (numpy seeds are below 2**32)
WHOLE_RANGES = {
    "batch_size": (1, 65_536),
    "grad_accum_steps": (1, 65_536),
    "samples": (1, 10_000_000),
    "seq_len": (1, 1_048_576),
    "dataloader_workers": (0, 1024),
    "warmup_steps": (0, 10_000_000),
    "seed": (0, 2**32 - 1),
}
TEXT_FIELDS = ("name", "description", "model")


@dataclass(frozen=True)
class Scenario:
    """One row of the ablation table. Units are in the field names; every field is data."""

    name: str
    description: str = ""
    model: str = "auto"  # auto: bert-large on a GPU, tiny on the CPU; or a preset or local dir
    engine: str = "trainer"
    batch_size: int = 4
    grad_accum_steps: int = 1
    grad_checkpointing: bool = False
    precision: str = "fp32"
    tf32: bool = False
    optimizer: str = "adamw"
    dataloader_workers: int = 0
    pin_memory: bool = False
    compile: bool = False
    compile_scope: str = "model"  # only with compile = true
    attn_implementation: str = "default"
    data_source: str = "memory"
    samples: int = 512
    seq_len: int = 512
    warmup_steps: int = 10
    seed: int = 42
    timeout_s: float | None = None
    inject_fault: str = "none"
    # where the scenario came from, for messages only (not compared, not saved as a setting)
    origin: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        def what(key: str, value: Any) -> str:
            where = f"{self.origin}: " if self.origin else ""
            return f"{where}scenario '{self.name}': {key} = {value!r}"

        def bad(key: str, value: Any, why: str) -> BadInput:
            return BadInput(f"{what(key, value)} {why}")

        for key in TEXT_FIELDS:
            if not isinstance(getattr(self, key), str):
                raise bad(key, getattr(self, key), "must be a string")
        if not self.name or not all(c.isalnum() or c in "-_." for c in self.name):
            raise bad("name", self.name, "must be letters, digits, '-', '_' or '.'")
        for key, choices in (
            ("engine", ENGINES),
            ("precision", PRECISIONS),
            ("optimizer", tuple(OPTIMIZERS)),
            ("attn_implementation", ATTENTION),
            ("compile_scope", COMPILE_SCOPES),
            ("data_source", DATA_SOURCES),
            ("inject_fault", FAULTS),
        ):
            value = getattr(self, key)
            if not isinstance(value, str) or value not in choices:
                hint = did_you_mean(str(value), choices)
                why = f"is not one of {', '.join(choices)}" + (f"; {hint}" if hint else "")
                raise bad(key, value, why)
        for key, (least, most) in WHOLE_RANGES.items():
            bounded(getattr(self, key), what(key, getattr(self, key)), least, most, whole=True)
        for key in ("grad_checkpointing", "tf32", "pin_memory", "compile"):
            if not isinstance(getattr(self, key), bool):
                raise bad(key, getattr(self, key), "must be true or false")
        if self.compile_scope != "model" and not self.compile:
            raise bad("compile_scope", self.compile_scope, "needs compile = true")
        if self.timeout_s is not None:
            bounded(self.timeout_s, what("timeout_s", self.timeout_s), 0, MAX_SECONDS, above=True, unit="seconds")
        if not self.model.strip():
            raise bad("model", self.model, "must be a preset name or a local directory")
        if self.optimizer_steps <= self.warmup_steps:
            raise bad(
                "warmup_steps",
                self.warmup_steps,
                f"leaves no timed steps: {self.samples} samples at batch {self.batch_size} x "
                f"accumulation {self.grad_accum_steps} make only {self.optimizer_steps} optimizer "
                "steps; raise samples or lower warmup_steps",
            )

    # -- derived figures ------------------------------------------------------------------
    @property
    def samples_per_step(self) -> int:
        """Samples in one optimizer step (batch x accumulation)."""
        return self.batch_size * self.grad_accum_steps

    @property
    def optimizer_steps(self) -> int:
        """Optimizer steps in one epoch; the last partial batch is dropped (static shapes)."""
        return self.samples // self.samples_per_step

    @property
    def needs_cuda(self) -> str | None:
        """Why this scenario cannot run without CUDA, or None."""
        if self.tf32:
            return "tf32 is a CUDA matmul mode (Ampere or newer); it has no meaning on the CPU"
        return None

    def settings(self) -> dict[str, Any]:
        """The fields that define the run (everything but the origin)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "origin"}

    def replace(self, **changes: Any) -> Scenario:
        return dataclasses.replace(self, **changes)


SETTING_KEYS: tuple[str, ...] = tuple(f.name for f in fields(Scenario) if f.name != "origin")
