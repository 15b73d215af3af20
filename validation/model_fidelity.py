"""gpubench's rows of a matrix beside the hand-written loop (validation/model_loop.py) of the same
scenarios on the same machine: the check behind the moe and fabric-talk sets (each row within 5%).

    python -m validation.model_fidelity --results results/moe/moe --matrix moe --out OUT --repeats 3

For every scenario with `ok` rows in the result directory, the loop runs --repeats times, each in a
process of its own (OUT/loop-SCENARIO-rR.json; a finished one is kept, so running the script again
goes on where it stopped; --time-limit starts nothing once the time is up and exits 4). Then it
writes OUT/fidelity.csv: per scenario the median samples/s of gpubench's repeats and of the loop's,
their ratio and `within_5pct`, and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from bench.results import read_results

LOOP_TIMEOUT_S = 1800.0
LIMIT = 0.05


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m validation.model_fidelity", description=__doc__)
    p.add_argument("--results", required=True, type=Path, help="a gpubench result directory of the matrix")
    p.add_argument("--matrix", required=True)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--only", default="", help="scenarios, comma-separated (default: every ok one)")
    p.add_argument("--device", default="cuda")
    p.add_argument(
        "--loop",
        choices=("auto", "plain", "fabric"),
        default="auto",
        help="the yardstick (validation/model_loop.py): auto is Fabric's loop for engine = fabric rows; "
        "plain beside it measures Fabric's own cost (its files: loop-plain-SCENARIO-rR.json)",
    )
    p.add_argument("--time-limit", type=float, default=None, help="seconds; start nothing after that (exit 4)")
    return p


def stem(a: argparse.Namespace) -> str:
    return "loop" if a.loop == "auto" else f"loop-{a.loop}"


def loop_once(a: argparse.Namespace, scenario: str, repeat: int, model: str | None) -> Path:
    out = a.out / f"{stem(a)}-{scenario}-r{repeat}.json"
    if out.is_file():
        return out
    cmd = [sys.executable, "-m", "validation.model_loop", "--matrix", a.matrix, "--scenario", scenario]
    cmd += ["--device", a.device, "--out", str(out), "--loop", a.loop] + (["--model", model] if model else [])
    log = a.out / f"{stem(a)}-{scenario}-r{repeat}.log"
    with log.open("w") as fh:
        subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=LOOP_TIMEOUT_S, check=False, env=os.environ)
    return out


def table(a: argparse.Namespace, rows: pd.DataFrame, scenarios: list[str]) -> pd.DataFrame:
    out = []
    for name in scenarios:
        engine = rows[(rows["scenario"] == name) & (rows["status"] == "ok")]["samples_per_s"].astype(float)
        found = [json.loads(p.read_text()) for p in sorted(a.out.glob(f"{stem(a)}-{name}-r*.json"))]
        loops = [f["samples_per_s"] for f in found]
        if engine.empty or not loops:
            continue
        e, lo = float(engine.median()), statistics.median(loops)
        out.append(
            {
                "scenario": name,
                "engine_samples_per_s": e,
                "loop": found[0].get("loop", "plain"),
                "loop_samples_per_s": lo,
                "ratio": e / lo,
                "within_5pct": abs(e / lo - 1) <= LIMIT,
                "engine_repeats": len(engine),
                "loop_repeats": len(loops),
            }
        )
    return pd.DataFrame(out)


def main() -> int:
    a = parser().parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    rows = read_results(a.results)
    ok = rows[rows["status"] == "ok"]
    scenarios = list(dict.fromkeys(ok["scenario"]))
    if a.only:
        scenarios = [s for s in scenarios if s in a.only.split(",")]
    begin = time.monotonic()
    for repeat in range(a.repeats):
        for name in scenarios:
            if a.time_limit is not None and time.monotonic() - begin > a.time_limit:
                print("time limit reached: run again to go on", file=sys.stderr)
                return 4
            model = None if a.device != "cpu" else str(ok[ok["scenario"] == name]["model_resolved"].iloc[0])
            loop_once(a, name, repeat, model)
    result = table(a, rows, scenarios)
    result.to_csv(a.out / ("fidelity.csv" if a.loop == "auto" else f"fidelity-{a.loop}.csv"), index=False)
    print(result.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
