"""Whether a scenario can run on this machine: the Skip exception and the checks that raise it, before
anything is built (a skipped row says why in one line)."""

from __future__ import annotations

import importlib
import importlib.util
import shutil

import torch

from ..planner import datakinds
from ..planner.rules import needs_cuda
from ..recipe.engine_registry import ENGINES, precision_matmuls
from ..recipe.optimizer_names import BITSANDBYTES_OPTIMIZERS
from ..recipe.scenario import Scenario


class Skip(Exception):
    """This scenario cannot run on this machine; the reason says why."""


FP8_CAPABILITY = (8, 9)  # Ada and Hopper: the first GPUs with FP8 tensor cores


def require(module: str, technique: str, package: str) -> None:
    """Skip unless `module` imports; the reason names the technique, the package and how to get it."""
    try:
        importlib.import_module(module)
    except Exception as exc:  # ImportError, or a broken native library (bitsandbytes, triton)
        raise Skip(
            f"{technique} needs the {package} package ({type(exc).__name__}: {exc}); pip install {package}"
        ) from None


def optional_packages(sc: Scenario) -> list[tuple[str, str, str]]:
    """(module, technique, package) for every optional package the scenario's techniques use."""
    needed = []
    package = ENGINES[sc.engine].package  # beyond gpubench's own dependencies (bench/recipe/engine_registry.py)
    if package is not None:
        needed.append((package.replace("-", "_"), f'engine = "{sc.engine}"', package))
    for p in ENGINES[sc.engine].precisions:  # an engine's own precision may need a package of its own
        if p.name == sc.precision and p.package is not None:
            needed.append((p.package.replace("-", "_"), f'precision = "{p.name}"', p.package))
    if sc.peft == "lora":
        needed.append(("peft", 'LoRA (peft = "lora")', "peft"))
    if sc.quantize_base != "none":
        needed.append(("bitsandbytes", f'quantize_base = "{sc.quantize_base}"', "bitsandbytes"))
    if sc.optimizer in BITSANDBYTES_OPTIMIZERS:
        needed.append(("bitsandbytes", f'optimizer = "{sc.optimizer}"', "bitsandbytes"))
    if sc.liger:
        needed.append(("liger_kernel.transformers", "liger = true (Liger's kernels)", "liger-kernel"))
    if sc.fp8:
        needed.append(("torchao.float8", "fp8 = true (torchao's float8 training)", "torchao"))
    if sc.data_source == "datasets":
        needed.append(("datasets", 'data_source = "datasets"', "datasets"))
    kind = datakinds.KINDS[datakinds.split(sc.data)[0]]
    if kind.package is not None:  # the data kind's own package (bench/planner/datakinds.py)
        needed.append((kind.package.replace("-", "_"), f'data = "{kind.name}:..."', kind.package))
    return needed


def require_family_package(model: str) -> None:
    """Skip unless the package the model's family needs (Family.package: torchvision) imports."""
    from ..families import family_of

    fam = family_of(model)
    if fam.package is None:
        return
    if importlib.util.find_spec(fam.package) is None:
        raise Skip(
            f"the {fam.name} family ({model}) needs {fam.package}, which is not installed here; "
            f"pip install {fam.package} (the build matching torch)"
        )
    try:
        importlib.import_module(fam.package)
    except Exception as exc:  # a torchvision built for another torch: "operator torchvision::nms does not exist"
        raise Skip(
            f"the {fam.name} family ({model}) needs {fam.package}, which fails to import here "
            f"({type(exc).__name__}: {str(exc)[:160]}); install the {fam.package} build matching torch"
        ) from None


def check_runnable(sc: Scenario, device: torch.device, model: str | None = None) -> None:
    """Skip when the scenario cannot run here; `model`: the resolved model, whose family may need
    a package of its own."""
    if device.type == "cpu" and (why := needs_cuda(sc)):
        raise Skip(why)
    if device.type == "cuda" and precision_matmuls(sc.precision) == "bf16" and not torch.cuda.is_bf16_supported():
        raise Skip(f"{sc.precision} is not supported by {torch.cuda.get_device_name(device)}")
    if sc.tf32 and device.type == "cuda" and torch.cuda.get_device_capability(device)[0] < 8:
        raise Skip(f"tf32 needs an Ampere or newer GPU, not {torch.cuda.get_device_name(device)}")
    if sc.fp8 and device.type == "cuda" and torch.cuda.get_device_capability(device) < FP8_CAPABILITY:
        major, minor = torch.cuda.get_device_capability(device)
        raise Skip(
            f"fp8 = true needs FP8 tensor cores (compute capability 8.9 or newer: Ada, Hopper), "
            f"not {torch.cuda.get_device_name(device)} ({major}.{minor})"
        )
    for module, technique, package in optional_packages(sc):
        require(module, technique, package)
    if model is not None:
        require_family_package(model)
    if sc.compile and device.type == "cpu" and not (shutil.which("cc") or shutil.which("gcc")):
        raise Skip("torch.compile on the CPU needs a C compiler (cc or gcc) on PATH")
