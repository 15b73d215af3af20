"""A scenario: one training configuration, fully resolved, validated on construction."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any

from ..checks import MAX_SECONDS, bounded, host_port
from ..errors import BadInput, did_you_mean
from ..safetext import control_char
from .optimizer_names import BITSANDBYTES_OPTIMIZERS

# Decoder LLM techniques (docs/llm.md)
PEFTS = ("none", "lora")
QUANTIZE_BASES = ("none", "int8", "nf4")  # bitsandbytes' LLM.int8() and 4-bit NormalFloat base weights
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")  # torch.compile's `mode`
MAX_LORA_RANK = 65_536
# Packages whose import creates a CUDA context: bitsandbytes (it asks for the compute capability),
# peft (it imports bitsandbytes) and torchao (its Triton check asks for the device's properties). The
# fork server must not, so they are kept out of its imports and of every worker that does not use
# them; a worker that does is forked by the server that preloads its set of them (`--with`), or starts
# afresh. bitsandbytes joined the list when 8-bit AdamW's workers were seen importing it each time
# (2.6-3.7 s of every such probe's start on an H100, docs/recommend.md).
CUDA_AT_IMPORT = ("peft", "torchao", "bitsandbytes")
ATTENTION = ("default", "eager", "sdpa")
# transformers' implementations of a mixture-of-experts layer (bench/families/moe.py); default: its own choice
EXPERTS_IMPLEMENTATIONS = ("default", "eager", "batched_mm", "grouped_mm")
# torch.compile over the whole model (what the Trainer's torch_compile does) or over each repeated
# transformer block ("regional compilation": one compiled graph reused by every layer).
COMPILE_SCOPES = ("model", "layers")
DATA_SOURCES = ("memory", "datasets")
# Faults the worker can inject on purpose, to test the harness itself (never used by shipped matrices).
FAULTS = ("none", "hang", "sigkill", "nan", "raise", "oom", "exit3", "slow")
# Data parallelism through the engines' own integrations (docs/multi-gpu.md).
STRATEGIES = ("none", "ddp", "fsdp", "deepspeed")
# FSDP2's reshard_after_forward: full = True (ZeRO-3-like), grad_op = False (ZeRO-2-like).
FSDP_SHARDINGS = ("full", "grad_op")
OFFLOADS = ("none", "optimizer", "params")
# The steady-state window (bench/worker/window.py): the epoch after warm-up, "auto" (until the mean
# step time is known within a stated interval), or a whole number of optimizer steps.
WINDOW_MODES = ("epoch", "auto")
# The learning rate's schedule over the epoch, the same in both engines (transformers' get_scheduler,
# which the Trainer calls): constant, linear decay to 0 (TrainingArguments' default), or cosine.
LR_SCHEDULES = ("constant", "linear", "cosine")
DEFAULT_LEARNING_RATE = 5e-5  # both engines' default: TrainingArguments' learning_rate
MAX_LEARNING_RATE = 1000.0  # far beyond any that trains; a typo of units, not a setting
LOSS_CURVE_POINTS = 100  # loss_every_steps = 0: about this many points over the epoch
MAX_WINDOW_STEPS = 10_000_000
MAX_GPUS_PER_NODE = 64
MAX_NODES = 1024
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
    "profile_steps": (0, 1000),  # a trace of more steps than this is hundreds of MB
    "eval_samples": (0, 10_000_000),
    "lr_warmup_steps": (0, 10_000_000),
    "loss_every_steps": (0, 10_000_000),
    "checkpoint_every": (0, 65_536),
}
MAX_MEMORY_CAP_MB = 1024.0**3  # a petabyte, as --gpu-memory (bench/predict/predictions.py)
TEXT_FIELDS = ("name", "description", "model")
MAX_NAME_BYTES = 200  # a file name holds 255 bytes: NAME-rN.log, and the work folder NAME-rN


@dataclass(frozen=True)
class Scenario:
    """One row of the ablation table. Units are in the field names; every field is data."""

    name: str
    description: str = ""
    model: str = "auto"  # auto: bert-large on a GPU, tiny on the CPU; or a preset, local dir, config or hub id
    task: str = "auto"  # auto: what the config's architectures name, else the family's (bench/families)
    engine: str = "trainer"
    batch_size: int = 4
    grad_accum_steps: int = 1
    grad_checkpointing: bool = False
    # 0: off; k >= 2: checkpoint every k-th transformer layer (layers 0, k, 2k, ...: bench/worker/checkpointing.py);
    # every layer is grad_checkpointing = true
    checkpoint_every: int = 0
    precision: str = "fp32"
    tf32: bool = False
    optimizer: str = "adamw"
    dataloader_workers: int = 0
    pin_memory: bool = False
    compile: bool = False
    compile_scope: str = "model"  # only with compile = true
    attn_implementation: str = "default"
    data_source: str = "memory"  # the container: a torch Dataset in memory, or a datasets.Dataset
    data: str = "random"  # what is in it: a kind of bench/planner/datakinds.py, "NAME" or "NAME:PATH" (docs/data.md)
    tokenizer: str = ""  # with text data: a local tokenizer folder; "" is the byte-level fallback
    data_column: str = "text"  # with data = "saved:PATH": the column holding text or token ids
    samples: int = 512
    seq_len: int = 512
    warmup_steps: int = 10
    window: int | str = "epoch"  # "epoch" | "auto" | optimizer steps
    profile_steps: int = 0  # optimizer steps after the window under torch.profiler (bench/worker/profiling.py)
    profile_memory: bool = False  # with profile_steps: an allocator snapshot too (CUDA)
    eval_samples: int = 0  # held-out samples scored after training (accuracy, loss: bench/worker/evaluate.py)
    compile_mode: str = "default"  # torch.compile's mode, with compile = true
    # -- decoder LLM techniques (a Llama-style model; docs/llm.md)
    peft: str = "none"  # "lora": train low-rank adapters on a frozen base
    lora_rank: int = 16
    lora_alpha: int = 32
    lora_targets: str = "all-linear"  # PEFT's target_modules: "all-linear" or names, comma-separated
    quantize_base: str = "none"  # the frozen base's weights through bitsandbytes (QLoRA: nf4)
    liger: bool = False  # Liger's fused Triton kernels (RMSNorm, RoPE, SwiGLU, fused linear cross-entropy)
    fp8: bool = False  # float8 matmuls for the nn.Linear layers (torchao's float8 training)
    activation_offload: bool = False  # tensors saved for backward go to pinned CPU memory
    experts_implementation: str = "default"  # a mixture-of-experts model's expert kernels (transformers')
    seed: int = 42
    # -- what is trained: the learning rate and its schedule (docs/parity.md); `lr_warmup_steps` ramps the
    # learning rate up and is not `warmup_steps` (the steps kept out of the timed window)
    learning_rate: float | None = None  # None: the engines' default, DEFAULT_LEARNING_RATE
    lr_schedule: str = "linear"
    lr_warmup_steps: int = 0
    loss_every_steps: int = 0  # the loss curve: one point per this many optimizer steps; 0: LOSS_CURVE_POINTS an epoch
    timeout_s: float | None = None
    # the GPU memory the worker may use, in MB: caps torch's allocator (its reserved memory) on a
    # GPU; on the CPU the memory model's predicted peak stands in for an allocation (bench/worker/memcap.py)
    memory_cap_mb: float | None = None
    inject_fault: str = "none"
    fault_rank: int = -1  # with inject_fault in a multi-process scenario: only this rank (-1: every rank)
    # -- beyond one GPU: processes per node ("all": every visible GPU; on the CPU, gloo processes)
    gpus: int | str = 1
    strategy: str = "none"
    zero_stage: int = 0  # 1-3 with strategy = "deepspeed"; 0 otherwise
    fsdp_sharding: str = "full"
    offload: str = "none"
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str = ""  # host:port of node 0, with nnodes > 1
    # -- your own script: an argument list (never a shell) that gpubench runs instead of its worker;
    # the script calls gpubench's step hook (bench/hook/, docs/your-script.md)
    command: tuple[str, ...] = ()
    # -- a device mesh under FSDP2 (bench/recipe/mesh.py; docs/multi-gpu.md): tensor and context parallel
    # ranks, data-parallel replicas (HSDP) and shards; dp_shard "auto": what the others leave
    tp: int = 1
    cp: int = 1
    dp_replicate: int = 1
    dp_shard: int | str = "auto"
    # where the scenario came from, for messages only (not compared, not saved as a setting)
    origin: str = field(default="", compare=False, repr=False)

    def what(self, key: str, value: Any) -> str:
        """Where a message about `key` points: the origin, the scenario, the setting and its value."""
        where = f"{self.origin}: " if self.origin else ""
        return f"{where}scenario '{self.name}': {key} = {value!r}"

    def bad(self, key: str, value: Any, why: str) -> BadInput:
        """The one error of a setting this scenario (or a rule of bench/planner/rules.py) refuses."""
        return BadInput(f"{self.what(key, value)} {why}")

    def __post_init__(self) -> None:
        """The fields' types, bounds and combinations; what the registries refuse (engines, precisions,
        data kinds, families, tasks, optimizers, the mesh) is bench/planner/rules.py's, at load and plan time."""
        what, bad = self.what, self.bad

        if isinstance(self.command, list):  # a matrix's TOML array, scenarios.json's list
            object.__setattr__(self, "command", tuple(self.command))
        for key in TEXT_FIELDS:
            if not isinstance(getattr(self, key), str):
                raise bad(key, getattr(self, key), "must be a string")
        for f in fields(self):  # a name, a path or a description ends up in scripts, file names, terminals
            value = getattr(self, f.name)
            if f.name != "origin" and isinstance(value, str) and control_char(value) is not None:
                raise bad(f.name, value, f"holds a control character ({control_char(value)})")
        if not self.name or not all(c.isalnum() or c in "-_." for c in self.name):
            raise bad("name", self.name, "must be letters, digits, '-', '_' or '.'")
        if len(self.name.encode("utf-8")) > MAX_NAME_BYTES:
            raise bad(
                "name",
                self.name,
                f"is {len(self.name.encode('utf-8'))} bytes in UTF-8; at most {MAX_NAME_BYTES} fit in its log's "
                "file name (NAME-rN.log)",
            )
        for key, choices in (
            ("attn_implementation", ATTENTION),
            ("compile_scope", COMPILE_SCOPES),
            ("data_source", DATA_SOURCES),
            ("inject_fault", FAULTS),
            ("compile_mode", COMPILE_MODES),
            ("peft", PEFTS),
            ("quantize_base", QUANTIZE_BASES),
            ("experts_implementation", EXPERTS_IMPLEMENTATIONS),
            ("lr_schedule", LR_SCHEDULES),
        ):
            value = getattr(self, key)
            if not isinstance(value, str) or value not in choices:
                hint = did_you_mean(str(value), choices)
                why = f"is not one of {', '.join(choices)}" + (f"; {hint}" if hint else "")
                raise bad(key, value, why)
        for key, (least, most) in WHOLE_RANGES.items():
            bounded(getattr(self, key), what(key, getattr(self, key)), least, most, whole=True)
        for key in (
            "grad_checkpointing",
            "tf32",
            "pin_memory",
            "compile",
            "liger",
            "fp8",
            "activation_offload",
            "profile_memory",
        ):
            if not isinstance(getattr(self, key), bool):
                raise bad(key, getattr(self, key), "must be true or false")
        if self.compile_scope != "model" and not self.compile:
            raise bad("compile_scope", self.compile_scope, "needs compile = true")
        if self.compile_mode != "default" and not self.compile:
            raise bad("compile_mode", self.compile_mode, "needs compile = true")
        if self.learning_rate is not None:
            bounded(self.learning_rate, what("learning_rate", self.learning_rate), 0, MAX_LEARNING_RATE, above=True)
        if self.timeout_s is not None:
            bounded(self.timeout_s, what("timeout_s", self.timeout_s), 0, MAX_SECONDS, above=True, unit="seconds")
        if self.memory_cap_mb is not None:
            bounded(
                self.memory_cap_mb,
                what("memory_cap_mb", self.memory_cap_mb),
                0,
                MAX_MEMORY_CAP_MB,
                above=True,
                unit="MB",
            )
        if not self.model.strip():
            raise bad("model", self.model, "must be a preset name or a local directory")
        if self.command:
            self._check_command(bad)
            return
        self._check_parallel(bad)
        self._check_llm(bad)
        if self.optimizer_steps <= self.warmup_steps:
            raise bad(
                "warmup_steps",
                self.warmup_steps,
                f"leaves no timed steps: {self.samples} samples at batch {self.batch_size} x "
                f"accumulation {self.grad_accum_steps} make only {self.optimizer_steps} optimizer "
                "steps; raise samples or lower warmup_steps",
            )
        self._check_window(bad)

    def _check_checkpoint_every(self, bad: Any) -> None:
        """checkpoint_every: k >= 2, alone (the family's layers: bench/planner/rules.py)."""
        k = self.checkpoint_every
        if k == 0:
            return
        if k == 1:
            raise bad("checkpoint_every", k, "1 is every layer: set grad_checkpointing = true instead")
        if self.grad_checkpointing or self.activation_offload:
            other = "grad_checkpointing" if self.grad_checkpointing else "activation_offload"
            raise bad("checkpoint_every", k, f"cannot be combined with {other} = true: choose one")

    def _check_command(self, bad: Any) -> None:
        """A command scenario: an argument list; gpubench's model, data and engine settings do not
        apply (the script has its own), only the window, warm-up, timeout and GPUs do."""
        if not isinstance(self.command, tuple) or not all(isinstance(a, str) and a for a in self.command):
            raise bad("command", self.command, 'must be a list of non-empty strings, e.g. ["torchrun", "train.py"]')
        if self.strategy != "none" or self.nnodes != 1:
            raise bad(
                "strategy" if self.strategy != "none" else "nnodes",
                self.strategy if self.strategy != "none" else self.nnodes,
                "does not apply to a command: it starts its own processes (torchrun in the command); "
                "gpus says how many GPUs it sees",
            )
        if self.gpus != "all" and not _whole(self.gpus, 1, MAX_GPUS_PER_NODE):
            raise bad("gpus", self.gpus, f'must be a whole number from 1 to {MAX_GPUS_PER_NODE}, or "all"')
        for key, off in (("profile_steps", 0), ("inject_fault", "none"), ("eval_samples", 0)):
            if getattr(self, key) != off:
                raise bad(key, getattr(self, key), "is the built-in worker's; a command scenario has no such step")
        if not (
            (isinstance(self.window, str) and self.window in WINDOW_MODES) or _whole(self.window, 1, MAX_WINDOW_STEPS)
        ):
            raise bad("window", self.window, 'must be "epoch", "auto" or a whole number of optimizer steps (1 or more)')

    def _check_window(self, bad: Any) -> None:
        if not (
            (isinstance(self.window, str) and self.window in WINDOW_MODES) or _whole(self.window, 1, MAX_WINDOW_STEPS)
        ):
            raise bad("window", self.window, 'must be "epoch", "auto" or a whole number of optimizer steps (1 or more)')
        if self.profile_memory and not self.profile_steps:
            raise bad("profile_memory", self.profile_memory, "needs profile_steps (the snapshot covers them)")
        if (
            self.profile_steps
            and self.warmup_steps + max(self.window if isinstance(self.window, int) else 1, 1) + (self.profile_steps)
            > self.optimizer_steps
        ):
            raise bad(
                "profile_steps",
                self.profile_steps,
                f"does not fit in the epoch: {self.warmup_steps} warm-up + at least "
                f"{self.window if isinstance(self.window, int) else 1} timed + {self.profile_steps} profiled steps, "
                f"but only {self.optimizer_steps} optimizer steps; raise samples or lower profile_steps",
            )
        if isinstance(self.window, int) and self.warmup_steps + self.window > self.optimizer_steps:
            raise bad(
                "window",
                self.window,
                f"does not fit in the epoch: {self.warmup_steps} warm-up + {self.window} timed steps, but "
                f"{self.samples} samples at batch {self.batch_size} x accumulation {self.grad_accum_steps} make "
                f"only {self.optimizer_steps} optimizer steps; raise samples or lower window",
            )

    def _check_llm(self, bad: Any) -> None:
        """The decoder techniques: each in range, on a model that has them, none contradicting another."""
        if not _whole(self.lora_rank, 1, MAX_LORA_RANK):
            raise bad("lora_rank", self.lora_rank, f"must be a whole number from 1 to {MAX_LORA_RANK}")
        if not _whole(self.lora_alpha, 1, 1_000_000):
            raise bad("lora_alpha", self.lora_alpha, "must be a whole number from 1 to 1000000")
        if not isinstance(self.lora_targets, str) or not _module_names(self.lora_targets):
            raise bad(
                "lora_targets",
                self.lora_targets,
                'must be "all-linear" or module names separated by commas (q_proj,v_proj)',
            )
        if self.peft == "none":
            for key, default in (("lora_rank", 16), ("lora_alpha", 32), ("lora_targets", "all-linear")):
                if getattr(self, key) != default:
                    raise bad(key, getattr(self, key), 'needs peft = "lora"')
            if self.quantize_base != "none":
                raise bad(
                    "quantize_base",
                    self.quantize_base,
                    'needs peft = "lora": quantized base weights cannot be trained, only adapters on them',
                )
        self._check_checkpoint_every(bad)
        if self.fp8:  # and precision = "bf16": bench/planner/rules.py, where an engine's spelling is resolved
            if self.quantize_base != "none":
                raise bad("fp8", True, "cannot be combined with quantize_base: the base's matmuls are bitsandbytes'")
            if self.strategy == "deepspeed":
                raise bad("fp8", True, "is not wired through DeepSpeed here; use ddp or fsdp")
        if self.quantize_base != "none" and self.strategy in ("fsdp", "deepspeed"):
            raise bad(
                "quantize_base", self.quantize_base, "cannot be sharded here: bitsandbytes' layers need ddp or none"
            )
        if self.activation_offload and self.strategy == "deepspeed":
            raise bad("activation_offload", True, "is not combined with DeepSpeed here (it has its own offload)")

    def _check_parallel(self, bad: Any) -> None:
        """The multi-process fields: each in range, and no two that contradict each other."""
        for key, choices in (("strategy", STRATEGIES), ("offload", OFFLOADS)):
            if getattr(self, key) not in choices:
                raise bad(key, getattr(self, key), f"is not one of {', '.join(choices)}")
        if self.fsdp_sharding == "hybrid":
            raise bad(
                "fsdp_sharding",
                "hybrid",
                "is not a sharding here: HSDP is dp_replicate = N (replicas) x dp_shard (shards) on a 2-D mesh",
            )
        if self.fsdp_sharding not in FSDP_SHARDINGS:
            raise bad("fsdp_sharding", self.fsdp_sharding, f"is not one of {', '.join(FSDP_SHARDINGS)}")
        if self.gpus != "all" and not _whole(self.gpus, 1, MAX_GPUS_PER_NODE):
            raise bad("gpus", self.gpus, f'must be a whole number from 1 to {MAX_GPUS_PER_NODE}, or "all"')
        if not _whole(self.nnodes, 1, MAX_NODES):
            raise bad("nnodes", self.nnodes, f"must be a whole number from 1 to {MAX_NODES}")
        if not _whole(self.node_rank, 0, self.nnodes - 1):
            raise bad("node_rank", self.node_rank, f"must be a whole number from 0 to nnodes - 1 ({self.nnodes - 1})")
        if not _whole(self.zero_stage, 0, 3):
            raise bad("zero_stage", self.zero_stage, 'must be 1, 2 or 3 (with strategy = "deepspeed")')
        if not _whole(self.fault_rank, -1, MAX_GPUS_PER_NODE * MAX_NODES):
            raise bad("fault_rank", self.fault_rank, "must be a rank (0 or more), or -1 for every rank")
        if not isinstance(self.rdzv_endpoint, str) or (self.rdzv_endpoint and not _endpoint(self.rdzv_endpoint)):
            raise bad("rdzv_endpoint", self.rdzv_endpoint, "must be HOST:PORT (port 1-65535)")
        if self.strategy == "none" and (self.gpus != 1 or self.nnodes != 1):
            raise bad(
                "strategy", "none", "runs one process on one GPU; choose ddp, fsdp or deepspeed for gpus/nnodes above 1"
            )
        if self.strategy == "deepspeed" and self.zero_stage == 0:
            raise bad("zero_stage", 0, 'must be 1, 2 or 3 with strategy = "deepspeed"')
        if self.strategy != "deepspeed" and self.zero_stage != 0:
            raise bad("zero_stage", self.zero_stage, 'needs strategy = "deepspeed"')
        if self.strategy != "fsdp" and self.fsdp_sharding != "full":
            raise bad("fsdp_sharding", self.fsdp_sharding, 'needs strategy = "fsdp"')
        if self.offload != "none":
            why = {
                "none": "needs a strategy that offloads: fsdp or deepspeed",
                "ddp": "needs a strategy that offloads: fsdp or deepspeed (DDP keeps everything on the GPU)",
                "fsdp": 'with fsdp must be "params": FSDP\'s CPU offload moves parameters, gradients and the '
                "optimizer step together"
                if self.offload != "params"
                else "",
                "deepspeed": "needs zero_stage = 3 (ZeRO offloads parameters only at stage 3)"
                if self.offload == "params" and self.zero_stage != 3
                else "",
            }[self.strategy]
            if why:
                raise bad("offload", self.offload, why)
        if self.nnodes > 1 and not self.rdzv_endpoint:
            raise bad("nnodes", self.nnodes, 'needs rdzv_endpoint = "HOST:PORT" of node 0 (the same on every node)')
        if self.fault_rank >= 0 and self.inject_fault == "none":
            raise bad("fault_rank", self.fault_rank, "needs inject_fault")
        if self.fault_rank >= 0 and isinstance(self.gpus, int) and self.fault_rank >= self.gpus * self.nnodes:
            raise bad(
                "fault_rank",
                self.fault_rank,
                f"is not a rank of the job: gpus x nnodes = {self.gpus * self.nnodes} ranks (0 to "
                f"{self.gpus * self.nnodes - 1})",
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
    def effective_learning_rate(self) -> float:
        """The learning rate the engines train with: the scenario's, else their default."""
        return float(self.learning_rate) if self.learning_rate is not None else DEFAULT_LEARNING_RATE

    @property
    def loss_every(self) -> int:
        """Optimizer steps per point of the loss curve (loss_every_steps, or about LOSS_CURVE_POINTS an epoch)."""
        return self.loss_every_steps or max(1, self.optimizer_steps // LOSS_CURVE_POINTS)

    @property
    def distributed(self) -> bool:
        """Started by torchrun (a process group), not by the single-process fork server."""
        return self.strategy != "none"

    @property
    def is_command(self) -> bool:
        """Runs the user's own command (timed by the step hook) instead of gpubench's worker."""
        return bool(self.command)

    @property
    def world_size(self) -> int:
        """Processes in the whole job; `gpus` must be resolved (not "all") first."""
        if not isinstance(self.gpus, int):
            raise ValueError(f"scenario '{self.name}': gpus = {self.gpus!r} is not resolved to a number yet")
        return self.gpus * self.nnodes

    @property
    def cuda_at_import(self) -> tuple[str, ...]:
        """The packages of CUDA_AT_IMPORT this scenario imports."""
        return cuda_at_import(vars(self))

    def settings(self) -> dict[str, Any]:
        """The fields that define the run (everything but the origin)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "origin"}

    def replace(self, **changes: Any) -> Scenario:
        return dataclasses.replace(self, **changes)


def _whole(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _module_names(value: str) -> bool:
    if value == "all-linear":
        return True
    names = value.split(",")
    return all(n and all(c.isalnum() or c in "_." for c in n) for n in names)


def _endpoint(value: str) -> bool:
    return host_port(value)


SETTING_KEYS: tuple[str, ...] = tuple(f.name for f in fields(Scenario) if f.name != "origin")


def cuda_at_import(scenario: dict[str, Any]) -> tuple[str, ...]:
    """The packages of CUDA_AT_IMPORT a scenario's fields (as in a worker's spec) import: peft for
    LoRA, torchao for fp8, bitsandbytes for LoRA (peft imports it), a quantized base or an 8-bit
    optimizer."""
    peft = scenario.get("peft", "none") != "none"
    used = {
        "peft": peft,
        "torchao": bool(scenario.get("fp8", False)),
        "bitsandbytes": peft
        or scenario.get("quantize_base", "none") != "none"
        or scenario.get("optimizer") in BITSANDBYTES_OPTIMIZERS,
    }
    return tuple(name for name in CUDA_AT_IMPORT if used[name])
