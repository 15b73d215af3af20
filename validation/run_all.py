"""`make bench`: the published GPU results, in parts that can be resumed.

Parts (each a result directory under --out):
  full        gpubench run --matrix full --repeats 3        the guide's table
  llm         gpubench run --matrix llm --repeats 3         the decoder techniques on llama-1b (needs
              the llm extra: peft, bitsandbytes, liger-kernel, torchao); not in the default list
  throughput  gpubench run --matrix throughput --repeats 3  how far batch 4 is from the chip's best
  faults      gpubench run --matrix faults                  a real OOM and a real timeout mid-run
  fidelity    python -m validation.fidelity                 engine vs hand-written loop; sampler cost
  interleaved python -m validation.interleaved --control tf32-b4 --sampler-cost bf16-b4
              --bare-engine fp16-b4 --trackers fp16-b4: the engine against the loop in one
              process, in alternating blocks (every fidelity scenario), with an A/A control, the
              sampler's cost, and the engine's cost split into accelerate's and gpubench's; each in
              both build orders, pooled; takes no extra arguments
  interleaved-launch-bound
              python -m validation.interleaved --only tf32-b4,fp16-b4,bf16-b4 --pairs 100: the
              launch-bound rows again, 2.5x the pairs; takes no extra arguments
  fabric-vit  gpubench run --matrix fabric-vit --repeats 3     the Fabric talk's table (needs the
              fabric extra); DDP and FSDP rows skipped on one GPU
  fabric-vit-fidelity
              python -m validation.model_fidelity --results OUT/fabric-vit --matrix fabric-vit
              --repeats 3: the hand-written loop beside each row of the fabric-vit part, which must
              have finished; takes no extra arguments
  fabric-vit-interleaved
              python -m validation.interleaved --matrix fabric-vit --pairs 80 --only (every
              single-GPU row) --profile-block: the Fabric talk's rows with both ViTs and the
              Accelerate row of the same recipe against their loops (the Fabric issue's 5%), 3
              profiled steps a side after the pairs (where a slower side's host time goes); 18
              processes of about 65 s on an H100 (20 minutes); takes no extra arguments
  fabric-vit-interleaved-pieces
              --only '' --control plain --bare-engine accelerate-32 --trackers plain
              --sampler-cost plain: an A/A control, accelerate's and gpubench's shares, the
              sampler's cost on a ViT step
  fabric-vit-interleaved-no-sampler
              plain and fabric-32 against their loops with the NVML sampler off (--no-sampler)
  cumulative-bert-base
              gpubench run --matrix cumulative-bert-base --repeats 3: the RTX 3080 re-run's table
              (bert-base, each technique added to the previous ones)
  aa          two identical runs of full --only baseline,fp16,bf16,tf32 --repeats 3 (aa/a, aa/b),
              then `gpubench compare aa/a aa/b` into aa/compare.md: the A/A test, the noise floor

A part whose directory holds an unfinished run is resumed (`--resume`), a finished one is skipped,
so a GPU session with a time limit per command can run `make bench` again until everything is done.
`--time-limit SECONDS` (make bench BENCH_LIMIT=SECONDS) hands each part the time left, so it stops
between workers (or runs) instead of losing one to a kill; exit 4 then says "run it again". Each
part's process runs under a timeout (validation/parts.py: the time left plus 40 minutes, or 24
hours without --time-limit), a guard against a hang that ends the part with exit 124.

Research parts that once ran here (fidelity-matched-cpu, engine-costs, cv-long, cpu-loop) are
archived with their scripts and results at the git tag lab-h200-2026-11.

    python -m validation.run_all --out results/bench --parts full,throughput
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import NamedTuple

from validation.parts import (
    INTERRUPTED,
    TIME_LIMIT,
    child_timeout_s,
    expired,
    finished,
    gpubench_run,
    limit_args,
    run_child,
    run_script,
)

PARTS = {
    "full": ["--matrix", "full", "--repeats", "3"],
    "llm": ["--matrix", "llm", "--repeats", "3"],
    "fabric-vit": ["--matrix", "fabric-vit", "--repeats", "3"],
    "throughput": ["--matrix", "throughput", "--repeats", "3"],
    "faults": ["--matrix", "faults"],
    "cumulative-bert-base": ["--matrix", "cumulative-bert-base", "--repeats", "3"],
    "aa": ["--matrix", "full", "--only", "baseline,fp16,bf16,tf32", "--repeats", "3"],
}


class ScriptPart(NamedTuple):
    """A part run by a validation module of its own rather than by `gpubench run`."""

    module: str  # python -m validation.MODULE
    args: list[str]
    last: str  # the file the script writes last: there, the part is finished
    takes_run_args: bool  # arguments after `--` go on to its `gpubench run`s
    results_of: str = ""  # the part whose finished run it reads (--results), a directory beside its own


SCRIPT_PARTS = {
    "fidelity": ScriptPart("fidelity", [], "fidelity.csv", True),
    "interleaved": ScriptPart("interleaved", [  # the fidelity matrix as it is
        "--control", "tf32-b4", "--sampler-cost", "bf16-b4", "--bare-engine", "fp16-b4", "--trackers", "fp16-b4",
    ], "interleaved.csv", False),
    # the launch-bound rows again, with the trackers that cost no kernel, 2.5x the pairs
    "interleaved-launch-bound": ScriptPart("interleaved", [
        "--only", "tf32-b4,fp16-b4,bf16-b4", "--pairs", "100",
    ], "interleaved.csv", False),
    "fabric-vit-fidelity": ScriptPart("model_fidelity", [
        "--matrix", "fabric-vit", "--repeats", "3",
    ], "fidelity.csv", False, results_of="fabric-vit"),
    # every single-GPU row of the Fabric talk against its loop (the Fabric issue's 5%), both ViTs,
    # and the Accelerate row of the same recipe, the engine with the sampler on its blocks; 40 pairs
    # in each build order (20 left intervals of +-3-4% on the unsteady H100 hosts). Apart from the
    # pieces below, so that it fits one session's device time.
    "fabric-vit-interleaved": ScriptPart("interleaved", [
        "--matrix", "fabric-vit", "--pairs", "80",
        "--only", "plain,compile,fabric-32,fabric-bf16,fabric-fp16,fabric-bf16-b64,accelerate-32,"
                  "tv-plain,tv-fabric-bf16",
        "--profile-block",
    ], "interleaved.csv", False),
    # an A/A control, accelerate's share (its bare engine) and gpubench's (the torch engine against
    # itself bare), the sampler's cost on the loop
    "fabric-vit-interleaved-pieces": ScriptPart("interleaved", [
        "--matrix", "fabric-vit", "--pairs", "40", "--only", "", "--control", "plain",
        "--bare-engine", "accelerate-32", "--trackers", "plain", "--sampler-cost", "plain",
    ], "interleaved.csv", False),
    # and the engine with the sampler off
    "fabric-vit-interleaved-no-sampler": ScriptPart("interleaved", [
        "--matrix", "fabric-vit", "--pairs", "20", "--only", "plain,fabric-32", "--no-sampler", "--profile-block",
    ], "interleaved.csv", False),
}  # fmt: skip
COMPARE_TIMEOUT_S = 300.0  # gpubench compare of two result directories: seconds


def run_aa(out: Path, extra: list[str], deadline: float | None) -> int:
    """The A/A test: the same runs twice, compared; compare's exit code 1 is a finding, not a failure."""
    for side in ("a", "b"):
        code = run_part("aa", out / side, extra, deadline, args=PARTS["aa"])
        if code not in (0, 1):
            return code
    cmd = [sys.executable, "-m", "bench", "compare", str(out / "a"), str(out / "b")]
    cmd += ["--format", "markdown", "--output", str(out / "compare.md")]
    code = run_child("aa compare", cmd, COMPARE_TIMEOUT_S)
    return 0 if code in (0, 1) else code


def run_part(name: str, out: Path, extra: list[str], deadline: float | None, args: list[str] | None = None) -> int:
    if name == "aa" and args is None:
        return run_aa(out, extra, deadline)
    if name in SCRIPT_PARTS:
        part = SCRIPT_PARTS[name]
        if (out / part.last).is_file():
            return 0
        cmd = [sys.executable, "-m", f"validation.{part.module}", "--out", str(out), *part.args]
        if part.results_of:
            source = out.parent / part.results_of
            if not finished(source):
                print(
                    f"{name}: reads the finished run of part {part.results_of} in {source}, which is not there; "
                    f"run --parts {part.results_of},{name}",
                    file=sys.stderr,
                )
                return 2
            cmd += ["--results", str(source)]
        cmd += limit_args(deadline)
        cmd += ["--", *extra] if extra and part.takes_run_args else []
        return run_child(name, cmd, child_timeout_s(deadline))
    return gpubench_run(name, out, [*(args or PARTS[name]), *extra], deadline)


def main() -> int:
    return run_script(_main)


def _main() -> int:
    p = argparse.ArgumentParser(
        prog="python -m validation.run_all", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--parts",
        default="full,throughput,faults,fidelity,aa,cumulative-bert-base,interleaved,interleaved-launch-bound",
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
        if codes[name] in (INTERRUPTED, TIME_LIMIT):
            break
    print(" ".join(f"{k}={v}" for k, v in codes.items()), file=sys.stderr)
    if TIME_LIMIT in codes.values():
        print("time limit reached: run the same command again to go on", file=sys.stderr)
    # faults is expected to end with failed rows (exit 1); anything else failing fails the bench
    return max([c for k, c in codes.items() if k != "faults" or c not in (0, 1)] or [0])


if __name__ == "__main__":
    sys.exit(main())
