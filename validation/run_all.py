"""`make bench`: the published GPU results, in parts that can be resumed.

Parts (each a result directory under --out):
  full        gpubench run --matrix full --repeats 3        the guide's table
  throughput  gpubench run --matrix throughput --repeats 3  how far batch 4 is from the chip's best
  faults      gpubench run --matrix faults                  a real OOM and a real timeout mid-run
  fidelity    benchmarks/fidelity.py                        engine vs hand-written loop; sampler cost
  fidelity-matched-cpu
              benchmarks/fidelity.py --only tf32-b4,fp16-b4 --repeats 13 --sampler-off ''
              --no-non-blocking-loop: the launch-bound rows over many alternating pairs, with the
              ratio at equal CPU speed and the pairs' geometric mean, each with a 95% interval
  interleaved benchmarks/interleaved.py --control tf32-b4 --sampler-cost bf16-b4 --bare-engine fp16-b4
              --trackers fp16-b4: the engine against the loop in one process, in alternating blocks
              (every fidelity scenario), with an A/A control, the sampler's cost, and the engine's
              cost split into accelerate's and gpubench's; each in both build orders, pooled; takes
              no extra arguments
  interleaved-launch-bound
              benchmarks/interleaved.py --only tf32-b4,fp16-b4,bf16-b4 --pairs 100: the launch-bound
              rows again with the trackers that cost no kernel, 2.5x the pairs
  engine-costs
              benchmarks/engine_costs.py --only fp16-b4,bf16-b4: each piece of the engine's step
              that the loop does not have, in microseconds of host time
  cumulative-bert-base
              gpubench run --matrix cumulative-bert-base --repeats 3: the RTX 3080 re-run's table
              (bert-base, each technique added to the previous ones)
  cv-long     gpubench run --matrix full --only fp16,bf16,tf32 --repeats 3 --samples 2048: the
              launch-bound rows with windows 4x as long, to see whether their CV falls with length
  cpu-loop    gpubench run --matrix full --only tf32,fp16 --repeats 4: launch-bound rows, each with
              the CPU probe around its window (cpu_loop_start_ms, cpu_loop_end_ms), to set beside
              its samples/s
  aa          two identical runs of full --only baseline,fp16,bf16,tf32 --repeats 3 (aa/a, aa/b),
              then `gpubench compare aa/a aa/b` into aa/compare.md: the A/A test, the noise floor

A part whose directory holds an unfinished run is resumed (`--resume`), a finished one is skipped,
so a GPU session with a time limit per command can run `make bench` again until everything is done.
`--time-limit SECONDS` (make bench BENCH_LIMIT=SECONDS) hands each gpubench run the time left, so
it stops between workers instead of losing one to a kill; exit 4 then says "run it again".
The fidelity part gets it too, and stops between its runs.

    python benchmarks/run_all.py --out results/h200-bert-large --parts full,throughput
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

from parts import TIME_LIMIT, expired, gpubench_run, limit_args

from bench.errors import ExitCode

HERE = Path(__file__).resolve().parent
PARTS = {
    "full": ["--matrix", "full", "--repeats", "3"],
    "throughput": ["--matrix", "throughput", "--repeats", "3"],
    "faults": ["--matrix", "faults"],
    "cumulative-bert-base": ["--matrix", "cumulative-bert-base", "--repeats", "3"],
    "cv-long": ["--matrix", "full", "--only", "fp16,bf16,tf32", "--repeats", "3", "--samples", "2048"],
    "aa": ["--matrix", "full", "--only", "baseline,fp16,bf16,tf32", "--repeats", "3"],
    "cpu-loop": ["--matrix", "full", "--only", "tf32,fp16", "--repeats", "4"],
}


class ScriptPart(NamedTuple):
    """A part run by a script of its own rather than by `gpubench run`."""

    script: str
    args: list[str]
    last: str  # the file the script writes last: there, the part is finished
    takes_run_args: bool  # arguments after `--` go on to its `gpubench run`s


SCRIPT_PARTS = {
    "fidelity": ScriptPart("fidelity.py", [], "fidelity.csv", True),
    "fidelity-matched-cpu": ScriptPart("fidelity.py", [
        "--only", "tf32-b4,fp16-b4", "--repeats", "13", "--sampler-off", "", "--no-non-blocking-loop",
    ], "fidelity.csv", True),
    "interleaved": ScriptPart("interleaved.py", [  # the fidelity matrix as it is
        "--control", "tf32-b4", "--sampler-cost", "bf16-b4", "--bare-engine", "fp16-b4", "--trackers", "fp16-b4",
    ], "interleaved.csv", False),
    # results/README.md, "The launch-bound rows again, with trackers that cost no kernel"
    "interleaved-launch-bound": ScriptPart("interleaved.py", [
        "--only", "tf32-b4,fp16-b4,bf16-b4", "--pairs", "100",
    ], "interleaved.csv", False),
    "engine-costs": ScriptPart("engine_costs.py", ["--only", "fp16-b4,bf16-b4"], "engine-costs.csv", False),
}  # fmt: skip
COMPARE_TIMEOUT_S = 300


def run_aa(out: Path, extra: list[str], deadline: float | None) -> int:
    """The A/A test: the same runs twice, compared; compare's exit code 1 is a finding, not a failure."""
    for side in ("a", "b"):
        code = run_part("aa", out / side, extra, deadline, args=PARTS["aa"])
        if code not in (0, 1):
            return code
    cmd = [sys.executable, "-m", "bench", "compare", str(out / "a"), str(out / "b")]
    cmd += ["--format", "markdown", "--output", str(out / "compare.md")]
    print("+ " + " ".join(cmd), file=sys.stderr)
    code = subprocess.run(cmd, check=False, timeout=COMPARE_TIMEOUT_S).returncode
    return 0 if code in (0, 1) else code


def run_part(name: str, out: Path, extra: list[str], deadline: float | None, args: list[str] | None = None) -> int:
    if name == "aa" and args is None:
        return run_aa(out, extra, deadline)
    if name in SCRIPT_PARTS:
        part = SCRIPT_PARTS[name]
        if (out / part.last).is_file():
            return 0
        cmd = [sys.executable, str(HERE / part.script), "--out", str(out), *part.args, *limit_args(deadline)]
        cmd += ["--", *extra] if extra and part.takes_run_args else []
        print("+ " + " ".join(cmd), file=sys.stderr)
        return subprocess.run(cmd, check=False).returncode
    return gpubench_run(name, out, [*(args or PARTS[name]), *extra], deadline)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--parts",
        default="full,throughput,faults,fidelity,aa,cumulative-bert-base,cv-long,cpu-loop,fidelity-matched-cpu,"
        "interleaved,interleaved-launch-bound,engine-costs",
    )
    p.add_argument("--time-limit", type=float, default=None, help="seconds for all parts (see above)")
    p.add_argument("extra", nargs="*", help="passed to gpubench run (e.g. -- --model bert-base)")
    a = p.parse_args()
    deadline = None if a.time_limit is None else time.monotonic() + a.time_limit
    codes = {}
    for name in [x for x in a.parts.split(",") if x]:
        if name not in (*PARTS, *SCRIPT_PARTS):
            print(f"unknown part {name!r}; parts: {', '.join([*PARTS, *SCRIPT_PARTS])}", file=sys.stderr)
            return 2
        if expired(deadline):
            codes[name] = TIME_LIMIT
            break
        codes[name] = run_part(name, a.out / name, a.extra, deadline)
        if codes[name] in (ExitCode.INTERRUPTED, TIME_LIMIT):
            break
    print(" ".join(f"{k}={v}" for k, v in codes.items()), file=sys.stderr)
    if TIME_LIMIT in codes.values():
        print("time limit reached: run the same command again to go on", file=sys.stderr)
    # faults is expected to end with failed rows (exit 1); anything else failing fails the bench
    return max([c for k, c in codes.items() if k != "faults" or c not in (0, 1)] or [0])


if __name__ == "__main__":
    sys.exit(main())
