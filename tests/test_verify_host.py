"""verify names the repeats that ran while the host was busy (bench/results/bound.py host_disturbed):
on an H100 one sitting of `verify --claims guide` ran with the CPU loop at 17-18 ms against 9 ms, and
fp16's speed ratio widened from 2.03-2.23 to 1.21-2.54 with nothing in the verdict saying why."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from test_verify_cli import team_file

from bench.results.bound import CPU_SHIFT, UNSTEADY_P90_OVER_P10, host_disturbed
from bench.verify.claims import load_claims
from bench.verify.judge import from_rows
from bench.verify.scenarios import build

QUIET = 9.0


@settings(max_examples=60)
@given(
    start=st.floats(QUIET, 60.0),
    end=st.floats(QUIET, 60.0),
    p10=st.floats(1.0, 500.0),
    spread=st.floats(1.0, 3.0),
    label=st.sampled_from(["compute-bound", "memory-bound", "launch-bound", "mixed", ""]),
)
def test_a_row_is_flagged_exactly_when_its_loop_or_its_steps_say_so(
    start: float, end: float, p10: float, spread: float, label: str
) -> None:
    row = {"cpu_loop_start_ms": start, "cpu_loop_end_ms": end, "step_time_p10_ms": p10,
           "step_time_p90_ms": p10 * spread, "bound": label}  # fmt: skip
    note = host_disturbed(row, QUIET)
    assert ("CPU loop" in note) == (max(start, end) / QUIET >= CPU_SHIFT)  # whatever bound the GPU
    assert ("steps p90/p10" in note) == ((p10 * spread) / p10 >= UNSTEADY_P90_OVER_P10)
    assert host_disturbed(row | {"step_time_p90_ms": p10}, None) == ""  # no quiet figure: only the steps


def _rows(plan, claim, slow_repeat: int | None) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    rows = []
    for side, speed in ((claim.reference, 40.0), (claim.treatment, 24.0)):
        for r in range(3):
            loop = 18.0 if (side == claim.treatment and r == slow_repeat) else QUIET
            rows.append({"scenario": plan.run_name[(claim.file, side)], "repeat": r, "status": "ok",
                         "samples_per_s": speed * (0.8 if loop > QUIET else 1.0), "peak_mem_mb": 1000.0,
                         "cpu_loop_start_ms": loop, "cpu_loop_end_ms": QUIET, "step_time_p10_ms": 10.0,
                         "step_time_p90_ms": 10.5, "bound": "mixed", "bound_basis": "SM active 70%"})  # fmt: skip
    return pd.DataFrame(rows)


def test_a_speed_verdict_names_the_repeat_on_a_busy_host_and_a_memory_verdict_does_not(tmp_path: Path) -> None:
    files = load_claims(str(team_file(tmp_path)))
    plan = build(files, on_cpu=False, gpus=1)
    speed = next(c for f in files for c in f.claims if c.id == "accum-at-least-half")
    busy = from_rows(speed, plan, _rows(plan, speed, slow_repeat=2), gpus=1)
    treatment = plan.run_name[(speed.file, speed.treatment)]
    assert f"the host was busy around {treatment} r2 (CPU loop 18.0 ms against 9.0 quiet)" in busy.explanation
    quiet = from_rows(speed, plan, _rows(plan, speed, slow_repeat=None), gpus=1)
    assert "host was busy" not in quiet.explanation and quiet.verdict == "holds"
    memory = speed.__class__(**{**speed.__dict__, "quantity": "memory_ratio", "metric": "peak_mem_mb"})
    assert "host was busy" not in from_rows(memory, plan, _rows(plan, speed, slow_repeat=2), gpus=1).explanation
