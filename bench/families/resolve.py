"""Which model a scenario names, resolved without torch: a preset (random weights, real
dimensions; each family's, bench/families/), a local checkpoint directory, a directory or JSON file
holding only a config (random weights from it), or a hub id found in the local Hugging Face cache.
gpubench never downloads: a hub id that is not in the cache is refused, saying how to fetch it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import BadInput, did_you_mean
from . import CONFIG_NAME, PRESETS, family_of, is_inline

AUTO_GPU, AUTO_CPU = "bert-large", "tiny"
WEIGHT_SUFFIXES = (".safetensors",)
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt")


def resolve_model(name: str, device: str) -> str:
    """'auto' becomes a preset for the device; presets pass; a local directory must hold a
    config.json; a .json file is a config; `org/name` is looked up in the local HF cache."""
    if name == "auto":
        return AUTO_CPU if device == "cpu" else AUTO_GPU
    if name in PRESETS:
        return name
    if is_inline(name):
        return inline_config(name)
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / CONFIG_NAME).is_file():
            raise BadInput(
                f"model directory {path} has no config.json",
                hint="give a Hugging Face checkpoint directory, a directory holding its config.json, or a preset",
            )
        return str(path.resolve())
    if path.is_file():
        if path.suffix != ".json":
            raise BadInput(f"model file {path} is not a JSON config", hint="give a config.json or its directory")
        return str(path.resolve())
    if _looks_like_hub_id(name):
        cached = hub_cache_snapshot(name)
        if cached is not None:
            return str(cached)
        raise BadInput(
            f"model '{name}' is not in the local Hugging Face cache ({hub_cache_dir()})",
            hint=f"gpubench never downloads; fetch its config once with `hf download {name} config.json` "
            "(random weights are what a benchmark needs), or give a directory holding its config.json",
        )
    hint = did_you_mean(name, list(PRESETS))
    raise BadInput(
        f"unknown model '{name}': not a preset, a local directory or config file, or a hub id (org/name)",
        hint=hint or f"presets are {', '.join(PRESETS)}",
    )


def preset_config(name: str) -> tuple[str, dict[str, Any]]:
    """(model_type, the keyword arguments of its transformers config class) of a preset."""
    cfg = dict(PRESETS[name])
    return cfg.pop("model_type"), cfg


def inline_config(text: str) -> str:
    """A model config given inline as JSON (a matrix's [model] table): the same text for the same
    table, whatever its key order, so two runs of one matrix name one model."""
    try:
        cfg = json.loads(text)
    except ValueError as exc:
        raise BadInput(f"model config given inline is not valid JSON: {exc}") from None
    if not isinstance(cfg, dict):
        raise BadInput("a model config given inline must be a JSON object (a [model] table)")
    return json.dumps(cfg, sort_keys=True, separators=(",", ":"))


def display_name(model: str) -> str:
    """A resolved model as a person reads it: an inline config as `[model] MODEL_TYPE`."""
    if is_inline(model):
        return f"[model] {json.loads(model).get('model_type', '?')}"
    return model


def has_weights(model: str) -> bool:
    """A checkpoint directory with safetensors weights (else the model is built from its config)."""
    path = Path(model)
    return not is_inline(model) and path.is_dir() and any(p.suffix in WEIGHT_SUFFIXES for p in path.iterdir())


def check_model(model: str) -> None:
    """Plan-time checks of a resolved model: its config reads and names an architecture something
    builds; a directory's weights are safetensors (never pickle)."""
    path = Path(model)
    if (
        not is_inline(model)
        and path.is_dir()
        and not has_weights(model)
        and any(p.suffix in PICKLE_SUFFIXES for p in path.iterdir())
    ):
        raise BadInput(
            f"model directory {path} has weights only as pickle files (.bin/.pt), which gpubench never loads",
            hint="save it with save_pretrained(..., safe_serialization=True), or remove them to train random weights",
        )
    fam = family_of(model)
    if has_weights(model):
        if fam.builder is not None:
            raise BadInput(
                f"model directory {path}: the {fam.name} family trains random weights only; gpubench does not "
                "load its checkpoints",
                hint="remove the weights from the directory (keep config.json), or use a preset such as tv-vit-b16",
            )
        from .build import parameter_shapes
        from .checkpoint import check_weights

        check_weights(model, parameter_shapes(model))


def hub_cache_dir() -> Path:
    """The hub cache as huggingface_hub finds it: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def hub_cache_snapshot(repo_id: str, revision: str = "main") -> Path | None:
    """The cached snapshot of a hub model holding a config.json: the revision's ref, else the newest
    snapshot; None when the cache has none."""
    folder = hub_cache_dir() / f"models--{repo_id.replace('/', '--')}"
    snapshots = folder / "snapshots"
    ref = folder / "refs" / revision
    candidates: list[Path] = []
    if ref.is_file():
        candidates.append(snapshots / ref.read_text(encoding="utf-8").strip())
    if snapshots.is_dir():
        candidates += sorted(snapshots.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)
    for snap in candidates:
        if (snap / CONFIG_NAME).is_file():
            return snap.resolve()
    return None


def _looks_like_hub_id(name: str) -> bool:
    parts = name.split("/")
    ok = all(p and all(c.isalnum() or c in "-_." for c in p) and not p.startswith(".") for p in parts)
    return len(parts) == 2 and ok
