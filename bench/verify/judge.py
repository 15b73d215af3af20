"""One claim's verdict from what ran (a results frame) or from arithmetic, as a record: the figure,
its interval, the verdict and the explanation (the rows' bound label where there is one)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..errors import GpubenchError
from ..results import scenario_status
from ..results.bound import host_disturbed
from .arithmetic import arithmetic
from .claims import Claim
from .scenarios import VerifyPlan
from .verdict import Measurement, Verdict, judge, ratio

SMOKE = "CPU: a smoke test of the harness"


@dataclass(frozen=True)
class ClaimResult:
    claim: Claim
    verdict: str
    measured: float | None = None
    low: float | None = None
    high: float | None = None
    explanation: str = ""
    repeats_needed: int | None = None
    bound: str = ""
    smoke_test: bool = False  # a measured figure from the CPU

    def record(self) -> dict[str, Any]:
        """The claim's JSON record (verify.json, --format json)."""
        c, (low, high) = self.claim, self.claim.effect.region()
        return {
            "id": c.id,
            "file": c.file,
            "text": c.text,
            "source": c.source,
            "setup": c.setup,
            "quantity": c.quantity,
            "unit": c.unit,
            "claimed": {
                "value": c.effect.claimed,
                "direction": c.effect.direction,
                "tolerance_pct": c.effect.tolerance_pct,
                "region": [low, None if math.isinf(high) else high],
            },
            "measured": self.measured,
            "interval": None if self.low is None or self.high is None else [self.low, self.high],
            "verdict": self.verdict,
            "explanation": self.explanation,
            "repeats_needed": self.repeats_needed,
            "bound": self.bound,
            "reference": c.reference,
            "treatment": c.treatment,
            "smoke_test": self.smoke_test,
        }


def not_comparable(claim: Claim, why: str) -> ClaimResult:
    return ClaimResult(claim, "not comparable here", explanation=why)


def from_arithmetic(claim: Claim, plan: VerifyPlan) -> ClaimResult:
    try:
        value, how = arithmetic(claim, plan.own[claim.file])
    except GpubenchError as exc:
        return not_comparable(claim, f"not computable here: {exc}")
    v = judge(claim.effect, Measurement.exact(value))
    return ClaimResult(claim, v.verdict, value, value, value, how)


def from_rows(claim: Claim, plan: VerifyPlan, frame: pd.DataFrame, gpus: int) -> ClaimResult:
    """A measured claim from its reference's and treatment's rows."""
    if claim.min_gpus > 1 and claim.min_gpus > gpus:
        return not_comparable(claim, f"made on {claim.min_gpus}+ GPUs; this run had {gpus}")
    sides = []
    for name in (claim.reference, claim.treatment):
        run_name = plan.run_name[(claim.file, name)]
        group = frame[frame["scenario"] == run_name]
        status = scenario_status(group if len(group) else None)
        if status != "ok":
            return not_comparable(claim, _why_not(run_name, status, group))
        ok = group[group["status"] == "ok"]
        values = pd.to_numeric(ok.get(claim.metric, pd.Series(dtype=float)), errors="coerce").dropna()
        values = values[values > 0]
        if values.empty:
            return not_comparable(claim, f"{run_name} has no {claim.metric} figure here")
        sides.append((run_name, [float(v) for v in values], ok))
    (ref_name, ref, ref_ok), (new_name, new, new_ok) = sides
    m = ratio(ref, new)
    v = judge(claim.effect, m)
    bound = _bound(ref_name, ref_ok, new_name, new_ok)
    host = "" if plan.on_cpu or not claim.timed else _disturbed(((ref_name, ref_ok), (new_name, new_ok)), frame)
    why = "; ".join(p for p in (SMOKE if plan.on_cpu else "", _noise(v, m), host, bound) if p)
    low, high = (None, None) if math.isnan(m.low) else (m.low, m.high)
    return ClaimResult(claim, v.verdict, m.value, low, high, why, v.repeats_needed, bound, plan.on_cpu)


def _noise(v: Verdict, m: Measurement) -> str:
    return v.why if v.verdict == "inconclusive" else ""


def _disturbed(sides: tuple[tuple[str, pd.DataFrame], ...], frame: pd.DataFrame) -> str:
    """The repeats that ran while the host was busier than at its quietest in this run (their
    figures widen the interval, or shift it): named, so a rerun on a quiet host can be asked for."""
    loops = pd.concat([pd.to_numeric(frame.get(k, pd.Series(dtype=float)), errors="coerce")
                       for k in ("cpu_loop_start_ms", "cpu_loop_end_ms")]).dropna()  # fmt: skip
    quiet = float(loops[loops > 0].min()) if (loops > 0).any() else None
    found = []
    for name, ok in sides:
        for row in ok.to_dict("records"):
            note = host_disturbed(row, quiet)
            if note:
                found.append(f"{name} r{row.get('repeat', '?')} ({note})")
    return f"the host was busy around {', '.join(found)}" if found else ""


def _why_not(name: str, status: str, group: pd.DataFrame) -> str:
    errors = [str(e) for e in group.get("error", []) if isinstance(e, str) and e]
    reason = f": {errors[0]}" if errors else ""
    if status == "absent":
        return f"{name} did not run"
    if status == "skipped":
        return f"{name} was skipped here{reason}"
    if status == "oom":
        return f"{name} ran out of memory: the card cannot hold it{reason}"
    return f"{name} failed here ({status}){reason}"


def _bound(ref_name: str, ref_ok: pd.DataFrame, new_name: str, new_ok: pd.DataFrame) -> str:
    """The bound label of each side's ok rows (the most common), with its basis: why a technique
    cannot pay where the GPU waits on the host, and the like."""
    parts = []
    for name, ok in ((ref_name, ref_ok), (new_name, new_ok)):
        rows = [r for r in ok.to_dict("records") if isinstance(r.get("bound"), str) and r["bound"]]
        if not rows:
            continue
        label = Counter(r["bound"] for r in rows).most_common(1)[0][0]
        basis = next((str(r.get("bound_basis") or "") for r in rows if r["bound"] == label), "")
        parts.append(f"{name} {label}" + (f" ({basis})" if basis else ""))
    return ", ".join(parts)
