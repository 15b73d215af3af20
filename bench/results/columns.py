"""The results table's schema: statuses and columns, one row per scenario x repeat. A row is a dict
keyed by these columns; a key that is not one is a bug, and `check_row` says so (nothing is dropped
without a word)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..measure.gpuwatch import GpuProbe
from ..measure.kernels import COLUMNS as KERNEL_COLUMNS
from ..scenario import SETTING_KEYS

STATUSES = ("ok", "skipped", "oom", "timeout", "error", "crashed", "diverged", "interrupted")
FINAL_STATUSES = ("ok", "skipped", "oom", "timeout", "error", "crashed", "diverged")
FAILED_STATUSES = ("oom", "timeout", "error", "crashed", "diverged", "interrupted")
FAILURE_SEVERITY = ("interrupted", "crashed", "timeout", "oom", "error", "diverged")  # worst first

ID_COLUMNS = ["scenario", "repeat", "status", "error"]
SETTING_COLUMNS = [k for k in SETTING_KEYS if k not in ("name", "inject_fault", "fault_rank", "rdzv_endpoint")] + [
    "model_resolved",
    "device",
]
# What ran (bench/worker/record.py): read off the built model, empty where nothing was built (a
# command scenario's script builds its own; a row that failed before its model was built)
RAN_COLUMNS = [
    "model_class",  # the class built: Dinov2ForImageClassification, LlamaForCausalLM, torchvision's ResNet
    "model_family",  # gpubench's family of it (bench/families): bert, llama, decoder, moe, vit, torchvision, generic
    "model_task",  # the task it trained as: causal-lm, sequence-classification, image-classification
    "token_unit",  # what tokens_per_s counts: text tokens, image patches + class token, image patches, none
]
SPEED_COLUMNS = [
    "samples_per_s",  # steady state: samples in the window / window wall time
    "tokens_per_s",
    "step_time_p10_ms",  # per optimizer step, from CUDA events inside the window
    "step_time_median_ms",
    "step_time_p90_ms",
    "window_s",
    "window_steps",
    "window_samples",
    "window_ci_pct",  # 95% interval of the mean step time (batch means), half-width in % of the mean
    "window_stop",  # why the window ended: ci, max_time (window = "auto"), steps, epoch_end
    "first_step_s",  # first optimizer step (kernel selection, compilation)
    "warmup_s",  # training start to window start
    "train_loop_s",  # training start to last step end
    "cpu_loop_start_ms",  # a fixed Python loop on the training thread just before the window
    "cpu_loop_end_ms",  # ... and just after it (bench/measure/cpuspeed.py)
    "fp32_matmul_precision",  # CUDA fp32 matmuls after training: ieee (plain fp32) or tf32
    "trainer_runtime_s",  # the Trainer's own train_runtime (whole epoch, warm-up included)
    "trainer_samples_per_s",  # the Trainer's own train_samples_per_second
]
PARALLEL_COLUMNS = [  # multi-process scenarios (docs/multi-gpu.md); samples_per_s is then the job's
    "world_size",  # processes in the job (GPUs over all nodes; gloo processes on the CPU)
    "parallel_wrapper",  # what really wrapped the model: DistributedDataParallel, FSDP2, DeepSpeedEngine
    "samples_per_s_per_gpu",  # samples_per_s / world_size
    "scaling_efficiency",  # samples_per_s_per_gpu / the 1-process reference's samples_per_s (weak scaling)
    "scaling_ref",  # the reference scenario of scaling_efficiency
    "slowest_rank",  # the rank whose median step was longest (its step times are the row's)
    "torch_max_allocated_sum_mb",  # over all ranks; torch_max_allocated_mb is the largest rank's
    "torch_max_reserved_sum_mb",
    "rss_peak_sum_mb",
    "nvml_process_peak_sum_mb",  # NVML per GPU, summed; peak_mem_mb is the largest GPU's
    "gpu_peaks_mb",  # NVML peak of each GPU, in CUDA_VISIBLE_DEVICES order ("41230,41187")
    "rank_figures",  # JSON: per rank samples/s, median step, allocator peaks, host
]
MEMORY_COLUMNS = [
    "peak_mem_mb",  # NVML per-process peak on a GPU, peak RSS on the CPU; see peak_mem_source
    "peak_mem_source",
    "nvml_process_peak_mb",  # NVML: the worker's processes (nvmlDeviceGetComputeRunningProcesses)
    "nvml_device_peak_mb",  # NVML: device-wide used peak minus the idle level before the run
    "nvml_idle_mb",  # NVML: device-wide used before the worker started
    "nvml_sample_hz",
    "torch_max_allocated_mb",  # torch.cuda.max_memory_allocated
    "torch_max_reserved_mb",  # torch.cuda.max_memory_reserved
    "rss_peak_mb",  # the worker's peak resident set size (getrusage)
    "torch_alloc_model_built_mb",
    "torch_alloc_after_forward_mb",
    "torch_alloc_after_backward_mb",
    "torch_alloc_after_optimizer_step_mb",
]
# The GPU over the timed window (bench/measure/gpuwatch.py's probe columns, then what the energy
# buys); every one empty on the CPU, with gpu_reason saying why.
GPU_COLUMNS = [
    *GpuProbe.columns,
    "energy_per_sample_j",
    "energy_per_token_j",
    "samples_per_kwh",
    "bound",  # compute-bound, memory-bound, launch-bound, throttled, mixed (bench/results/bound.py)
    "bound_basis",  # the figures the label was read from
]
# profile_steps (bench/worker/profiling.py): per profiled step, after the window
PROFILE_COLUMNS = [
    "prof_steps",
    "prof_step_ms",  # wall time per profiled step (the profiler's own cost included)
    *KERNEL_COLUMNS,  # kernel time per step by category (bench/measure/kernels.py), and idle
    "prof_trace",  # the Chrome/Perfetto trace beside the row's log (logs/)
]
PREDICTED_COLUMNS = [  # bench/memory: arithmetic on the model config (docs/memory.md)
    "pred_weights_mb",
    "pred_autocast_copies_mb",
    "pred_grads_mb",
    "pred_optimizer_mb",
    "pred_optimizer_temp_mb",
    "pred_activations_mb",
    "pred_workspace_mb",
    "pred_peak_allocated_mb",  # compare with torch_max_allocated_mb
    "pred_peak_phase",
    "pred_peak_error_pct",  # (predicted - measured torch_max_allocated_mb) / measured x 100
]
FLOP_COLUMNS = [
    "model_params",
    "trainable_params",
    "flops_per_sample",
    "flops_source",  # analytic: FAMILY (an exact count written for it) or generic (the built model's matmul weights)
    "flops_generic_per_sample",  # the generic count (bench/measure/flopcount.py), for every family
    "flops_check_per_sample",  # FlopCounterMode over one dense step on the meta device (full attention)
    "flops_check_gap_pct",  # (counter - generic dense count) / generic dense count x 100
    "flops_check_note",  # why the cross-check is missing, or the gap when it is over 5%
    "achieved_tflops",
    "peak_tflops",
    "mfu",
    "mfu_note",  # why achieved_tflops and mfu are empty: the FLOP counts disagree by over 25%
    "peak_source",
    "ceiling_tflops",  # the run's measured matmul ceiling in the row's format (env.json), times its GPUs
    "mfu_ceiling",  # achieved_tflops / ceiling_tflops: the share of what this GPU really reaches
]
LORA_COLUMNS = [  # peft = "lora": what the adapters sit on, read off the trained model (bench/worker/llm.py)
    "lora_modules",  # the adapted layers' leaf names, sorted ("c_attn,c_fc,c_proj")
    "lora_layers",  # how many layers carry adapters
]
# What was trained and how the loss went (docs/parity.md): the engine's effective learning rate and
# schedule, the loss curve's figures (losses/NAME-rN.json) and the verdict against the reference
TRAINING_COLUMNS = [
    "effective_learning_rate",  # what the engine trained with (learning_rate, or the engines' default)
    "effective_lr_schedule",  # the schedule the engine built (transformers' name: constant_with_warmup, linear, ...)
    "effective_lr_warmup_steps",
    "loss_accum_divided",  # the Trainer, accumulating: did backward see each micro-batch's share of the step
    "initial_loss",  # the loss curve's first point
    "final_window_loss",  # the mean loss over the curve's last 20% of optimizer steps
    "eval_accuracy",  # eval_samples: top-1 accuracy on the data's held-out split after training
    "eval_loss",  # the model's loss over the same rows
    "eval_scored",  # what the accuracy counts: rows, or a causal LM's labelled tokens
    "eval_s",  # seconds the scoring took (after the window: in no other figure)
    "eval_note",  # why a row that asked for eval_samples has no figures
    "parity",  # equivalent, deviates, diverged, reference; empty: not judged (bench/results/parity.py)
    "parity_delta",  # final_window_loss - the reference seeds' mean
    "parity_band",  # the band's half-width: the 95% prediction interval of one more reference seed
    "parity_seeds",  # reference seeds the band comes from
    "parity_ref",  # the reference scenario
]
OTHER_COLUMNS = [
    "final_loss",
    "loss_finite",
    "nonfinite_losses",
    "worker_wall_s",  # the subprocess's whole life
    "startup_s",  # launch to first training step
    "startup_breakdown",  # JSON: seconds per start-up step (interpreter, imports, CUDA, model, data, engine)
    "overhead_s",  # worker_wall_s - train_loop_s
    "cpu_affinity",  # the CPUs the worker could run on ("0-15"; --cpu-affinity narrows it)
    "exit_code",
    "started_at",
    "stderr_tail",
]
FIGURE_COLUMNS = (  # what a row measured or derived, after its identity and settings
    RAN_COLUMNS
    + SPEED_COLUMNS
    + PARALLEL_COLUMNS
    + MEMORY_COLUMNS
    + GPU_COLUMNS
    + PROFILE_COLUMNS
    + PREDICTED_COLUMNS
    + FLOP_COLUMNS
    + LORA_COLUMNS
    + TRAINING_COLUMNS
    + OTHER_COLUMNS
)
COLUMNS = ID_COLUMNS + SETTING_COLUMNS + FIGURE_COLUMNS
NUMERIC_COLUMNS = [
    c
    for c in FIGURE_COLUMNS
    if c
    not in (
        *RAN_COLUMNS,
        "mfu_note",
        "parallel_wrapper",
        "scaling_ref",
        "gpu_peaks_mb",
        "rank_figures",
        "peak_mem_source",
        "peak_source",
        "flops_source",
        "flops_check_note",
        "lora_modules",
        "loss_finite",
        "loss_accum_divided",
        "started_at",
        "stderr_tail",
        "fp32_matmul_precision",
        "window_stop",
        "startup_breakdown",
        "pred_peak_phase",
        "cpu_affinity",
        "gpu_energy_source",
        "gpu_clock_events",
        "gpu_activity_source",
        "gpu_reason",
        "bound",
        "bound_basis",
        "prof_trace",
        "effective_lr_schedule",
        "parity",
        "parity_ref",
        "eval_note",
    )
]
NAN_WORDS = ("nan", "-nan", "na", "n/a", "null", "none", "<na>")  # numeric cells that mean missing
# Numeric settings, checked like the figures when a results.csv is read.
NUMERIC_SETTINGS = [
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
]
# Figures that may be below zero; every other numeric column is a count, a time, a size or a rate.
SIGNED_COLUMNS = (
    "final_loss",
    "initial_loss",
    "final_window_loss",
    "parity_delta",
    "pred_peak_error_pct",
    "flops_check_gap_pct",
    "nvml_device_peak_mb",  # the device's peak minus its idle level: another process may free memory
    "startup_s",  # launch (the parent's clock) to first step (the worker's)
    "overhead_s",
    "exit_code",  # a negative code is a signal
)
NONFINITE_COLUMNS = (
    "final_loss",
    "initial_loss",
    "final_window_loss",
    "eval_loss",
)  # a diverged row records the NaN or infinite loss
REQUIRED_COLUMNS = ["scenario", "repeat", "status", "samples_per_s", "peak_mem_mb"]
# The results format (docs/results-format.md): env.json `results_format`. 1: the columns of this
# module, REQUIRED_COLUMNS the least a file needs; a file of a newer format is refused by name.
RESULTS_FORMAT = 1


KNOWN_COLUMNS = frozenset(COLUMNS)


def check_row(row: Mapping[str, Any]) -> None:
    """A row may only hold known columns: a figure missing from COLUMNS would be dropped silently."""
    unknown = sorted(set(row) - KNOWN_COLUMNS)
    if unknown:
        raise ValueError(
            f"result row for {row.get('scenario')!r} has unknown column(s) {', '.join(unknown)}: "
            "add them to bench/results/columns.py"
        )
