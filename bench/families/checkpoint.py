"""Plan-time checks of a checkpoint's weights against its config, before any worker starts: the
safetensors headers (read as JSON, no tensor loaded) against the tensors of the model the config
builds on the meta device. A weight file that cannot be read, weights of another architecture (no
parameter name in common) or of other dimensions (a shared name with another shape) are BadInput.
Names only one side has are allowed: transformers renames some on load (a MoE's per-expert weights
into one fused tensor) and drops tied ones on save."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import BadInput

HEADER_MAX_BYTES = 100 * 2**20  # a safetensors header is JSON; past this the file is not one


def safetensors_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """{tensor name: shape} from a .safetensors file's header."""
    try:
        with open(path, "rb") as fh:
            size = int.from_bytes(fh.read(8), "little")
            if not 0 < size <= HEADER_MAX_BYTES:
                raise BadInput(f"{path}: not a safetensors file (header of {size} bytes)")
            header = json.loads(fh.read(size))
    except OSError as exc:
        raise BadInput(f"{path}: cannot read the weights: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise BadInput(f"{path}: not a safetensors file ({exc})") from None
    if not isinstance(header, dict):
        raise BadInput(f"{path}: not a safetensors file (its header is not an object)")
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        shape = entry.get("shape") if isinstance(entry, dict) else None
        if not isinstance(shape, list) or not all(isinstance(n, int) for n in shape):
            raise BadInput(f"{path}: tensor {name!r} has no readable shape")
        out[name] = tuple(shape)
    return out


def check_weights(model: str, expected: dict[str, tuple[int, ...]]) -> None:
    """The checkpoint directory's weights against `expected` (the meta-built model's parameters)."""
    found: dict[str, tuple[int, ...]] = {}
    for file in sorted(Path(model).glob("*.safetensors")):
        found.update(safetensors_shapes(file))
    if not found:
        return
    common = [name for name in expected if name in found]
    if not common:
        sample = ", ".join(sorted(found)[:3])
        raise BadInput(
            f"{model}: its weights share no tensor name with the architecture its config.json names "
            f"(the weights hold {sample}, ...)",
            hint="the weights are another model's: fix config.json, or remove the weights to train random ones",
        )
    for name in common:
        if tuple(found[name]) != tuple(expected[name]):
            raise BadInput(
                f"{model}: weight {name} has shape {list(found[name])}, but its config.json builds "
                f"{list(expected[name])}",
                hint="the weights and config.json are of different dimensions",
            )
