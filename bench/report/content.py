"""What a report shows, as data: the summary per scenario (bench.results.summarize plus the
spread, the memory figures per API and the Pareto front), the failures and the findings.

Rendering is elsewhere: bench.report.html (with bench.report.charts) and bench.report.markdown.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import BadInput, did_you_mean
from ..fmt import fmt_num, fmt_pct, missing
from ..metrics import BY_NAME, metrics_in
from ..results import Run, caveats, load_run, summarize, window_cpu_loop_ms
from ..results.identity import gpu_card
from ..results.losscurve import Curve, read_curves
from ..results.scaling import allreduce_busbw
from ..results.summary import UNDIVIDED_NOTE, model_key, other_model_note
from ..stats import MIN_REPEATS, separation
from .scaling_curves import ScalingLine, scaling_lines

DEFAULT_BASELINE = "baseline"
NOISE_PCT = 2.0  # changes vs baseline smaller than this are "about the same" in the findings
CPU_SPREAD = 1.15  # a noisy scenario whose windows met CPUs this much apart (slowest / fastest probe): noted
# Peak memory per API, in the order the memory chart shows them: (column, label).
MEMORY_SERIES = (
    ("peak_mem_mb", "peak"),  # labelled with its source (nvml-process, nvml-device, rss)
    ("torch_max_reserved_mb", "torch max reserved"),
    ("torch_max_allocated_mb", "torch max allocated"),
)
# metric -> (+1 higher is better / -1 lower, the finding's name, the comparative, the unit): the
# metrics judged in the report (bench.metrics)
WINNERS = {m.name: (m.sign, m.best, m.better, m.unit) for m in metrics_in("report")}
EXTRA_COLUMNS = [
    "description",
    "samples_per_s_min",
    "samples_per_s_max",
    *(f"{metric}_repeats" for metric in WINNERS),  # the ok repeats' values, for bench.stats.separation
    "torch_max_reserved_mb",
    "nvml_process_peak_mb",
    "rss_peak_mb",
    "is_baseline",
    "model_key",  # what tells its model apart (results.summary.model_key): rows of two are never ranked together
    "ranked",  # whether the findings and the Pareto front may name it (RANKED_OUT)
    "pareto",
]
# A row whose loss is judged one of these against the reference trains something else: never a
# recommendation (the Pareto front, the findings' best and trade-offs), however fast or lean
RANKED_OUT = ("deviates", "diverged")


@dataclass(frozen=True)
class Problem:
    """A scenario with a repeat that did not end ok: skipped, or failed (oom, error, ...)."""

    scenario: str
    status: str  # the scenario's summarized status (the worst over its repeats)
    not_ok: int  # repeats that did not end ok
    repeats: int
    reason: str  # the first error message, or the last line of the stderr tail
    stderr_tail: str


@dataclass(frozen=True)
class Report:
    summary: pd.DataFrame  # summarize()'s columns + EXTRA_COLUMNS, one row per scenario
    env: dict[str, Any] | None  # env.json (bench.run.envinfo.collect), None when absent
    source: Path  # the results.csv
    baseline: str | None  # the scenario the "vs baseline" columns refer to
    problems: tuple[Problem, ...]
    notes: tuple[str, ...]
    caveats: tuple[str, ...] = ()  # what the figures are worth, said first (bench.results.caveats)
    scaling: tuple[ScalingLine, ...] = ()  # strategies at two or more GPU counts (bench.report.scaling_curves)
    sources: tuple[Path, ...] = ()  # every results.csv pooled into this report; () means (source,)
    curves: tuple[Curve, ...] = ()  # the loss curves of the rows (losses/, one result directory's only)

    @property
    def all_sources(self) -> tuple[Path, ...]:
        return self.sources or (self.source,)

    @property
    def ok(self) -> pd.DataFrame:
        """The scenarios with a measurement (at least one ok repeat)."""
        s = self.summary
        return s[(s["ok"] > 0) & s["samples_per_s"].notna()]

    @property
    def memory_source(self) -> str:
        sources = [s for s in self.summary["peak_mem_source"] if isinstance(s, str) and s]
        return sources[0] if sources else ""

    @property
    def max_repeats(self) -> int:
        return int(self.summary["repeats"].max()) if len(self.summary) else 0

    @property
    def has_mfu(self) -> bool:
        return bool(self.summary["mfu"].notna().any())

    def has(self, column: str) -> bool:
        """Some scenario has a figure in this summary column (energy, bound, ceiling: GPU runs only)."""
        if column not in self.summary:
            return False
        values = self.summary[column]
        return bool((values.notna() & (values.astype(str) != "")).any())

    @property
    def title(self) -> str:
        env = self.env or {}
        matrix = env.get("matrix") or self.source.parent.name
        return f"{matrix} on {device_name(env)}"


def env_part(env: dict[str, Any] | None, key: str) -> dict[str, Any]:
    """env.json's sub-object `key` (gpu, packages, git), or {} where absent or not an object."""
    value = (env or {}).get(key)
    return value if isinstance(value, dict) else {}


def device_name(env: dict[str, Any] | None) -> str:
    """The GPU's name, "CPU" for a CPU run, "unknown device" without env.json."""
    if not env:
        return "unknown device"
    gpu = env.get("gpu")
    if isinstance(gpu, dict) and gpu.get("name"):
        return str(gpu["name"])
    return "CPU" if str(env.get("device", "")).startswith("cpu") else str(env.get("device") or "?")


def load(path: Path, baseline: str | None = None) -> Report:
    """Read a result directory (or its results.csv) and env.json, and build its report."""
    run = load_run(Path(path))
    report = build(run.frame, run.env, run.csv_path, baseline)
    return replace(report, curves=tuple(read_curves(run.csv_path.parent).values()))


def load_many(paths: Sequence[Path], baseline: str | None = None) -> Report:
    """One report of the rows of several result directories (or results.csv files) pooled, for
    scaling curves over runs made apart (one GPU, then two). The environment shown is the first
    directory's; a scenario name found in more than one directory is qualified by its directory
    ("one-gpu/fsdp") so that its repeats are not mixed with another run's."""
    if len(paths) == 1:
        return load(paths[0], baseline)
    runs = [load_run(Path(p)) for p in paths]
    seen: dict[Path, Path] = {}
    for given, run in zip(paths, runs, strict=True):
        where = run.csv_path.resolve()
        if where in seen:
            raise BadInput(f"{given}: given twice (as {seen[where]} too); give each result directory once")
        seen[where] = Path(given)
    frame = pool([(_label(run, runs), run) for run in runs])
    report = build(frame, runs[0].env, runs[0].csv_path, baseline)
    note = f"rows pooled from {len(runs)} result directories: " + ", ".join(str(r.csv_path.parent) for r in runs)
    devices = list(dict.fromkeys(device_name(r.env) for r in runs))
    cards = list(dict.fromkeys(u for u in (gpu_card(r.env) for r in runs) if u))
    if len(devices) > 1:
        note += f"; they ran on different devices ({', '.join(devices)}): compare across them with care"
    else:
        if len(cards) > 1:  # one model, several cards (and their hosts): launch-bound rows follow the host
            note += f"; on {len(cards)} cards of that model ({', '.join(cards)}), each with its own host"
        note += f"; the environment shown is {runs[0].csv_path.parent}'s"
    return replace(report, notes=(note, *report.notes), sources=tuple(r.csv_path for r in runs))


def pool(runs: Sequence[tuple[str, Run]]) -> pd.DataFrame:
    """The runs' rows in one frame, each (label, run) in turn; a scenario name held by more than one
    run becomes "label/name" in each."""
    counts: dict[str, int] = {}
    for _, run in runs:
        for name in {str(n) for n in run.frame["scenario"]}:
            counts[name] = counts.get(name, 0) + 1
    frames = []
    owner: dict[str, str] = {}  # a name as pooled -> the run it came from
    for label, run in runs:
        frame = run.frame.copy()
        frame["scenario"] = [f"{label}/{n}" if counts[str(n)] > 1 else str(n) for n in frame["scenario"]]
        for name in set(frame["scenario"]):
            if owner.setdefault(name, label) != label:  # "b/s" of run a beside run b's qualified "s"
                raise BadInput(
                    f"scenario '{name}' would stand for rows of two runs ({owner[name]} and {label}) once "
                    "shared names are qualified by their directory",
                    hint="rename the scenario with a '/' in one results.csv, or report the runs apart",
                )
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def _label(run: Run, runs: Sequence[Run]) -> str:
    """The run's directory name, or its whole path where two runs share a name."""
    name = run.csv_path.parent.name
    same = [r for r in runs if r.csv_path.parent.name == name]
    return name if len(same) == 1 else str(run.csv_path.parent)


def build(frame: pd.DataFrame, env: dict[str, Any] | None, source: Path, baseline: str | None = None) -> Report:
    """Pure: the results frame and env in, the report data out.

    baseline None means "baseline" if the run has it, else the first scenario (with a note).
    """
    names = [str(n) for n in frame["scenario"].drop_duplicates()]
    notes: list[str] = []
    if baseline is None:
        baseline = DEFAULT_BASELINE if DEFAULT_BASELINE in names else (names[0] if names else None)
        if baseline and baseline != DEFAULT_BASELINE:
            notes.append(
                f"no scenario named '{DEFAULT_BASELINE}': changes are relative to '{baseline}', the first scenario"
            )
    elif baseline not in names:
        raise BadInput(
            f"{source}: no scenario named '{baseline}' to use as the baseline", hint=did_you_mean(baseline, names)
        )
    summary = summarize(frame, baseline=baseline or DEFAULT_BASELINE)
    summary = _extend(summary, frame, baseline)
    base_rows = summary[summary["is_baseline"]]
    if len(base_rows) and base_rows["ok"].iloc[0] == 0:
        notes.append(
            f"the baseline '{baseline}' has no ok repeat ({base_rows['status'].iloc[0]}): no changes vs baseline"
        )
    if len(summary) and summary["repeats"].max() == 1:
        notes.append(
            "one repeat per scenario: no spread to show (run with --repeats 3 for error "
            "bars, to tell differences from noise, and for significance tests in gpubench compare)"
        )
    high_mfu = summary[summary["mfu"] > 1.0]
    if len(high_mfu):
        notes.append(
            "MFU above 100% for "
            + ", ".join(high_mfu["scenario"].astype(str))
            + ": the FLOP count or the peak it divides by (peak_source in results.csv) "
            "does not fit what the scenario ran; treat that MFU with care"
        )
    windows = _cpu_window_note(frame, summary)
    if windows:
        notes.append(windows)
    # summarize's note (bench/results/summary.py), which also says why a row has no held-out accuracy
    undivided = summary[summary["training_note"].str.contains(UNDIVIDED_NOTE, regex=False)]
    if len(undivided):
        notes.append(
            ", ".join(undivided["scenario"].astype(str))
            + ": the Trainer did not divide the loss over the accumulation steps (transformers#47688), so "
            "the gradients were the accumulation steps times the recipe's; the loss curves show the model's "
            "loss (docs/parity.md)"
        )
    if other_model_note(summary):
        notes.append(other_model_note(summary))
    flops = [f"{r['scenario']} ({r['flops_note']})" for r in summary.to_dict("records") if r.get("flops_note")]
    if flops:
        notes.append(
            "FLOPs per sample checked against FlopCounterMode's count of a training step differ by over 5%: "
            + "; ".join(flops)
            + " (flops_check_gap_pct in results.csv; over 25%, achieved TFLOP/s and MFU are left empty)"
        )
    if env and env.get("gpu_processes_at_start"):
        notes.append(
            "other processes were on the GPU when the run started: figures may be "
            "disturbed (see env.json, gpu_processes_at_start)"
        )
    problems = _problems(frame, summary)
    scaling = scaling_lines(frame.to_dict("records"), allreduce_busbw(env))
    return Report(
        summary, env, Path(source), baseline, problems, tuple(notes), tuple(caveats(env, frame)), scaling=scaling
    )


def _cpu_window_note(frame: pd.DataFrame, summary: pd.DataFrame) -> str | None:
    """Names each scenario whose samples/s varied by more than NOISE_PCT (summarize()'s CV over its
    ok repeats) while the CPU probe around its windows varied by CPU_SPREAD or more."""
    ok = frame[frame["status"] == "ok"]
    loops = window_cpu_loop_ms(ok)
    cvs = summary.set_index("scenario")["samples_per_s_cv_pct"]
    parts = []
    for name, group in ok.groupby("scenario", sort=False):
        loop, cv = loops[group.index].dropna(), float(cvs[name])
        if len(loop) >= 2 and cv > NOISE_PCT and loop.max() >= CPU_SPREAD * loop.min():
            parts.append(f"{name} (CV {cv:.1f}%, loop {loop.min():.1f}-{loop.max():.1f} ms)")
    if not parts:
        return None
    return (
        "the CPU ran at different speeds around the windows of these noisy scenarios: "
        + "; ".join(parts)
        + " (a fixed Python loop timed on the worker's thread before and after each window: "
        "cpu_loop_start_ms, cpu_loop_end_ms); a launch-bound step follows the CPU's speed"
    )


def _extend(summary: pd.DataFrame, frame: pd.DataFrame, baseline: str | None) -> pd.DataFrame:
    """summarize()'s table plus min/max over ok repeats, more memory figures, flags."""
    extra: dict[str, list[Any]] = {c: [] for c in EXTRA_COLUMNS}
    for name in summary["scenario"]:
        group = frame[frame["scenario"] == name]
        ok = group[group["status"] == "ok"]
        described = [d for d in group.get("description", []) if isinstance(d, str) and d]
        extra["description"].append(described[0] if described else "")
        sps = pd.to_numeric(ok["samples_per_s"], errors="coerce").dropna()
        extra["samples_per_s_min"].append(float(sps.min()) if len(sps) else math.nan)
        extra["samples_per_s_max"].append(float(sps.max()) if len(sps) else math.nan)
        for metric in WINNERS:
            values = pd.to_numeric(ok.get(metric, pd.Series(dtype=float)), errors="coerce").dropna()
            extra[f"{metric}_repeats"].append(tuple(float(v) for v in values))
        for column in ("torch_max_reserved_mb", "nvml_process_peak_mb", "rss_peak_mb"):
            values = pd.to_numeric(ok.get(column, pd.Series(dtype=float)), errors="coerce")
            extra[column].append(float(values.median()) if values.notna().any() else math.nan)
        extra["is_baseline"].append(name == baseline)
        extra["model_key"].append(model_key(group.iloc[0].to_dict()) if len(group) else "")
    out = summary.assign(**{k: v for k, v in extra.items() if k not in ("ranked", "pareto")})
    out["ranked"] = ~out["parity"].isin(RANKED_OUT)
    out["pareto"] = False
    for _, rows in out[out["ranked"]].groupby("model_key", sort=False):  # one front per model
        out.loc[rows.index, "pareto"] = pareto_front(rows["samples_per_s"].tolist(), rows["peak_mem_mb"].tolist())
    out["pareto"] = out["pareto"].astype(bool)
    return out


def front_scope(summary: pd.DataFrame) -> str:
    """What "no other scenario" of the front's legends means when it is not all of them: "" or
    " of its model", ", of those whose loss did not deviate or diverge," or both."""
    ranked = summary[summary["ranked"]] if "ranked" in summary else summary
    several = len(set(ranked.get("model_key", []))) > 1
    return (" of its model" if several else "") + (
        ", of those whose loss did not deviate or diverge," if len(ranked) < len(summary) else ""
    )


def pareto_front(speeds: list[float], memories: list[float]) -> list[bool]:
    """True for each point no other point beats on both axes (higher speed, lower memory).

    A point is beaten when another is at least as fast and at most as heavy, and strictly
    better on one axis. Points with a missing value are never on the front.
    """
    points = list(zip(speeds, memories, strict=True))

    def known(p: tuple[float, float]) -> bool:
        return all(isinstance(v, float | int) and math.isfinite(v) for v in p)

    def beaten(p: tuple[float, float]) -> bool:
        return any(known(q) and q[0] >= p[0] and q[1] <= p[1] and q != p for q in points)

    return [known(p) and not beaten(p) for p in points]


def _problems(frame: pd.DataFrame, summary: pd.DataFrame) -> tuple[Problem, ...]:
    out = []
    for row in summary.to_dict("records"):
        if row["ok"] == row["repeats"]:
            continue
        group = frame[(frame["scenario"] == row["scenario"]) & (frame["status"] != "ok")]
        tails = [t for t in group.get("stderr_tail", []) if isinstance(t, str) and t.strip()]
        tail = tails[0] if tails else ""
        reason = row["error"] or (tail.strip().splitlines()[-1] if tail else "") or "no reason recorded"
        out.append(
            Problem(str(row["scenario"]), str(row["status"]), len(group), int(row["repeats"]), str(reason), tail)
        )
    return tuple(out)


def findings(report: Report) -> list[str]:
    """A few plain-text sentences: the fastest, the leanest, the front, the trade-offs. A scenario
    is named better than another only beyond the noise of the repeats (bench.stats.separation)."""
    ok = report.ok
    out: list[str] = []
    if ok.empty:
        return ["No scenario produced a measurement."]
    left_out = ok[~ok["ranked"]]
    if len(left_out):
        out.append(
            "Left out of the rankings and the Pareto front, their loss not the reference's: "
            + ", ".join(f"{r['scenario']} ({parity_text(r)})" for _, r in left_out.iterrows())
            + "."
        )
    ranked = ok[ok["ranked"]]
    models = list(dict.fromkeys(ranked["model_key"]))
    labels = {key: str(ranked[ranked["model_key"] == key]["model"].iloc[0]) for key in models}  # the summary's
    if len(models) > 1:
        named = ", ".join(labels.values())
        out.append(f"The scenarios train {len(models)} models ({named}): each is ranked among its own.")
    for model in models:
        rows = ranked[ranked["model_key"] == model]
        head = f"{labels[model]}: " if len(models) > 1 else ""
        for metric in WINNERS:
            measured = rows[rows[metric].notna()]
            if not measured.empty:
                out += [head + line for line in _best(measured, metric)]
        front = list(rows[rows["pareto"]]["scenario"])
        if front:
            out.append(
                head
                + "Not beaten on both speed and memory by any other scenario (Pareto front): "
                + ", ".join(front)
                + "."
            )
    base_model = [str(m) for m in ok[ok["is_baseline"]]["model_key"]]
    # versus the baseline: the ranked scenarios of its model only
    same = ranked["model_key"] == (base_model[0] if base_model else ranked["model_key"])
    out += _tradeoffs(ranked[same & ~ranked["is_baseline"]])
    if report.problems:
        listed = ", ".join(f"{p.scenario} ({p.status})" for p in report.problems)
        out.append(f"Without a full measurement: {listed}; see the list of failed and skipped scenarios.")
    return out


def parity_text(row: pd.Series) -> str:
    """'deviates +0.867', 'diverged': a row's loss verdict as the run's table shows it."""
    delta = row.get("parity_delta")
    shown = isinstance(delta, float) and math.isfinite(delta)
    return f"loss {row['parity']}" + (f" {delta:+.3g}" if shown and row["parity"] == "deviates" else "")


def _best(rows: pd.DataFrame, metric: str) -> list[str]:
    """The best scenario on `metric` (by median), named only when every repeat of it beat every
    repeat of every other scenario and it and its closest rival (the other scenario with the best
    single repeat) have 3 or more repeats (bench.stats.separation); else the tie, or too few
    repeats to tell."""
    sign, label, better, _ = WINNERS[metric]
    top = rows.loc[(rows[metric] * sign).idxmax()]
    others = rows[rows["scenario"] != top["scenario"]]
    if others.empty:
        return [f"{label}: {_figures(top, metric)}."]
    judged = {
        str(r["scenario"]): separation(top[f"{metric}_repeats"], r[f"{metric}_repeats"]) for _, r in others.iterrows()
    }
    tied = [name for name, j in judged.items() if j == "within"]
    if not tied:
        rival = others.loc[others[f"{metric}_repeats"].map(lambda values: max(v * sign for v in values)).idxmax()]
        if judged[str(rival["scenario"])] == "beyond":
            return [f"{label}: {_figures(top, metric)}."]
        runs = min(len(top[f"{metric}_repeats"]), len(rival[f"{metric}_repeats"]))
        why = (
            "one repeat: cannot tell differences from noise"
            if runs <= 1
            else f"{runs} repeats: too few to tell differences from noise ({MIN_REPEATS} or more needed)"
        )
        best = f"{top['scenario']} at {_figure(top, metric)}{_vs(top, metric, worth=False)}"
        return [f"{label}: {why}; the best figure: {best}."]
    group = rows[rows["scenario"].isin([top["scenario"], *tied])]
    first = f"{top['scenario']} ({_figure(top, metric)}, the best median)"
    out = [
        f"{label}: no single winner beyond the noise of {_repeats(group)}; the min–max ranges of "
        f"{_and([first, *tied])} overlap."
    ]
    if not rows["is_baseline"].any():
        return out
    noise, change = rows[f"{metric}_vs_baseline_noise"], rows[f"{metric}_vs_baseline_pct"] * sign
    ahead = rows[(noise == "beyond") & (change > 0)]
    if len(ahead):
        out.append(f"{better.capitalize()} than the baseline beyond the noise: {', '.join(ahead['scenario'])}.")
    elif (noise == "within").any():
        judged_rows = rows[noise.isin(["within", "beyond"]) | rows["is_baseline"]]
        out.append(f"No scenario is {better} than the baseline beyond the noise of {_repeats(judged_rows)}.")
    return out


def _figure(row: pd.Series, metric: str) -> str:
    return f"{fmt_num(row[metric], BY_NAME[metric].decimals or 0)} {WINNERS[metric][3]}"


def _figures(row: pd.Series, metric: str) -> str:
    """'compile at 70.00 samples/s (+105.9% vs baseline); peak memory 12,001 MB (+41.2% vs baseline)'."""
    other = "peak_mem_mb" if metric == "samples_per_s" else "samples_per_s"
    second = ("peak memory " if other == "peak_mem_mb" else "") + _figure(row, other)
    return f"{row['scenario']} at {_figure(row, metric)}{_vs(row, metric)}; {second}{_vs(row, other)}"


def _repeats(rows: pd.DataFrame) -> str:
    counts = [int(n) for n in rows["ok"]]
    lo, hi = min(counts), max(counts)
    if hi <= 1:
        return "one repeat"
    return f"{hi} repeats" if lo == hi else f"{lo}-{hi} repeats"


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _tradeoffs(others: pd.DataFrame) -> list[str]:
    """Versus the baseline: better on both, the biggest trade-offs each way, worse on both. A change
    counts where it is beyond the noise of the repeats and NOISE_PCT; scenarios with too few
    repeats to tell are left out."""
    judged = others["samples_per_s_vs_baseline_noise"].isin(["beyond", "within"]) & others[
        "peak_mem_mb_vs_baseline_noise"
    ].isin(["beyond", "within"])
    known = others[judged]
    if known.empty:
        return []
    ds, dm = _beyond(known, "samples_per_s"), _beyond(known, "peak_mem_mb")
    out = []
    both = known[(ds > NOISE_PCT) & (dm < -NOISE_PCT)]
    if len(both):
        out.append("Faster and leaner than the baseline: " + _list(both) + ".")
    faster = known[(ds > NOISE_PCT) & (dm > NOISE_PCT)]
    if len(faster):
        top = faster.loc[faster["samples_per_s_vs_baseline_pct"].idxmax()]
        out.append(f"Biggest speed-up at a memory cost: {_change(top)}.")
    leaner = known[(dm < -NOISE_PCT) & (ds < -NOISE_PCT)]
    if len(leaner):
        top = leaner.loc[leaner["peak_mem_mb_vs_baseline_pct"].idxmin()]
        out.append(f"Biggest memory saving at a speed cost: {_change(top)}.")
    worse = known[(ds < -NOISE_PCT) & (dm > NOISE_PCT)]
    if len(worse):
        out.append("Slower and heavier than the baseline: " + _list(worse) + ".")
    same = known[(ds.abs() <= NOISE_PCT) & (dm.abs() <= NOISE_PCT)]
    if len(same):
        out.append(f"Within the noise or ±{NOISE_PCT:g}% of the baseline on both: " + ", ".join(same["scenario"]) + ".")
    return out


def _beyond(rows: pd.DataFrame, metric: str) -> pd.Series:
    """The change vs the baseline where it is beyond the noise of the repeats, else 0."""
    return rows[f"{metric}_vs_baseline_pct"].where(rows[f"{metric}_vs_baseline_noise"] == "beyond", 0.0)


def _change(row: pd.Series) -> str:
    return (
        f"{row['scenario']} ({fmt_pct(row['samples_per_s_vs_baseline_pct'])} speed, "
        f"{fmt_pct(row['peak_mem_mb_vs_baseline_pct'])} memory)"
    )


def _list(rows: pd.DataFrame) -> str:
    return ", ".join(_change(r) for _, r in rows.iterrows())


def _vs(row: pd.Series, metric: str, *, worth: bool = True) -> str:
    """' (+3.1% vs baseline)', with what it is worth unless beyond the noise: ', within the noise',
    '; 1 run: cannot tell'."""
    value = row[f"{metric}_vs_baseline_pct"]
    if row["is_baseline"] or missing(value):
        return ""
    judged = row.get(f"{metric}_vs_baseline_noise") if worth else ""
    tail = (
        ""
        if judged in ("", "beyond", None)
        else ", within the noise"
        if judged == "within"
        else f"; {judged}: cannot tell"
    )
    return f" ({fmt_pct(value)} vs baseline{tail})"


def loss_cells(r: dict[str, Any]) -> list[str]:
    """A summary row's loss cells, in the tables' order: the final-window loss and its verdict vs
    the loss reference (bench/results/parity.py): "equivalent", "deviates +0.57 (±0.017)", "ref"."""
    verdict = r.get("parity")
    verdict = verdict if isinstance(verdict, str) and verdict else "–"
    delta, band = r.get("parity_delta"), r.get("parity_band")
    if verdict == "reference":
        verdict = "ref"
    elif verdict in ("deviates", "equivalent") and isinstance(delta, float) and isinstance(band, float):
        verdict += "" if missing(delta) or missing(band) else f" {delta:+.3g} (±{band:.2g})"
    return [fmt_num(r.get("final_window_loss"), 4), verdict]


def accuracy_cell(r: dict[str, Any], unit: str = "%") -> str:
    """A summary row's held-out accuracy (eval_samples, bench/worker/evaluate.py), in %, followed by `unit`."""
    value = r.get("eval_accuracy")
    return f"{value * 100:.1f}{unit}" if isinstance(value, float) and not missing(value) else "–"


def gpu_cells(r: dict[str, Any], unit: str = "") -> list[str]:
    """A summary row's GPU cells, in the tables' order: MFU of the measured ceiling (in %, followed
    by `unit`), J/sample, mean W, GPU-hours and kWh per 1e9 tokens, the bound label."""
    from ..fmt import fmt_num

    ceiling = r.get("mfu_ceiling")
    return [
        "–" if ceiling is None or ceiling != ceiling else f"{ceiling * 100:.1f}{unit}",
        fmt_num(r.get("energy_per_sample_j"), 3),
        fmt_num(r.get("gpu_power_mean_w"), 0),
        fmt_num(r.get("gpu_hours_per_1b_tokens"), 2),
        fmt_num(r.get("kwh_per_1b_tokens"), 2),
        str(r.get("bound") or "–"),
    ]
