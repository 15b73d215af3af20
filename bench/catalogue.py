"""The column catalogue: every results.csv column once, in its order, with its unit, its group, its
meaning, how a multi-process job's figure comes from its ranks' and, for a judged figure, how it is
judged. Everything else is read off it: bench/results/columns.py's groups and checks, bench/worker/
ranks.py's rank rules, bench/metrics.py's METRICS (compare, history, the summary and the report),
the window probes' columns (bench/measure/probes.py) and docs/columns.md's tables
(`python tools/columns_doc.py`). A judged figure is one row here plus the code that measures it
(docs/extending.md). Torch-free data: `gpubench --help` reads it.

`ranks` (RANK_RULES) says how a job of several processes gets the figure from its ranks' (bench/
worker/ranks.py applies it; the parent's rules are the parent's own measurement): None is rank 0's.
"""

from __future__ import annotations

from dataclasses import dataclass

from .recipe.scenario import SETTING_KEYS

# the kernel-time categories of a profile, in the columns' order (bench/measure/kernels.py holds the
# name patterns that sort a kernel into one; idle is the step time no kernel covered)
KERNEL_NAMES = ("gemm", "attention", "elementwise", "optimizer", "copy", "comm", "idle")

# The groups in the row's order; docs/columns.md's tables are written per group.
GROUPS = (
    "id",  # what keys the row and how it ended
    "setting",  # the scenario's settings as the run resolved them (bench/recipe/scenario.py SETTING_KEYS)
    "ran",  # what ran, read off the built model (bench/worker/what_ran.py)
    "speed",
    "parallel",  # multi-process scenarios (docs/multi-gpu.md); samples_per_s is then the job's
    "memory",
    "gpu",  # the GPU over the timed window (bench/measure/gpuwatch.py), then what its energy buys
    "profile",  # profile_steps (bench/worker/profiling.py): per profiled step, after the window
    "predicted",  # bench/memory: arithmetic on the model config (docs/memory.md)
    "flop",
    "lora",  # peft = "lora": what the adapters sit on, read off the trained model (bench/worker/llm.py)
    "training",  # what was trained and how the loss went (docs/parity.md)
    "other",
)
# rule -> (what a judged figure calls it (bench/metrics.py RANK_AGGREGATIONS), what it does)
RANK_RULES: dict[str, tuple[str | None, str]] = {
    "rank0": ("rank0", "rank 0's"),
    "sum": ("sum", "the ranks' sum"),
    "min": ("min", "the lowest rank's"),
    "max": ("max", "the largest rank's"),
    "mean": ("mean", "the ranks' mean"),
    "slowest": ("slowest", "the rank's whose median step was longest (a step ends when its slowest rank is done)"),
    "all": (None, "true when every rank's is"),
    "count": ("sum", "the ranks' counts added"),
    "union": (None, "every event any rank saw, ';'-joined"),
    # the job's own arithmetic (bench/worker/ranks.py job_figures names each column)
    "replicas": ("sum", "the data-parallel replicas' work over the job's one window"),
    "engine": (
        "sum",
        "the replicas' sum where the engine's figure is per rank, else rank 0's (bench/recipe/engine_registry.py)",
    ),
    "job": (None, "the job's, from every rank"),
    # the parent's own measurement, not combine_ranks'
    "parent-max": ("max", "the parent's reading of the largest GPU"),
    "parent-sum": ("sum", "the parent's, from every GPU's energy summed over the job's samples"),
}
JOB_RULES = ("replicas", "engine", "job")  # computed by name in bench/worker/ranks.py
PARENT_RULES = ("parent-max", "parent-sum")


@dataclass(frozen=True)
class Judged:
    """How a judged figure is judged (bench/metrics.py makes a Metric of it and its column)."""

    order: int  # its place in every list of metrics (compare's rows, history's columns, the summary's)
    direction: str  # "higher" or "lower" is better
    default_threshold_pct: float | None  # the smallest change that counts; None: not judged on its size
    threshold: str | None  # the group whose threshold applies ("speed", "memory", "energy")
    judged_in: frozenset[str]  # bench.metrics.PLACES
    label: str  # its short name in terminal tables
    decimals: int | None  # shown with this many decimals; None: 4 significant digits
    reads: tuple[str, ...] = ()  # the other results columns it reads, after its own
    best: str = ""  # the report's finding on it ("Fastest"); judged in the report only
    better: str = ""  # the comparative the findings use ("faster")


@dataclass(frozen=True)
class Column:
    """One results.csv column."""

    name: str
    unit: str  # "" for a word, a flag, a count or a ratio
    group: str  # GROUPS
    doc: str = ""  # its meaning (docs/columns.md); "": the row above's (one table row for several columns)
    ranks: str | None = None  # RANK_RULES; None: rank 0's, or not a figure of the ranks
    of: str = ""  # the ranks' column the rule reads where not its own (a sum of the ranks' peaks)
    metric: Judged | None = None  # judged: compare, history, the summary, the report (bench/metrics.py)
    text: bool = False  # words or JSON, not a number (not checked as a number when read)
    signed: bool = False  # may be below zero (every other number is a count, a time, a size or a rate)
    nonfinite: bool = False  # may be NaN or infinite (a diverged row's loss)
    per_rank: bool = False  # kept per rank in rank_figures
    probe: str = ""  # the window probe that measures it (bench/measure/probes.py), its columns in order

    def __post_init__(self) -> None:
        problems = []
        if self.group not in GROUPS:
            problems.append(f"group {self.group!r} is not one of {', '.join(GROUPS)}")
        if self.ranks is not None and self.ranks not in RANK_RULES:
            problems.append(f"ranks {self.ranks!r} is not one of {', '.join(RANK_RULES)}")
        if self.metric is not None and RANK_RULES.get(self.ranks or "", (None,))[0] is None:
            problems.append("a judged figure says how its ranks combine (ranks=, a rule with an aggregation)")
        if self.of and self.ranks not in ("sum", "min", "max", "mean"):
            problems.append("of= goes with a sum, min, max or mean rule")
        if problems:
            raise ValueError(f"column {self.name!r}: " + "; ".join(problems))


ALL_PLACES = frozenset({"compare", "history", "summary", "report"})
SETTINGS_DOC = (
    "the scenario's settings as the run resolved them ([matrices.md](matrices.md), [multi-gpu.md](multi-gpu.md); "
    '`learning_rate` empty: the engines\' default; `memory_cap_mb`: [fit.md](fit.md)); `gpus = "all"` is saved as '
    "the number it meant; `data` is the data that ran ([data.md](data.md): `random`, a synthetic kind, or a kind "
    "with its file's absolute path), so rows on other data are another scenario to `compare` and `history`"
)
SETTING_DOCS = {
    "command": 'a command scenario\'s argument list, as JSON (`["torchrun", "train.py"]`); empty for a built-in '
    "scenario ([your-script.md](your-script.md))",
}
SETTING_UNITS = {
    "batch_size": "samples",
    "samples": "samples",
    "seq_len": "tokens",
    "timeout_s": "s",
    "memory_cap_mb": "MB",
}
# Numeric settings, checked like the figures when a results.csv is read.
NUMERIC_SETTINGS = (
    "batch_size",
    "grad_accum_steps",
    "dataloader_workers",
    "samples",
    "seq_len",
    "warmup_steps",
    "seed",
    "timeout_s",
    "memory_cap_mb",
    "profile_steps",
    "learning_rate",
    "lr_warmup_steps",
    "loss_every_steps",
)
NOT_A_COLUMN = ("name", "inject_fault", "fault_rank", "rdzv_endpoint")  # scenario keys a row does not hold


def _settings() -> tuple[Column, ...]:
    keys = [k for k in SETTING_KEYS if k not in NOT_A_COLUMN]
    return tuple(
        Column(
            k, SETTING_UNITS.get(k, ""), "setting", SETTING_DOCS.get(k, SETTINGS_DOC), text=k not in NUMERIC_SETTINGS
        )
        for k in keys
    )


def _kernels() -> tuple[Column, ...]:
    """Kernel time per step by category (bench/measure/kernels.py NAMES, its order), and idle."""
    doc = (
        "kernel time per step by category (on the CPU: operators' self time), and the wall time no kernel "
        "covered (`bench/measure/kernels.py` has the name patterns)"
    )
    return tuple(Column(f"prof_{name}_ms", "ms", "profile", doc) for name in KERNEL_NAMES)


PEAK_DOC = (
    "the GPU's dense peak for the format the matmuls ran in (fp8 rows: the FP8 peak; QLoRA: bf16, its matmuls run "
    "after dequantizing), and where that figure comes from, or why there is none"
)
PREDICTED_DOC = (
    "the memory model's prediction beside the measurement, each explained in "
    "[memory.md](memory.md#predicted-beside-measured)"
)


# -- the judged figures: how each is judged (its column below says its name, unit and rank rule)
SAMPLES = Judged(
    order=1,
    direction="higher",
    default_threshold_pct=5.0,
    threshold="speed",
    judged_in=ALL_PLACES,
    label="samples/s",
    decimals=2,
    best="Fastest",
    better="faster",
)
STEP = Judged(
    order=2,
    direction="lower",
    default_threshold_pct=5.0,
    threshold="speed",
    judged_in=frozenset({"history"}),  # compare shows it beside samples_per_s
    label="step ms",
    decimals=2,
)
PEAK = Judged(
    order=3,
    direction="lower",
    default_threshold_pct=2.0,
    threshold="memory",
    judged_in=ALL_PLACES,
    reads=("peak_mem_source",),  # compare refuses a scenario whose source differs
    label="peak MB",
    decimals=0,
    best="Lowest peak memory",
    better="leaner",
)
LOSS = Judged(
    order=4,
    direction="lower",
    default_threshold_pct=None,  # compare: finiteness only; history: stored and shown
    threshold=None,
    judged_in=frozenset({"compare", "history"}),
    reads=("loss_finite",),
    label="loss",
    decimals=None,  # a loss near 0 stays readable (4.858e-06)
)
ENERGY = Judged(
    order=5,
    direction="lower",
    # the seed of its noise: docs/methodology.md ("Energy"), measured on the H200 with 3 repeats
    default_threshold_pct=5.0,
    threshold="energy",
    judged_in=frozenset({"compare", "history", "summary"}),
    reads=("gpu_energy_j", "gpu_energy_source"),
    label="J/sample",
    decimals=None,
)
PARITY = Judged(
    order=6,
    direction="lower",  # |parity_delta|: nearer the reference is better
    default_threshold_pct=None,  # judged by its verdict against the band, not by the size of a change
    threshold=None,
    judged_in=frozenset({"compare"}),
    reads=("parity_delta", "parity_band", "parity_seeds", "parity_ref", "final_window_loss"),
    label="loss parity",
    decimals=None,
)

CATALOGUE: tuple[Column, ...] = (
    # -- id
    Column(
        "scenario", "", "id", "the scenario's name and the repeat (0, 1, ...); together they key the row", text=True
    ),
    Column("repeat", "", "id"),
    Column(
        "status",
        "",
        "id",
        "how the worker ended: `ok`, `skipped`, `oom`, `timeout`, `error`, `crashed`, `diverged`, `interrupted` "
        "([running.md](running.md#statuses))",
        text=True,
    ),
    Column("error", "", "id", "one line: why, for anything but `ok`", text=True),
    # -- setting
    *_settings(),
    Column(
        "model_resolved",
        "",
        "setting",
        "the model that really ran (`auto` resolved to `bert-large` or `tiny`, or the checkpoint path; `command` for "
        "a command scenario)",
        text=True,
    ),
    Column("device", "", "setting", "`cuda:N` or `cpu`", text=True),
    # -- ran
    Column(
        "model_class",
        "",
        "ran",
        "the class built: transformers' (`Dinov2ForImageClassification`, `LlamaForCausalLM`), or "
        "`torchvision.models.NAME` for the torchvision family",
        text=True,
    ),
    Column(
        "model_family",
        "",
        "ran",
        "gpubench's family of it: `bert`, `llama`, `decoder`, `moe`, `vit`, `torchvision`, `generic` "
        "([models.md](models.md))",
        text=True,
    ),
    Column(
        "model_task",
        "",
        "ran",
        "the task it trained as: `causal-lm`, `sequence-classification`, `image-classification` (the `task` setting "
        "may say `auto`)",
        text=True,
    ),
    Column(
        "token_unit",
        "",
        "ran",
        "what `tokens_per_s` counts: `text tokens` (the sequence), `image patches + class token` (and any other token"
        " its embeddings add), `image patches`, or `none` (a CNN: samples only, `tokens_per_s` empty)",
        text=True,
    ),
    # -- speed
    Column(
        "samples_per_s",
        "samples/s",
        "speed",
        "samples in the steady-state window / the window's wall time (the headline figure)",
        ranks="replicas",
        per_rank=True,
        metric=SAMPLES,
    ),
    Column(
        "tokens_per_s",
        "tokens/s",
        "speed",
        "the same in tokens, as `token_unit` says: samples x `seq_len`; an image model: x its patches plus its class "
        "token ((image_size / patch_size)^2 + 1 for ViT or DINOv2, never `seq_len`), empty for a CNN; for a causal LM"
        " the tokens with a label (labels != -100, so padding is not counted; [data.md](data.md#token-counting))",
        ranks="replicas",
    ),
    Column(
        "step_time_p10_ms",
        "ms",
        "speed",
        "optimizer-step times in the window, from CUDA events (wall clock on the CPU)",
        ranks="slowest",
    ),
    Column("step_time_median_ms", "ms", "speed", "", ranks="slowest", per_rank=True, metric=STEP),
    Column("step_time_p90_ms", "ms", "speed", "", ranks="slowest"),
    Column(
        "window_s",
        "s",
        "speed",
        "the steady-state window: its wall time, optimizer steps and samples",
        ranks="max",
        per_rank=True,
    ),
    Column("window_steps", "", "speed", "", per_rank=True),
    Column("window_samples", "", "speed", "", ranks="replicas"),
    Column(
        "window_ci_pct",
        "%",
        "speed",
        "how well the window knows the mean step time: the half-width of the 95% interval of the mean step time by "
        "batch means (10 batches of consecutive steps), in % of the mean, over the whole window; empty with fewer "
        "than 10 timed steps ([methodology.md](methodology.md#how-long-the-window-runs-window))",
    ),
    Column(
        "window_stop",
        "",
        "speed",
        'why the window ended: `epoch_end` (the epoch\'s last step: `window = "epoch"`, or an `auto` window that the'
        " epoch's end reached first), `ci` (`auto`: the interval reached 2%), `max_time` (`auto`: about 3 s passed "
        "first), `steps` (`window = N`: N timed steps)",
        text=True,
    ),
    Column("first_step_s", "s", "speed", "the first optimizer step (compilation, kernel selection)", ranks="max"),
    Column("warmup_s", "s", "speed", "the warm-up steps, the first included", ranks="max"),
    Column("train_loop_s", "s", "speed", "the whole training loop, warm-up included", ranks="max"),
    Column(
        "cpu_loop_start_ms",
        "ms",
        "speed",
        "a fixed pure-Python loop timed on the training thread just before and just after the window: how fast the "
        "CPU was ([methodology.md](methodology.md))",
        probe="cpu_loop",
    ),
    Column("cpu_loop_end_ms", "ms", "speed", "", probe="cpu_loop"),
    Column(
        "fp32_matmul_precision",
        "",
        "speed",
        "what fp32 matmuls really ran in after training: `ieee` or `tf32`",
        text=True,
    ),
    Column(
        "trainer_runtime_s",
        "s",
        "speed",
        "the Trainer's own `train_runtime` / `train_samples_per_second` for the whole epoch, warm-up included, as in "
        "the guide's table (the Accelerate engine: its loop's own). When the window ended the epoch early "
        "(`window_stop` other than `epoch_end`) they cover the steps that ran: `trainer_samples_per_s` is the samples"
        " trained over `trainer_runtime_s` (older transformers would count the whole planned epoch)",
        ranks="max",
    ),
    Column("trainer_samples_per_s", "samples/s", "speed", "", ranks="engine"),
    # -- parallel
    Column(
        "world_size",
        "",
        "parallel",
        "processes in the job (GPUs over all nodes; gloo processes on the CPU)",
        ranks="job",
    ),
    Column(
        "parallel_wrapper",
        "",
        "parallel",
        "what really wrapped the model: `DistributedDataParallel`, `FSDP2`, `DeepSpeedEngine`",
        text=True,
    ),
    Column("samples_per_s_per_gpu", "samples/s", "parallel", "`samples_per_s / world_size`", ranks="job"),
    Column(
        "scaling_efficiency",
        "",
        "parallel",
        "`samples_per_s_per_gpu` over the median samples/s of the one-process row named in `scaling_ref` (weak "
        "scaling)",
    ),
    Column("scaling_ref", "", "parallel", "", text=True),
    Column("slowest_rank", "", "parallel", "the rank whose median step was longest", ranks="job"),
    Column("torch_max_allocated_sum_mb", "MB", "parallel", "over all ranks", ranks="sum", of="torch_max_allocated_mb"),
    Column("torch_max_reserved_sum_mb", "MB", "parallel", "", ranks="sum", of="torch_max_reserved_mb"),
    Column("rss_peak_sum_mb", "MB", "parallel", "", ranks="sum", of="rss_peak_mb"),
    Column(
        "nvml_process_peak_sum_mb",
        "MB",
        "parallel",
        'NVML: the per-GPU peaks summed, and each GPU\'s (`"25786,25266"`)',
    ),
    Column("gpu_peaks_mb", "MB", "parallel", "", text=True),
    Column(
        "rank_figures",
        "",
        "parallel",
        "JSON: each rank's samples/s, median step, window, allocator peaks, RSS, loss (final, finite, non-finite "
        "count) and host",
        text=True,
        ranks="job",
    ),
    # -- memory
    Column(
        "peak_mem_mb",
        "MB",
        "memory",
        "the headline peak; where it comes from is in `peak_mem_source`",
        ranks="parent-max",
        metric=PEAK,
    ),
    Column(
        "peak_mem_source",
        "",
        "memory",
        "`nvml-process`, `nvml-device-minus-idle` (no PID matched, e.g. a container), `torch-reserved` (no NVML, or "
        "`--no-memory-sampling`) or `rss` (CPU)",
        text=True,
    ),
    Column(
        "nvml_process_peak_mb",
        "MB",
        "memory",
        "NVML `usedGpuMemory` summed over the worker's process group, sampled at ~190 Hz by the parent",
    ),
    Column("nvml_device_peak_mb", "MB", "memory", "the device-wide NVML `used` peak minus `nvml_idle_mb`", signed=True),
    Column("nvml_idle_mb", "MB", "memory", "the device's used memory read just before the worker started"),
    Column("nvml_sample_hz", "Hz", "memory", "the sampler's achieved rate"),
    Column(
        "torch_max_allocated_mb",
        "MB",
        "memory",
        "torch's `max_memory_allocated` / `max_memory_reserved`",
        ranks="max",
        per_rank=True,
    ),
    Column("torch_max_reserved_mb", "MB", "memory", "", ranks="max", per_rank=True),
    Column(
        "rss_peak_mb", "MB", "memory", "the worker's peak resident set size (host memory)", ranks="max", per_rank=True
    ),
    Column(
        "torch_alloc_model_built_mb",
        "MB",
        "memory",
        "`torch.cuda.memory_allocated()` when each phase is first reached "
        "([memory.md](memory.md#predicted-beside-measured))",
        ranks="max",
    ),
    Column("torch_alloc_after_forward_mb", "MB", "memory", "", ranks="max"),
    Column("torch_alloc_after_backward_mb", "MB", "memory", "", ranks="max"),
    Column("torch_alloc_after_optimizer_step_mb", "MB", "memory", "", ranks="max"),
    # -- gpu
    Column(
        "gpu_energy_j",
        "J",
        "gpu",
        "joules over the timed window: NVML's total-energy counter read at its two edges (`nvml-counter`), or the "
        "power integral where the GPU has no counter (`power-integral`); with several ranks, every GPU's sum",
        ranks="sum",
        per_rank=True,
        probe="gpu",
    ),
    Column("gpu_energy_source", "", "gpu", "", text=True, probe="gpu"),
    Column(
        "gpu_energy_sampled_j",
        "J",
        "gpu",
        "the integral of the sampled power over the window (trapezoids, 10 Hz): the counter's cross-check",
        ranks="sum",
        probe="gpu",
    ),
    Column(
        "gpu_power_mean_w",
        "W",
        "gpu",
        "sampled power (`nvmlDeviceGetPowerUsage`) and the enforced limit",
        ranks="sum",
        probe="gpu",
    ),
    Column("gpu_power_max_w", "W", "gpu", "", ranks="max", probe="gpu"),
    Column("gpu_power_limit_w", "W", "gpu", "", ranks="sum", probe="gpu"),
    Column(
        "gpu_power_capped_pct",
        "%",
        "gpu",
        "the share of samples with the software power cap among the clocks-event reasons",
        ranks="mean",
        probe="gpu",
    ),
    Column(
        "gpu_sm_clock_median_mhz",
        "MHz",
        "gpu",
        "the sampled SM clock, and the GPU's maximum",
        ranks="min",
        per_rank=True,
        probe="gpu",
    ),
    Column("gpu_sm_clock_min_mhz", "MHz", "gpu", "", ranks="min", probe="gpu"),
    Column("gpu_sm_clock_max_mhz", "MHz", "gpu", "", probe="gpu"),
    Column(
        "gpu_clock_events",
        "",
        "gpu",
        "every slowdown reason seen in a sample (`sw_power_cap`, `hw_slowdown`, `sw_thermal`, `hw_thermal`, "
        "`hw_power_brake`, `sync_boost`), `;`-joined; `none` when none was",
        text=True,
        ranks="union",
        probe="gpu",
    ),
    Column(
        "gpu_activity_source",
        "",
        "gpu",
        "`gpm` (NVML GPM, Hopper and later: the window's average between two samples at its edges) or "
        "`nvml-utilization`",
        text=True,
        probe="gpu",
    ),
    Column(
        "gpu_sm_active_pct",
        "%",
        "gpu",
        "GPM: SMs busy, tensor pipes busy, DRAM bandwidth of its maximum, non-tensor FP32 / FP16 pipes busy, in % of "
        "the window",
        ranks="mean",
        per_rank=True,
        probe="gpu",
    ),
    Column("gpu_tensor_active_pct", "%", "gpu", "", ranks="mean", probe="gpu"),
    Column("gpu_dram_bw_pct", "%", "gpu", "", ranks="mean", probe="gpu"),
    Column("gpu_fp32_active_pct", "%", "gpu", "", ranks="mean", probe="gpu"),
    Column("gpu_fp16_active_pct", "%", "gpu", "", ranks="mean", probe="gpu"),
    Column(
        "gpu_util_pct",
        "%",
        "gpu",
        "NVML's utilization rates (share of time a kernel ran; memory), sampled",
        ranks="mean",
        probe="gpu",
    ),
    Column("gpu_mem_util_pct", "%", "gpu", "", ranks="mean", probe="gpu"),
    Column("gpu_samples", "", "gpu", "the sampler's samples and rate; what could not be read, and why", probe="gpu"),
    Column("gpu_sample_hz", "Hz", "gpu", "", probe="gpu"),
    Column("gpu_reason", "", "gpu", "", text=True, probe="gpu"),
    Column(
        "energy_per_sample_j",
        "J",
        "gpu",
        "what the window's energy bought: `gpu_energy_j` over the window's samples (tokens)",
        ranks="parent-sum",
        metric=ENERGY,
    ),
    Column("energy_per_token_j", "J", "gpu", "", ranks="parent-sum"),
    Column("samples_per_kwh", "samples/kWh", "gpu", "", ranks="parent-sum"),
    Column(
        "bound",
        "",
        "gpu",
        "`compute-bound`, `memory-bound`, `launch-bound`, `throttled` or `mixed`, and the figures it was read from, "
        "followed by a steadiness note where the steps spread (p90/p10 >= 1.5) or, for a launch-bound row, the CPU's "
        "loop shifted 1.3x or more across the window ([methodology.md](methodology.md#what-bound-a-row))",
        text=True,
    ),
    Column("bound_basis", "", "gpu", "", text=True),
    # -- profile
    Column(
        "prof_steps",
        "",
        "profile",
        "the profiled steps and their wall time per step (the profiler's own cost included)",
    ),
    Column("prof_step_ms", "ms", "profile", ""),
    *_kernels(),
    Column(
        "prof_trace",
        "",
        "profile",
        "the Chrome/Perfetto trace beside the row's log (`logs/NAME-rN.trace.json`, `-rankK` per rank; with "
        "`profile_memory = true` an allocator snapshot `NAME-rN.memory.pickle`)",
        text=True,
    ),
    # -- predicted
    Column("pred_weights_mb", "MB", "predicted", PREDICTED_DOC),
    Column("pred_autocast_copies_mb", "MB", "predicted", ""),
    Column("pred_grads_mb", "MB", "predicted", ""),
    Column("pred_optimizer_mb", "MB", "predicted", ""),
    Column("pred_optimizer_temp_mb", "MB", "predicted", ""),
    Column("pred_activations_mb", "MB", "predicted", ""),
    Column("pred_workspace_mb", "MB", "predicted", ""),
    Column("pred_peak_allocated_mb", "MB", "predicted", ""),
    Column("pred_peak_min_mb", "MB", "predicted", ""),
    Column("pred_peak_phase", "", "predicted", "", text=True),
    Column("pred_peak_error_pct", "%", "predicted", "", signed=True),
    # -- flop
    Column(
        "model_params",
        "",
        "flop",
        "the model's parameter count (all of them, frozen or not; a 4-bit weight counts as its unpacked size)",
    ),
    Column(
        "trainable_params",
        "",
        "flop",
        "the parameters the optimizer updates: all of them, or only the adapters under LoRA ([llm.md](llm.md))",
    ),
    Column(
        "flops_per_sample",
        "FLOP",
        "flop",
        "forward and backward. BERT: 6 x matmul parameters x sequence + 12 x layers x hidden x sequence^2. Decoders: "
        "6 x (layer Linears + LM head, once even when tied) x sequence + 6 x layers x sequence^2 x heads x head_dim "
        "(causal: half the score matrix). LoRA/QLoRA: 4 x base + 6 x adapters (the base needs no weight gradients) "
        "([methodology](methodology.md))",
    ),
    Column(
        "flops_source",
        "",
        "flop",
        "where `flops_per_sample` comes from: `analytic: bert`, `analytic: llama`, `generic: ...` (from the built "
        "model's weights and tokens), `counted: FlopCounterMode ...` (a model without tokens, a CNN: the "
        "cross-check's count), or why there is none ([models](models.md#flops-and-mfu-where-they-come-from))",
        text=True,
    ),
    Column(
        "flops_generic_per_sample",
        "FLOP",
        "flop",
        "the generic count from the built model, for every family (the figure of `generic` rows)",
    ),
    Column(
        "flops_check_per_sample",
        "FLOP",
        "flop",
        "`FlopCounterMode` over one dense training step on the meta device, and its difference from the generic count"
        " of that step, in %; counted once a run for each model, task and sequence (its workers share it: the meta"
        " copy is the plain model, whatever the row's precision, optimizer or memory savers)",
    ),
    Column("flops_check_gap_pct", "%", "flop", "", signed=True),
    Column(
        "flops_check_note",
        "",
        "flop",
        "why the cross-check is missing, or its gap when over 5% (also a note in the run table and the report), or "
        "that a CNN's FLOPs are the counter's",
        text=True,
    ),
    Column("achieved_tflops", "TFLOP/s", "flop", "`flops_per_sample` x `samples_per_s` / 10^12"),
    Column("peak_tflops", "TFLOP/s", "flop", PEAK_DOC),
    Column(
        "mfu",
        "",
        "flop",
        "model FLOPs utilisation: `achieved_tflops` / `peak_tflops` (empty on an unknown GPU, and with "
        "`achieved_tflops` and `mfu_ceiling` when the FLOP counts disagree by more than 25%)",
    ),
    Column(
        "mfu_note",
        "",
        "flop",
        'why `achieved_tflops`, `mfu` and `mfu_ceiling` are empty where the row has FLOPs: "FLOP counts disagree by '
        '-93.6% (over 25%) ..." (`flops_check_gap_pct`)',
        text=True,
    ),
    Column("peak_source", "", "flop", PEAK_DOC, text=True),
    Column(
        "ceiling_tflops",
        "TFLOP/s",
        "flop",
        "the run's measured matmul ceiling in the row's format (env.json `matmul_ceiling`, times the row's GPUs), and"
        " `achieved_tflops` over it: the share of what this GPU really reaches "
        "([methodology.md](methodology.md#the-measured-ceiling))",
    ),
    Column("mfu_ceiling", "", "flop", ""),
    # -- lora
    Column(
        "lora_modules",
        "",
        "lora",
        "the leaf names of the layers that carry adapters, sorted (`c_attn,c_fc,c_proj` on GPT-2), read off the model"
        " that trained: the layers [models.md](models.md#techniques-on-other-families) says LoRA targets",
        text=True,
    ),
    Column("lora_layers", "", "lora", "how many layers carry adapters"),
    # -- training
    Column(
        "effective_learning_rate",
        "",
        "training",
        "what the engine trained with, read back from it: the learning rate (`learning_rate`, or the engines' default"
        " 5e-5), transformers' name of the schedule it built (`constant`, `constant_with_warmup`, `linear`, `cosine`)"
        " and its warm-up steps; a row that did not train holds the scenario's",
    ),
    Column("effective_lr_schedule", "", "training", "", text=True),
    Column("effective_lr_warmup_steps", "", "training", ""),
    Column(
        "loss_accum_divided",
        "",
        "training",
        "the Trainer with gradient accumulation: `true` when backward saw each micro-batch's loss as its share of the"
        " step (divided by the accumulation steps, or normalised over the step's tokens by a causal LM's head), "
        "`false` when it saw the whole loss (a classifier on transformers 5.x: "
        "[parity.md](parity.md#the-loss-curve)); empty without accumulation and for the loops, which divide",
        text=True,
    ),
    Column(
        "initial_loss",
        "",
        "training",
        "the loss curve's first point, and its mean over the last 20% of its optimizer steps (`DIR/losses/`)",
        signed=True,
        nonfinite=True,
    ),
    Column("final_window_loss", "", "training", "", signed=True, nonfinite=True),
    Column(
        "eval_accuracy",
        "",
        "training",
        "with `eval_samples`: top-1 accuracy (a causal LM's: next-token, over labelled tokens) and the model's loss "
        "on the data's held-out split, scored after training ([data.md](data.md#held-out-accuracy-eval_samples))",
    ),
    Column("eval_loss", "", "training", "", nonfinite=True),
    Column(
        "eval_scored",
        "",
        "training",
        "the rows (or tokens) the accuracy counts, and the seconds the scoring took (in no other figure)",
    ),
    Column("eval_s", "s", "training", ""),
    Column(
        "eval_note",
        "",
        "training",
        "why a row that asked for `eval_samples` has no figures: several processes, no logits, or the error while "
        "scoring",
        text=True,
    ),
    Column(
        "parity",
        "",
        "training",
        "`equivalent`, `deviates`, `diverged`, `reference`, or empty (not judged)",
        text=True,
        ranks="rank0",
        metric=PARITY,
    ),
    Column("parity_delta", "", "training", "`final_window_loss` minus the mean of the reference's seeds'", signed=True),
    Column(
        "parity_band",
        "",
        "training",
        "the band's half-width: the 95% prediction interval of one more reference seed (at least 0.2% of its loss)",
    ),
    Column("parity_seeds", "", "training", "the reference seeds the band comes from, and the reference scenario"),
    Column("parity_ref", "", "training", "", text=True),
    # -- other
    Column(
        "final_loss",
        "",
        "other",
        "the last micro-batch's training loss, as the model computed it: undivided by gradient accumulation, whatever"
        " the engine ([parity.md](parity.md#the-loss-curve))",
        signed=True,
        nonfinite=True,
        ranks="rank0",
        per_rank=True,
        metric=LOSS,
    ),
    Column(
        "loss_finite",
        "",
        "other",
        "whether every loss was finite, and how many were not, over every rank (a non-finite loss on any rank makes "
        "the row `diverged`)",
        text=True,
        ranks="all",
        per_rank=True,
    ),
    Column("nonfinite_losses", "", "other", "", ranks="count", per_rank=True),
    Column("worker_wall_s", "s", "other", "the worker's wall time, launch to exit"),
    Column("startup_s", "s", "other", "launch to the first step", signed=True, ranks="max"),
    Column(
        "startup_breakdown",
        "",
        "other",
        "JSON: `forked` (waiting for the fork server) or interpreter + imports (spawn), CUDA context, model, data, "
        "engine set-up",
        text=True,
    ),
    Column(
        "teardown_breakdown",
        "",
        "other",
        "JSON: seconds from the window's last step to the engine's return (`engine_end`), the FLOP cross-check "
        "(`flop_count`: read from the run's kept count after its first row), the memory readings and the held-out "
        "evaluation; the result's write, the exit and the parent's reaping are the rest of `overhead_s`",
        text=True,
    ),
    Column("overhead_s", "s", "other", "`worker_wall_s` minus the training loop", signed=True),
    Column("cpu_affinity", "", "other", "the CPUs the worker could run on, as Linux writes them (`0-15`)", text=True),
    Column("exit_code", "", "other", "the worker's raw exit code (negative: killed by that signal)", signed=True),
    Column("started_at", "", "other", "when the worker started (UTC)", text=True),
    Column(
        "stderr_tail", "", "other", "the last 1,500 characters of the worker's log, for anything but `ok`", text=True
    ),
)
BY_NAME = {c.name: c for c in CATALOGUE}


def names(*groups: str) -> tuple[str, ...]:
    """The columns of these groups (all of them with none), in the row's order."""
    return tuple(c.name for c in CATALOGUE if not groups or c.group in groups)


def probe_columns(probe: str) -> tuple[str, ...]:
    """The columns a window probe measures (its `name`), in order: what its close() returns."""
    return tuple(c.name for c in CATALOGUE if c.probe == probe)


def judged() -> tuple[Column, ...]:
    """The judged figures' columns, in their metrics' order."""
    return tuple(
        sorted((c for c in CATALOGUE if c.metric is not None), key=lambda c: c.metric.order if c.metric else 0)
    )
