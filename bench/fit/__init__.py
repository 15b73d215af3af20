"""`gpubench fit`: the largest batch size (or sequence length) each scenario trains with in a given
GPU memory, and its throughput there.

search.py   the search as a pure function: jump to a guess, gallop, bisect, within a probe budget
plan.py     what a probe is (the scenario made short, at one value) and the memory model's guess
summary.py  what each search found: DIR/fit.json, the table's rows, the fastest recipe that fits
session.py  end to end: plan (exit 2 before any work), probes through the run's runner, fit.json
The worker side of --gpu-memory is bench/worker/memcap.py (a capped allocator, or the CPU's stand-in).
"""
