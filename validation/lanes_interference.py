"""A/A: do lanes disturb each other? (`gpubench run --lanes`, docs/cluster.md). NOT RUN YET: it
needs a host with 2 GPUs or more.

The same single-GPU scenarios run twice on cuda:0, alone (a plain run) and as lane 0 beside N-1
other lanes busy with the same matrix on the other GPUs; each scenario's median samples/s and
step time over its repeats are compared (lane / alone - 1, in %), with each side's spread, so a
shift inside the noise reads as none. Shared CPU, memory bandwidth, PCIe and power are what could
move them: launch-bound small batches first.

    python -m validation.lanes_interference --matrix quick --repeats 5 --lanes all --out /tmp/lanes-aa
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

from bench.results import read_results

TIMEOUT_S = 6 * 3600


def gpubench(args: list[str]) -> int:
    return subprocess.run([sys.executable, "-m", "bench", *args], timeout=TIMEOUT_S, check=False).returncode


def medians(result_dir: Path, device: str | None = None) -> dict[str, tuple[float, float]]:
    """Each scenario's (median samples/s, spread %) over its ok repeats (on `device` only, if given)."""
    frame = read_results(result_dir)
    frame = frame[frame["status"] == "ok"]
    if device is not None:
        frame = frame[frame["device"] == device]
    out = {}
    for name, group in frame.groupby("scenario", sort=False):
        values = [float(v) for v in group["samples_per_s"]]
        median = statistics.median(values)
        out[str(name)] = (median, (max(values) - min(values)) / median * 100 if median else float("nan"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrix", default="quick")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lanes", default="all")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    common = ["run", "--matrix", args.matrix, "--repeats", str(args.repeats), "--no-report"]
    alone, lanes = args.out / "alone", args.out / "lanes"
    gpubench([*common, "--device", "cuda:0", "--out", str(alone)])
    # lanes deal the scenarios round-robin: lane 0 (cuda:0) runs scenarios 0, N, 2N, ... while the
    # other lanes keep the other GPUs busy; those cuda:0 rows are the lanes side
    gpubench([*common, "--device", "cuda:0", "--lanes", args.lanes, "--out", str(lanes)])
    a, b = medians(alone), medians(lanes, device="cuda:0")
    print(f"{'scenario':<20} {'alone':>10} {'lanes':>10} {'change':>8} {'spread a/b':>12}")
    for name in a:
        if name in b:
            (x, sx), (y, sy) = a[name], b[name]
            print(f"{name:<20} {x:10.2f} {y:10.2f} {(y / x - 1) * 100:+7.1f}% {sx:5.1f}/{sy:4.1f}%")


if __name__ == "__main__":
    main()
