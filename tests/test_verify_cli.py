"""`gpubench verify` as a user meets it: real subprocesses, claim files written here, the shipped
claim files read for real, verdicts, outputs and the compare of two verify runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from compare_support import env
from harness import gpubench, gpubench_in_process, write_run

from bench.results import CPU_NOTE
from bench.verify.claims import SHIPPED, claims_dir, load_claims, read_claim_file

KEYS = {"id", "source", "claimed", "measured", "interval", "verdict"}
VERDICTS = {"holds", "does not hold", "inconclusive", "not comparable here"}

TEAM = """
[file]
description = "our team's rules of thumb"

[scale]
rule = "the tiny BERT everywhere: 16 samples of 32 tokens"

[base]
model = "tiny"
engine = "torch"
samples = 16
seq_len = 32
warmup_steps = 1
batch_size = 4

[scenarios.b4]
description = "batch 4"

[scenarios.accum]
description = "batch 1, accumulation 4"
batch_size = 1
grad_accum_steps = 4

[scenarios.llama]
description = "not run: the 6PD setup"
model = "llama-tiny"
seq_len = 128

[claims.accum-at-least-half]
text = "accumulating 4 micro-batches of 1 keeps at least half of batch 4's speed"
source = { document = "our wiki", section = "training tips" }
setup = { gpu = "any", model = "tiny", batch = 4, seq = 32 }
quantity = "speed_ratio"
claimed = 0.5
direction = "higher"
tolerance_pct = 0
reference = "b4"
treatment = "accum"

[claims.accum-is-free]
text = "accumulation costs nothing"
source = { document = "our wiki", section = "training tips" }
setup = { gpu = "any", model = "tiny", batch = 4, seq = 32 }
quantity = "speed_ratio"
claimed = 1.0
direction = "equal"
tolerance_pct = 5
reference = "b4"
treatment = "accum"

[claims.states-16]
text = "AdamW keeps 16 bytes a parameter"
source = { document = "ZeRO", section = "3.1", url = "https://arxiv.org/abs/1910.02054" }
setup = { model = "tiny" }
quantity = "bytes_per_param"
claimed = 16
direction = "equal"
tolerance_pct = 5
reference = "b4"

[claims.tiny-6pd]
text = "C = 6PD, at seq 128 on a model 128 wide"
source = { document = "Kaplan et al. 2020", section = "2.1" }
setup = { model = "llama-tiny", seq = 128 }
quantity = "flops_vs_6pd"
claimed = 1.0
direction = "equal"
tolerance_pct = 10
reference = "llama"
"""


def team_file(tmp_path: Path, text: str = TEAM) -> Path:
    path = tmp_path / "team.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_shipped_claim_files_read_and_name_their_sources() -> None:
    files = load_claims("all")
    assert [f.stem for f in files] == list(SHIPPED)
    ids = [c.id for f in files for c in f.claims]
    assert len(ids) == len(set(ids)) >= 38
    for f in files:
        assert f.rule, f"{f.path}: no scaling rule"
        for c in f.claims:
            assert c.source["document"] and c.source["section"] and c.setup
    guide = {c.id: c for c in files[0].claims}
    assert guide["guide-fp16-speed"].effect.claimed == 2.104 and guide["guide-fp16-speed"].needs_cuda
    assert guide["guide-16-bytes-per-param"].quantity == "bytes_per_param"
    assert {c.quantity for f in files for c in f.claims} >= {"speed_ratio", "memory_ratio", "flops_vs_6pd"}
    assert read_claim_file(claims_dir() / "talk.toml").claims[0].effect.claimed == 2.91


def test_the_guides_arithmetic_claims_run_for_real_on_the_cpu(tmp_path: Path) -> None:
    """16 B/param from the memory model and C = 6PD from the built model's FLOP count: nothing trains."""
    out = tmp_path / "v"
    done = gpubench(
        "verify", "--claims", "guide", "--only", "guide-16-bytes-per-param,guide-6pd", "--device", "cpu",
        "--out", out, "--format", "json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = json.loads(done.stdout)
    assert [r["id"] for r in records] == ["guide-16-bytes-per-param", "guide-6pd"]
    assert all(set(r) >= KEYS for r in records)
    b, f = records
    assert (b["verdict"], round(b["measured"], 3), b["interval"]) == ("holds", 16.0, [b["measured"]] * 2)
    assert "weights 4.00 + grads 4.00 + optimizer 8.00 B/param" in b["explanation"]
    assert f["verdict"] == "holds" and 1.0 < f["measured"] < 1.1  # llama-1b at seq 2048: attention adds ~5%
    assert json.loads((out / "verify.json").read_text())["results"] == records
    assert not (out / "results.csv").exists()  # nothing to run


def test_a_claim_that_does_not_hold_exits_1_and_says_so(tmp_path: Path) -> None:
    done = gpubench("verify", "--claims", team_file(tmp_path), "--only", "tiny-6pd,states-16", "--out", tmp_path / "v")
    assert done.returncode == 1, done.stderr
    rows = {line.split("│")[1].strip(): line for line in done.stdout.splitlines() if line.startswith("│ ")}
    assert "does not hold" in rows["tiny-6pd"] and "holds" in rows["states-16"]  # 0.65x: attention is 128/768 of it
    csv = gpubench(
        "verify", "--claims", team_file(tmp_path), "--only", "tiny-6pd", "--out", tmp_path / "w", "-f", "csv"
    )
    header, line = csv.stdout.splitlines()
    assert header.startswith("id,file,quantity,unit,claimed,direction,tolerance_pct,measured,interval_low")
    assert line.startswith("tiny-6pd,team,flops_vs_6pd,x,1.0,equal,10.0,0.65")


BAD = {
    "an unknown key in a claim": (
        TEAM.replace('quantity = "speed_ratio"\nclaimed = 0.5', 'quantity = "speed_ratio"\nclaimd = 0.5'),
        "[claims.accum-at-least-half]: unknown key 'claimd' (did you mean 'claimed'?)",
    ),
    "an unknown top-level table": (TEAM + "\n[claim.x]\n", "unknown key 'claim' (did you mean 'claims'?)"),
    "an unknown quantity": (
        TEAM.replace('quantity = "flops_vs_6pd"', 'quantity = "flops"'),
        "[claims.tiny-6pd]: quantity = 'flops' is not one of",
    ),
    "a treatment that is no scenario": (
        TEAM.replace('treatment = "accum"', 'treatment = "acum"', 1),
        "[claims.accum-at-least-half]: treatment = 'acum' is not a scenario of the file (did you mean 'accum'?)",
    ),
    "a bad scenario setting": (TEAM.replace("batch_size = 4", "batch_size = 0"), "scenario 'b4': batch_size = 0"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_claim_file_exits_2_with_one_line_naming_the_file(tmp_path: Path, case: str) -> None:
    text, expected = BAD[case]
    path = team_file(tmp_path, text)
    done = gpubench_in_process("verify", "--claims", path, "--device", "cpu", "--out", tmp_path / "v")
    assert done.code == 2 and done.out == ""
    (line,) = done.lines
    assert line.startswith(f"gpubench: error: {path}") and expected in line, line
    assert not (tmp_path / "v").exists()


def test_unknown_claims_and_ids_exit_2(tmp_path: Path) -> None:
    done = gpubench_in_process("verify", "--claims", "guid", "--out", tmp_path / "v")
    assert (done.code, done.err) == (
        2,
        "gpubench: error: --claims 'guid' is not guide, talk, libraries, all or a .toml file (did you mean 'guide'?)\n",
    )
    done = gpubench_in_process("verify", "--claims", "guide", "--only", "guide-6pdd", "--out", tmp_path / "v")
    assert done.code == 2 and "no claim 'guide-6pdd' in --claims guide (did you mean 'guide-6pd'?)" in done.err


def verify_dir(directory: Path, verdicts: dict[str, str]) -> Path:
    rows = [{"scenario": "b4", "repeat": 1, "status": "ok", "samples_per_s": 10.0, "peak_mem_mb": 100.0}]
    write_run(directory, rows, env())
    results = [{"id": cid, "verdict": v, "measured": 1.5} for cid, v in verdicts.items()]
    (directory / "verify.json").write_text(json.dumps({"verify_format": 1, "results": results}), encoding="utf-8")
    return directory


def test_compare_of_two_verify_runs_shows_the_verdicts_that_changed(tmp_path: Path) -> None:
    a = verify_dir(tmp_path / "a", {"fp16-speed": "holds", "states-16": "holds"})
    b = verify_dir(tmp_path / "b", {"fp16-speed": "does not hold", "states-16": "holds"})
    done = gpubench("compare", a, b)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "verify verdicts that changed (1 of 2 claims):"
    assert lines[2].split() == ["fp16-speed", "holds", "does", "not", "hold", "1.5", "1.5"]
    assert "states-16" not in done.stdout
    same = gpubench_in_process("compare", a, a, "--format", "json")
    assert same.code == 0 and "verify verdicts: none of 2 claims changed" in same.err
    json.loads(same.out)  # the JSON document stays whole


def test_compare_of_plain_runs_has_no_verdict_section(tmp_path: Path) -> None:
    rows = [{"scenario": "b4", "repeat": 1, "status": "ok", "samples_per_s": 10.0, "peak_mem_mb": 100.0}]
    a, b = write_run(tmp_path / "a", rows, env()), write_run(tmp_path / "b", rows, env())
    done = gpubench_in_process("compare", a, b)
    assert done.code == 0 and "verify verdicts" not in done.out + done.err


def test_verify_on_the_cpu_measures_speed_claims_as_a_smoke_test(tmp_path: Path) -> None:
    """The end to end run: the tiny model's two scenarios trained twice each through run's runner,
    results.csv and env.json as run writes them, verify.json, every verdict with its figure."""
    out = tmp_path / "v"
    done = gpubench(
        "verify", "--claims", team_file(tmp_path), "--device", "cpu", "--repeats", "2", "--out", out,
        "--format", "json", timeout=600,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # tiny-6pd does not hold
    assert f"note: {CPU_NOTE}" in done.stderr
    records = {r["id"]: r for r in json.loads(done.stdout)}
    assert {(out / n).is_file() for n in ("results.csv", "env.json", "verify.json", "scenarios.json")} == {True}
    frame = (out / "results.csv").read_text().splitlines()
    assert len(frame) == 5  # 2 scenarios x 2 repeats
    for cid in ("accum-at-least-half", "accum-is-free"):
        r = records[cid]
        assert r["verdict"] in VERDICTS - {"not comparable here"} and r["measured"] > 0
        assert r["interval"][0] <= r["measured"] <= r["interval"][1]
        assert r["smoke_test"] and r["explanation"].startswith("CPU: a smoke test of the harness")
    assert records["states-16"]["verdict"] == "holds" and not records["states-16"]["smoke_test"]
    assert records["tiny-6pd"]["verdict"] == "does not hold"
    # the report of the directory leads with the same verdicts the command printed
    md = gpubench("report", out, "--format", "markdown")
    assert md.returncode == 0, md.stderr
    section = md.stdout.split("### Claims, judged by measurement")[1]
    for cid, r in records.items():
        rows = ([x.strip() for x in line.split("|")] for line in section.splitlines())
        cells = next(c for c in rows if c[1:2] == [cid])
        assert r["verdict"] in cells, cells
    assert "a smoke test of the harness" in section
    html = gpubench("report", out, "-o", tmp_path / "r.html")
    assert html.returncode == 0 and '<section id="verify">' in (tmp_path / "r.html").read_text()


def test_a_claim_made_on_more_gpus_is_not_comparable_before_the_run_on_one_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """On one H100 `verify --claims all` planned libraries' 2-GPU DDP/FSDP scenarios and the run
    refused the whole set (gpus = 2 on a machine with 1): the GPUs are counted before planning."""
    from bench.run import probe as probe_mod
    from bench.verify.scenarios import build
    from bench.verify.verifying import gpus_from

    monkeypatch.setattr(probe_mod, "probe", lambda device, scratch: {"devices": [{"uuid": "GPU-a"}, {"uuid": "GPU-b"}]})
    assert gpus_from("cuda") == 2 and gpus_from("cuda:1") == 1
    plan = build(load_claims("all"), on_cpu=False, gpus=gpus_from("cuda:1"))
    assert all(not isinstance(sc.gpus, int) or sc.gpus <= 1 for sc in plan.scenarios)
    assert plan.not_comparable["fsdp-memory-per-gpu"] == "made on 2+ GPUs; this machine has 1"


def test_a_verify_stopped_by_its_time_limit_is_finished_by_resume(tmp_path: Path) -> None:
    """On one H100 `verify --claims guide` needed more than one sitting: --time-limit stops it with
    exit 4 and the command to finish it; --resume measures only what did not run, and on a finished
    directory judges its claims again from the rows, with no device."""
    out = tmp_path / "v"
    args = ["--claims", team_file(tmp_path), "--only", "accum-at-least-half", "--device", "cpu", "--repeats", "2"]
    first = gpubench("verify", *args, "--out", out, "--time-limit", "0.001", "--format", "json", timeout=600)
    assert first.returncode == 4, first.stderr
    assert f"--resume {out}" in first.stderr and "the time limit had passed before" in first.stderr
    csv = out / "results.csv"
    assert (len(csv.read_text().splitlines()) - 1 if csv.is_file() else 0) < 4
    second = gpubench("verify", *args, "--resume", out, "--format", "json", timeout=600)
    assert second.returncode in (0, 1), second.stderr
    assert len((out / "results.csv").read_text().splitlines()) - 1 == 4  # 2 scenarios x 2 repeats, once each
    (record,) = json.loads(second.stdout)
    assert record["id"] == "accum-at-least-half" and record["interval"] is not None
    both = gpubench("verify", *args, "--out", out, "--resume", out)
    assert both.returncode == 2 and "--out and --resume" in both.stderr
    # finished: judged again from its rows where it ran, no device asked (this machine has no CUDA)
    rows = (out / "results.csv").read_bytes()
    again = gpubench("verify", *[a for a in args if a != "cpu" and a != "--device"], "--device", "cuda",
                     "--resume", out, "--format", "json", timeout=600)  # fmt: skip
    assert again.returncode == second.returncode, again.stderr
    assert "judged again" in again.stderr and json.loads(again.stdout) == [record]
    assert (out / "results.csv").read_bytes() == rows
    other = gpubench("verify", "--claims", "talk", "--only", "talk-compile-speed", "--resume", out)
    assert other.returncode == 2 and "do not measure these claims" in other.stderr, other.stderr
