"""The validation suite: evidence that gpubench's figures mean what they say, on a GPU.

Not part of the `gpubench` product (nothing in bench/ imports it); run from the repository root as
`python -m validation.X`:

- `reference_loop`: a minimal hand-written PyTorch training loop, the yardstick;
- `fidelity`: `gpubench run` against the reference loop, repeat by repeat, and the NVML
  sampler's cost;
- `interleaved`: the engine against the loop in one process, in alternating blocks, with an A/A
  control, the sampler's cost, and the engine's cost split into accelerate's and gpubench's
  (`interleave_sides` builds the sides, `interleave_stats` computes the ratios and intervals);
- `power`: the power study of `gpubench compare`'s gate: the published repeats resampled into
  A/A and slowed nights, judged by compare's own function (no GPU);
- `run_all`: `make bench`, the published GPU results in resumable parts (`parts`: what the
  drivers share).

Research scripts that once lived beside these (engine_costs, cpu_noise, the CPU-speed fit) and
their result sets are archived at the git tag `lab-h200-2026-11`.
"""
