"""gpubench: the single-GPU efficient-training ablations, measured on your own hardware."""

__version__ = "0.1.0"
