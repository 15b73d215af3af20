"""A stand-in `torchvision` package for the torchvision family's tests: CI has no torchvision (and
PyPI's cannot be installed beside the CPU torch), so the tests write this one, plain torch, to a
folder on PYTHONPATH. Its VisionTransformer has torchvision's module tree (conv_proj, class_token,
encoder.layers of blocks with nn.MultiheadAttention, heads.head) and attributes (hidden_dim,
mlp_dim, patch_size, num_heads), at any size; get_model knows vit_b_16."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MODELS = """
import torch
from torch import nn


class EncoderBlock(nn.Module):
    def __init__(self, num_heads, hidden_dim, mlp_dim):
        super().__init__()
        self.num_heads = num_heads
        self.ln_1 = nn.LayerNorm(hidden_dim, eps=1e-6)
        self.self_attention = nn.MultiheadAttention(hidden_dim, num_heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(hidden_dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(hidden_dim, mlp_dim), nn.GELU(), nn.Linear(mlp_dim, hidden_dim))

    def forward(self, x):
        y = self.ln_1(x)
        y, _ = self.self_attention(y, y, y, need_weights=False)
        x = x + y
        return x + self.mlp(self.ln_2(x))


class Encoder(nn.Module):
    def __init__(self, seq_length, num_layers, num_heads, hidden_dim, mlp_dim):
        super().__init__()
        self.pos_embedding = nn.Parameter(torch.empty(1, seq_length, hidden_dim).normal_(std=0.02))
        self.layers = nn.Sequential(*(EncoderBlock(num_heads, hidden_dim, mlp_dim) for _ in range(num_layers)))
        self.ln = nn.LayerNorm(hidden_dim, eps=1e-6)

    def forward(self, x):
        return self.ln(self.layers(x + self.pos_embedding))


class VisionTransformer(nn.Module):
    def __init__(self, image_size, patch_size, num_layers, num_heads, hidden_dim, mlp_dim, num_classes=1000):
        super().__init__()
        self.image_size, self.patch_size = image_size, patch_size
        self.hidden_dim, self.mlp_dim = hidden_dim, mlp_dim
        self.conv_proj = nn.Conv2d(3, hidden_dim, kernel_size=patch_size, stride=patch_size)
        seq_length = (image_size // patch_size) ** 2 + 1
        self.class_token = nn.Parameter(torch.zeros(1, 1, hidden_dim))
        self.encoder = Encoder(seq_length, num_layers, num_heads, hidden_dim, mlp_dim)
        self.heads = nn.Sequential()
        self.heads.add_module("head", nn.Linear(hidden_dim, num_classes))

    def forward(self, x):
        x = self.conv_proj(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1)
        return self.heads(self.encoder(x)[:, 0])


def vit_b_16(*, weights=None, image_size=224, **kwargs):
    assert weights is None, "the stub has no weights"
    return VisionTransformer(image_size, 16, 12, 12, 768, 3072, **kwargs)


def get_model(name, **config):
    return {"vit_b_16": vit_b_16}[name](**config)
"""


# what transformers imports from torchvision once it finds one (transformers/image_utils.py,
# image_processing_utils.py: every model import goes through them)
MODES = ("nearest", "nearest-exact", "bilinear", "bicubic", "box", "hamming", "lanczos")
# a module whose every function is a placeholder (transformers binds names at import, never calls them here)
PLACEHOLDERS = (
    "def __getattr__(name):\n"
    "    def placeholder(*args, **kwargs):\n"
    "        raise NotImplementedError(name)\n\n"
    "    return placeholder\n"
)
READ_MODES = "import enum\n\n\nclass ImageReadMode(enum.Enum):\n    UNCHANGED = 0\n    RGB = 3\n\n\n"
TRANSFORMS = {
    "transforms/__init__.py": "import enum\n\n\nclass InterpolationMode(enum.Enum):\n"
    + "".join(f"    {m.upper().replace('-', '_')} = {m!r}\n" for m in MODES),
    "transforms/functional.py": PLACEHOLDERS,
    "transforms/v2/__init__.py": "",
    "transforms/v2/functional.py": PLACEHOLDERS,
    "io/__init__.py": READ_MODES + PLACEHOLDERS,
}


def write_stub(root: Path) -> Path:
    """The stub package under `root` (put `root` on PYTHONPATH or sys.path); returns `root`."""
    package = root / "torchvision"
    files = {
        "__init__.py": '"""A test stub of torchvision."""\n__version__ = "0.0+stub"\nfrom . import models\n',
        "models/__init__.py": MODELS,
        **TRANSFORMS,
    }
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text, encoding="utf-8")
    return root


def torchvision_in_process(tmp_path: Path, monkeypatch: Any) -> Iterator[str]:
    """For a fixture: torchvision importable in this process, the real one where it imports, else the
    stub (on sys.path until the test ends, its modules dropped then). transformers decides once
    whether torchvision is there (and then imports its transforms): it decides before the stub
    appears, so it never looks for the stub's. Yields "real" or "stub"."""
    import transformers.image_processing_utils  # noqa: F401  (transformers' check, made without the stub)
    import transformers.modeling_utils  # noqa: F401

    if real_torchvision():
        yield "real"
        return
    monkeypatch.syspath_prepend(str(write_stub(tmp_path / "stub")))
    try:
        yield "stub"
    finally:
        for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
            del sys.modules[name]


def real_torchvision() -> bool:
    """Whether a real torchvision imports here (never in CI: then the tests use the stub)."""
    import importlib.util

    if importlib.util.find_spec("torchvision") is None:
        return False
    try:
        import torchvision  # noqa: F401
    except Exception:
        return False
    return True
