"""The fit summary: what each scenario's search found, as data, DIR/fit.json (atomic) and text.

One record per scenario: the predicted largest value, the probes run (value, row, status), the
bracket (largest ok, smallest oom) and the throughput at the largest value that fits. `front` ranks
the scenarios by that throughput: the fastest recipe that fits in the memory searched, and, among
recipes at their largest fitting value, those no other is both faster and lighter with."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..fmt import mem_size
from ..fsio import atomic_write_json

FIT_JSON = "fit.json"
SCHEMA = "gpubench.fit/1"


@dataclass(frozen=True)
class ProbeRecord:
    value: int
    row: str  # the probe's scenario name in results.csv
    status: str
    samples_per_s: float | None = None
    memory_mb: float | None = None  # the fit's memory figure (FitSummary.memory_source)


@dataclass(frozen=True)
class ScenarioFit:
    scenario: str
    model: str
    predicted_largest: int | None  # None: not predicted; 0: not even the smallest value
    predicted_peak_mb: float | None
    prediction_note: str
    low: int
    high: int
    probes: tuple[ProbeRecord, ...]
    largest_ok: int | None
    smallest_oom: int | None
    exact: bool
    stopped: str

    def at_largest(self) -> ProbeRecord | None:
        return next((p for p in self.probes if p.value == self.largest_ok and p.status == "ok"), None)

    @property
    def samples_per_s(self) -> float | None:
        probe = self.at_largest()
        return probe.samples_per_s if probe else None


@dataclass(frozen=True)
class FitSummary:
    matrix: str
    device: str
    dimension: str
    gpu_memory_mb: float | None  # what the user asked about (--gpu-memory), or the GPU's own
    context_mb: float  # left for the CUDA context: the allocator's cap is gpu_memory_mb - context_mb
    memory_cap_mb: float | None  # the cap the workers ran under (None: the GPU as it is)
    mechanism: str  # what made a probe run out of memory (the capped allocator, or the CPU's stand-in)
    memory_source: str  # where each probe's memory_mb comes from
    probe_budget: int
    scenarios: tuple[ScenarioFit, ...] = field(default_factory=tuple)

    def to_data(self) -> dict[str, Any]:
        data = asdict(self)
        data["schema"] = SCHEMA
        for sc, fit in zip(data["scenarios"], self.scenarios, strict=True):
            sc["samples_per_s"] = fit.samples_per_s
            sc["probes_run"] = len(fit.probes)
        data["front"] = [f.scenario for f in front(self)]
        return data


def write_summary(result_dir: Path, summary: FitSummary) -> None:
    atomic_write_json(Path(result_dir) / FIT_JSON, summary.to_data())


def read_summary(result_dir: Path) -> FitSummary | None:
    """DIR/fit.json, or None when the directory holds none (a plain `run`)."""
    path = Path(result_dir) / FIT_JSON
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("schema") != SCHEMA:
            raise ValueError(f"schema {data.get('schema')!r}, not {SCHEMA}")
        scenarios = tuple(
            ScenarioFit(
                **{k: v for k, v in s.items() if k not in ("probes", "samples_per_s", "probes_run")},
                probes=tuple(ProbeRecord(**p) for p in s["probes"]),
            )
            for s in data["scenarios"]
        )
        fields = {k: v for k, v in data.items() if k not in ("schema", "scenarios", "front")}
        return FitSummary(**fields, scenarios=scenarios)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise BadInput(f"{path}: not a gpubench fit summary ({type(exc).__name__}: {exc})") from None


def ranked(summary: FitSummary) -> list[ScenarioFit]:
    """The scenarios with a fitting value, fastest first (throughput at their largest fitting value)."""
    known = [f for f in summary.scenarios if _finite(f.samples_per_s)]
    return sorted(known, key=lambda f: -float(f.samples_per_s or 0))


def front(summary: FitSummary) -> list[ScenarioFit]:
    """The ranked recipes, at their largest fitting value, that no other is both at least as fast
    and at most as heavy with (and better on one); a recipe without a memory figure is never on it."""
    points = [(fit, float(fit.samples_per_s or 0), _memory(fit)) for fit in ranked(summary)]

    def beaten(speed: float, mem: float) -> bool:
        return any(s >= speed and m <= mem and (s, m) != (speed, mem) for _, s, m in points if m is not None)

    return [fit for fit, speed, mem in points if mem is not None and not beaten(speed, mem)]


def _memory(fit: ScenarioFit) -> float | None:
    probe = fit.at_largest()
    mem = probe.memory_mb if probe is not None else None
    return float(mem) if mem is not None and math.isfinite(mem) else None


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def headline(summary: FitSummary) -> str:
    """One sentence: the fastest recipe that fits."""
    best = ranked(summary)
    where = f"in {mem_size(summary.gpu_memory_mb)}" if summary.gpu_memory_mb else "here"
    if not best:
        return f"no scenario trained {where} at any {summary.dimension} probed"
    top = best[0]
    return (
        f"fastest recipe that fits {where}: {top.scenario} at {summary.dimension} {top.largest_ok}, "
        f"{top.samples_per_s:,.1f} samples/s"
    )


def text_lines(summary: FitSummary) -> list[str]:
    """The front as plain text, fastest first: what `gpubench fit` prints under its table."""
    lines = [headline(summary)]
    on_front = {f.scenario for f in front(summary)}
    for rank, fit in enumerate(ranked(summary), 1):
        probe = fit.at_largest()
        mem = f"{probe.memory_mb:,.0f} MB" if probe and _finite(probe.memory_mb) else "- MB"
        mark = "  (front)" if fit.scenario in on_front else ""
        lines.append(
            f"  {rank}. {fit.scenario}: {summary.dimension} {fit.largest_ok}, {fit.samples_per_s:,.1f} samples/s, "
            f"{mem}{mark}"
        )
    return lines


def table_rows(summary: FitSummary) -> list[list[str]]:
    """One row per scenario: predicted, probes (value:status), largest ok, smallest oom, samples/s."""
    rows = []
    for fit in summary.scenarios:
        predicted = "-" if fit.predicted_largest is None else str(fit.predicted_largest)
        probes = " ".join(f"{p.value}:{p.status}" for p in fit.probes) or "-"
        largest = "-" if fit.largest_ok is None else str(fit.largest_ok) + ("" if fit.exact else "?")
        rows.append(
            [
                fit.scenario,
                predicted,
                probes,
                largest,
                "-" if fit.smallest_oom is None else str(fit.smallest_oom),
                "-" if fit.samples_per_s is None else f"{fit.samples_per_s:,.1f}",
                fit.stopped,
            ]
        )
    return rows


TABLE_HEADER = ["scenario", "predicted", "probes", "largest ok", "smallest oom", "samples/s", "search ended"]
