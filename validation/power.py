"""The power study of `gpubench compare`'s gate: how often an unchanged matrix fails, and how often a
slower scenario is caught, with the noise of the published H200 repeats.

    python -m validation.power                       # the table in docs/compare.md
    python -m validation.power --repeats 3,10 --format markdown

No GPU: it reads the result sets --sets under --results (every results.csv in them with a scenario
of 2 or more ok repeats; by default the H200 runs of `full`'s rows: results/guide-table/full and
results/gate-noise/aa and launchers) and resamples their repeats into simulated nights, each judged by the very
function `gpubench compare` judges with (bench.compare.gate.judge: samples/s and peak memory, one
family each, with the default thresholds).

The nights. The matrix is that of --matrix-set (`guide-table/full`: 13 scenarios). A scenario's figures in
other sets count only where its settings equal those in --matrix-set (bench.compare.settings).
On the log scale, a night's repeat of a scenario is its level, plus the night's offset, plus a
within-night residual:
- the residual: the scenario's own spread (pooled over its sets: bench.compare.gate.pooled_spread)
  times a standardised residual drawn from its class's pool (each set's residuals around its own
  mean, scaled by sqrt(m / (m - 1)) for m repeats and divided by the scenario's spread), so each
  row keeps its measured spread and its class's tails;
- the offset: normal, with the class's run-to-run standard deviation (between the means of a
  scenario's sets, less what their own repeats explain; pooled over the class's scenarios with 2
  or more sets), drawn afresh for every scenario and night (independent: the pessimistic case for
  a whole-matrix gate);
- peak memory: each repeat drawn from the scenario's recorded values (no offset).
A/A: two such nights compared. Slowed: the new night's samples/s of one scenario x 1 / (1 + s).

Row classes (from the settings): launch-bound rows are micro-batch 1, and batch 4 or less in half
precision or TF32 (on an H200 their steps follow the host CPU); the rest are compute-bound.

Printed per number of repeats a side: the share of A/A nights whose whole matrix fails (speed or
memory), per class the share of rows falsely called a regression, the share of slowed rows
caught at each slow-down (every row of the class slowed in turn), and per row its spread and the
change its comparison could detect (the median `detectable_pct` over the A/A nights).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.compare.comparison import MEMORY_METRIC, SPEED_METRIC, Thresholds
from bench.compare.gate import Sample, judge, pooled_spread
from bench.fmt import md_table
from bench.results import load_run
from bench.results.identity import setting_differences

RESULTS = Path("results")
MATRIX_SET = "guide-table/full"
NOISE_SETS = ("guide-table/full", "gate-noise/aa", "gate-noise/launchers")  # the bert-large `full` rows on H200s
CLASSES = ("compute-bound", "launch-bound")
ROW_SLOWDOWN = 10.0  # the table by row shows the slow-down nearest to this
Night = tuple[list[np.ndarray], list[np.ndarray]]  # per row: its samples/s, its peak memory


@dataclass(frozen=True)
class Row:
    """One scenario of the matrix: what its nights are drawn from."""

    name: str
    row_class: str
    level: float  # mean log samples/s over its sets
    spread: float  # pooled within-set standard deviation of log samples/s
    memory: tuple[float, ...]  # every recorded peak_mem_mb
    sets: int  # result sets holding it


@dataclass(frozen=True)
class Noise:
    rows: tuple[Row, ...]
    residuals: dict[str, np.ndarray]  # class -> standardised within-set residuals
    offset_sd: dict[str, float]  # class -> run-to-run standard deviation of log samples/s
    sources: tuple[str, ...]  # the result sets read


def row_class(settings: dict) -> str:
    """launch-bound: micro-batch 1, or batch 4 or less in half precision or TF32; else compute-bound."""
    batch = int(settings.get("batch_size", 0) or 0)
    fast = str(settings.get("precision", "fp32")) in ("fp16", "bf16") or str(settings.get("tf32")).lower() == "true"
    return "launch-bound" if batch == 1 or (batch <= 4 and fast) else "compute-bound"


def result_files(results: Path, sets: Sequence[str] | None) -> list[tuple[str, Path]]:
    """Each results.csv under `results` (or under each of its `sets`), named by its folder from the one
    that holds the set (`aa/a` for gate-noise/aa/a), in the order of those names."""
    roots = [(results, results)] if sets is None else [(results / s, (results / s).parent) for s in sets]
    found = {csv.parent.relative_to(base): csv for root, base in roots for csv in root.rglob("results.csv")}
    return [(str(name), found[name]) for name in sorted(found)]


def load_noise(results: Path, matrix_set: str, within: Sequence[str] | None = None) -> Noise:
    """The rows of matrix_set and the noise of every set under `results` (or its folders `within`) that
    matches them."""
    main = load_run(results / matrix_set).frame
    logs: dict[str, list[np.ndarray]] = {}
    memory: dict[str, list[float]] = {}
    sources = []
    for source, csv in result_files(results, within):
        frame = load_run(csv).frame
        differing = {d.scenario for d in setting_differences(main, frame)}
        ok = frame[(frame["status"] == "ok") & frame["scenario"].isin(set(main["scenario"]) - differing)]
        used = False
        for name, group in ok.groupby("scenario", sort=False):
            speeds = group["samples_per_s"].astype(float).to_numpy()
            if len(speeds) >= 2:
                logs.setdefault(str(name), []).append(np.log(speeds))
                memory.setdefault(str(name), []).extend(group[MEMORY_METRIC].astype(float))
                used = True
        if used:
            sources.append(source)
    rows = []
    pools: dict[str, list[float]] = {c: [] for c in CLASSES}
    between: dict[str, list[tuple[float, int]]] = {c: [] for c in CLASSES}  # (variance, weight) per scenario
    first = main.groupby("scenario", sort=False).first()
    for name, sets in logs.items():
        spread, _ = pooled_spread([np.exp(s) for s in sets])
        cls = row_class(first.loc[name].to_dict())
        rows.append(Row(name, cls, float(np.mean(np.concatenate(sets))), spread, tuple(memory[name]), len(sets)))
        for s in sets:
            if spread > 0:
                pools[cls].extend((s - s.mean()) * math.sqrt(len(s) / (len(s) - 1)) / spread)
        if len(sets) >= 2:  # method of moments: the variance of the set means less their own noise
            means = [float(s.mean()) for s in sets]
            explained = statistics.fmean(spread**2 / len(s) for s in sets)
            between[cls].append((statistics.variance(means) - explained, len(sets) - 1))
    order = list(main["scenario"].drop_duplicates())
    rows.sort(key=lambda r: order.index(r.name))
    offsets = {
        c: math.sqrt(max(0.0, sum(v * w for v, w in b) / sum(w for _, w in b))) if b else 0.0
        for c, b in between.items()
    }
    return Noise(tuple(rows), {c: np.array(p) for c, p in pools.items()}, offsets, tuple(sources))


def night(noise: Noise, rng: np.random.Generator, repeats: int) -> Night:
    """One night of the matrix: per row its samples/s and its peak memory, `repeats` each."""
    speeds, mems = [], []
    for r in noise.rows:
        offset = rng.normal(0.0, noise.offset_sd[r.row_class])
        pool = noise.residuals[r.row_class]
        z = rng.choice(pool, repeats) if len(pool) else np.zeros(repeats)
        speeds.append(np.exp(r.level + offset + r.spread * z))
        mems.append(rng.choice(np.array(r.memory), repeats))
    return speeds, mems


@dataclass(frozen=True)
class Outcome:
    failed: bool  # the whole matrix fails (a speed or memory regression)
    speed: list[str]  # the speed verdict of each row
    detectable: list[float]


def gate(base: Night, new: Night, thresholds: Thresholds) -> Outcome:
    """Two nights judged as `gpubench compare BASE NEW` judges them: speed and memory, the two
    quantities the published rows have figures of, sharing alpha."""
    quantities = (SPEED_METRIC, MEMORY_METRIC)
    speed, mem = (
        judge(
            [Sample(list(a), list(b)) for a, b in zip(base[q], new[q], strict=True)],
            thresholds.rule(metric, len(quantities)),
        )
        for q, metric in enumerate(quantities)
    )
    failed = any(j.verdict == "regression" for j in [*speed, *mem])
    return Outcome(failed, [j.verdict for j in speed], [j.detectable_pct for j in speed])


@dataclass(frozen=True)
class Setup:
    """One line of the study: repeats a side and compare's thresholds."""

    repeats: int
    thresholds: Thresholds = Thresholds()


@dataclass(frozen=True)
class Study:
    setup: Setup
    aa_failed: float  # share of A/A nights whose matrix fails
    aa_failed_by: dict[str, float]  # class -> share of A/A nights with a false regression in that class
    false_rows: dict[str, float]  # class -> share of its rows called a regression in A/A nights
    caught: dict[float, dict[str, float]]  # slow-down -> row -> share caught
    detectable: dict[str, float]  # row -> median detectable_pct over the A/A nights


def study(noise: Noise, setup: Setup, trials: int, slowdowns: Sequence[float], seed: int) -> Study:
    """A/A nights, then each row slowed in turn, judged at this setup."""
    rng = np.random.default_rng([seed, setup.repeats])
    names, n = [r.name for r in noise.rows], setup.repeats
    classes = {r.name: r.row_class for r in noise.rows}
    failed, by_class = 0, dict.fromkeys(CLASSES, 0)
    false_hits = dict.fromkeys(names, 0)
    detect: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(trials):
        outcome = gate(night(noise, rng, n), night(noise, rng, n), setup.thresholds)
        failed += outcome.failed
        hit = {classes[name] for name, v in zip(names, outcome.speed, strict=True) if v == "regression"}
        for c in hit:
            by_class[c] += 1
        for name, verdict, d in zip(names, outcome.speed, outcome.detectable, strict=True):
            false_hits[name] += verdict == "regression"
            detect[name].append(d)
    per_row = max(1, trials // len(names))
    caught: dict[float, dict[str, float]] = {}
    for slow in slowdowns:
        caught[slow] = {}
        for i, name in enumerate(names):
            hits = 0
            for _ in range(per_row):
                base, new = night(noise, rng, n), night(noise, rng, n)
                new[0][i] = new[0][i] / (1 + slow / 100)
                hits += gate(base, new, setup.thresholds).speed[i] == "regression"
            caught[slow][name] = hits / per_row
    present = _classes(noise)
    false_rows = {c: statistics.fmean(false_hits[m] / trials for m in names if classes[m] == c) for c in present}
    return Study(
        setup,
        failed / trials,
        {c: by_class[c] / trials for c in present},
        false_rows,
        caught,
        {name: float(np.median(detect[name])) for name in names},
    )


def _classes(noise: Noise) -> list[str]:
    return [c for c in CLASSES if any(r.row_class == c for r in noise.rows)]


def tables(
    noise: Noise, studies: Sequence[Study], slowdowns: Sequence[float]
) -> tuple[list[str], list[list[str]], list[str], list[list[str]]]:
    """(header, rows) of the summary by class, then of the table by row."""
    head = ["repeats a side", "threshold", "A/A nights failing", "class", "rows", "failing in this class"]
    head += ["false regressions per row"]
    head += [f"{s:g}% slower: caught" for s in slowdowns]
    summary = []
    for st in studies:
        for c in _classes(noise):
            members = [r.name for r in noise.rows if r.row_class == c]
            cells = [str(st.setup.repeats), f"{st.setup.thresholds.speed_pct:g}%", _pct(st.aa_failed), c]
            cells += [str(len(members)), _pct(st.aa_failed_by[c]), _pct(st.false_rows[c])]
            cells += [_pct(statistics.fmean(st.caught[s][m] for m in members)) for s in slowdowns]
            summary.append(cells)
    first = [st for st in studies if st.setup.thresholds == studies[0].setup.thresholds]  # by row: one threshold
    row_head = ["scenario", "class", "sets", "spread"]
    row_head += [f"detectable at {st.setup.repeats}" for st in first]
    slow = min(slowdowns, key=lambda s: abs(s - ROW_SLOWDOWN))  # by row: one slow-down
    row_head += [f"{slow:g}% caught at {st.setup.repeats}" for st in first]
    by_row = []
    for r in noise.rows:
        cells = [r.name, r.row_class, str(r.sets), f"{100 * r.spread:.1f}%"]
        cells += [f"{st.detectable[r.name]:.1f}%" for st in first]
        cells += [_pct(st.caught[slow][r.name]) for st in first]
        by_row.append(cells)
    return head, summary, row_head, by_row


def _pct(share: float) -> str:
    return f"{100 * share:.1f}%"


def render(noise: Noise, studies: Sequence[Study], slowdowns: Sequence[float], fmt: str, trials: int) -> str:
    head, summary, row_head, by_row = tables(noise, studies, slowdowns)
    offsets = ", ".join(f"{c} {100 * noise.offset_sd[c]:.1f}%" for c in _classes(noise))
    intro = [
        f"Sets: {', '.join(noise.sources)}. Run-to-run offset (sd of log samples/s): {offsets}. "
        f"{trials} A/A nights per line; each row slowed in turn in {max(1, trials // len(noise.rows))} nights "
        "per slow-down. "
        f"By row: at {studies[0].setup.thresholds.speed_pct:g}%; detectable: the median over the A/A nights.",
        "",
    ]
    if fmt == "markdown":
        return "\n".join([*intro, *md_table(head, summary), "", *md_table(row_head, by_row), ""])
    widths = [max(len(x) for x in col) for col in zip(head, *summary, strict=True)]
    row_widths = [max(len(x) for x in col) for col in zip(row_head, *by_row, strict=True)]
    lines = [*intro]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [head, *summary]]
    lines.append("")
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, row_widths, strict=True)).rstrip() for r in [row_head, *by_row]]
    return "\n".join(lines) + "\n"


def _numbers(text: str, least: float = 0.0, whole: bool = False) -> list[float]:
    try:
        values = [float(x.strip().rstrip("%")) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give comma-separated numbers") from None
    if not values or any(not v >= least or not math.isfinite(v) or (whole and not v.is_integer()) for v in values):
        kind = "whole numbers" if whole else "numbers"
        raise argparse.ArgumentTypeError(f"{text!r}: give {kind} of at least {least:g}")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m validation.power",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="Example: python -m validation.power --repeats 3,5 --threshold 5,6 --format markdown",
    )
    p.add_argument("--results", type=Path, default=RESULTS, help="the published result sets (default %(default)s)")
    p.add_argument(
        "--matrix-set",
        default=MATRIX_SET,
        help="the set under --results whose scenarios make the matrix (default %(default)s)",
    )
    p.add_argument(
        "--sets",
        type=lambda text: tuple(s for s in text.split(",") if s),
        default=NOISE_SETS,
        help="the folders under --results whose results.csv files give the noise, comma-separated "
        f"(default {','.join(NOISE_SETS)})",
    )
    p.add_argument(
        "--repeats",
        type=lambda t: _numbers(t, 1, True),
        default=[3.0, 5.0, 8.0, 10.0],
        help="repeats a side (default 3,5,8,10; the nightly workflow runs 10)",
    )
    p.add_argument(
        "--slowdown", type=_numbers, default=[5.0, 10.0, 20.0], help="in %%, comma-separated (default 5,10,20)"
    )
    p.add_argument(
        "--threshold",
        type=_numbers,
        default=[Thresholds.speed_pct, 6.0],
        help="--threshold in %%, each a line (default 5,6)",
    )
    p.add_argument(
        "--memory-threshold", type=float, default=Thresholds.memory_pct, help="--memory-threshold (default %(default)s)"
    )
    p.add_argument("--alpha", type=float, default=Thresholds.alpha, help="the family-wise level (default %(default)s)")
    p.add_argument("--trials", type=int, default=2000, help="A/A nights per line (default %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--format", choices=["table", "markdown"], default="table")
    a = p.parse_args(argv)
    if a.trials < 1:
        p.error("--trials takes a whole number of at least 1")
    setups = [
        Setup(int(r), Thresholds(speed_pct=t, memory_pct=a.memory_threshold, alpha=a.alpha))
        for t in a.threshold
        for r in a.repeats
    ]
    noise = load_noise(a.results, a.matrix_set, a.sets)
    studies = [study(noise, setup, a.trials, a.slowdown, a.seed) for setup in setups]
    sys.stdout.write(render(noise, studies, a.slowdown, a.format, a.trials))
    return 0


if __name__ == "__main__":
    sys.exit(main())
