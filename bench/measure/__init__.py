"""Measurements taken by the parent, off the training process: NVML sampling, host OOM kills, FLOPs."""
