"""Classes of bad input that once ended in an internal error (issue: reliability round 3): digits
str.isdigit() takes but int() or torchrun refuse, rendezvous endpoints with a bad host, scenario
names too long for a file name. Each is one clear line and exit 2, before any work."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import SHORT, error_lines, gpubench, gpubench_in_process, write_matrix
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.checks import ascii_digits, host_port
from bench.errors import BadInput
from bench.recipe.scenario import MAX_NAME_BYTES, Scenario

# digits of other scripts and digit-like characters: isdigit() is True for every one of them
FOREIGN_DIGITS = st.sampled_from(["²", "³", "¹", "٢", "٩", "۵", "०", "৭", "๓", "１", "①"])


@given(st.text(min_size=1, max_size=6))
def test_ascii_digits_is_exactly_what_int_reads_as_ascii(text: str) -> None:
    assert ascii_digits(text) == (all("0" <= c <= "9" for c in text))


@given(prefix=st.text(alphabet="0123456789", max_size=3), odd=FOREIGN_DIGITS)
def test_a_foreign_digit_is_never_a_number_here(prefix: str, odd: str) -> None:
    assert not ascii_digits(prefix + odd)
    assert not host_port(f"127.0.0.1:{prefix}{odd}")


@given(
    host=st.sampled_from(["127.0.0.1", "node-0", "gpu01.cluster.local", "[::1]", "[fe80::1]"]),
    port=st.integers(1, 65535),
)
def test_good_endpoints_pass(host: str, port: int) -> None:
    assert host_port(f"{host}:{port}")


@given(
    host=st.sampled_from(["bad host", "", "-x", "héte", "a/b", "[]", "[zz::1]", "host\t"]),
    port=st.one_of(st.integers(1, 65535).map(str), st.sampled_from(["0", "65536", "", "12a", "٢٩٥٤٣"])),
)
def test_bad_endpoints_are_refused(host: str, port: str) -> None:
    assert not host_port(f"{host}:{port}")


@settings(max_examples=25, deadline=None)
@given(odd=FOREIGN_DIGITS)
def test_run_refuses_foreign_digits_with_one_line(tmp_path_factory: pytest.TempPathFactory, odd: str) -> None:
    tmp = tmp_path_factory.mktemp("m")
    matrix = write_matrix(tmp / "m.toml", {"ddp": {"strategy": "ddp", "gpus": 2}})
    for args in (["--gpus", f"2{odd}"], ["--rdzv-endpoint", f"127.0.0.1:2950{odd}", "--nnodes", "2"]):
        done = gpubench_in_process("run", "--matrix", matrix, "--out", tmp / "out", *args)
        assert done.code == 2, done.err
        assert len(error_lines(done.err)) == 1 and "Traceback" not in done.err
    assert not (tmp / "out").exists()


def test_history_check_takes_a_foreign_digit_for_a_path_not_a_run_id(tmp_path: Path) -> None:
    done = gpubench_in_process("history", "check", "--db", tmp_path / "h.sqlite", "--run", "²")
    assert done.code == 2, done.err  # exit 1 would read as a regression
    assert len(error_lines(done.err)) == 1


@settings(max_examples=30, deadline=None)
@given(
    name=st.text(
        alphabet=st.sampled_from(["a", "Z", "0", "-", "_", ".", "数", "é"]),
        min_size=MAX_NAME_BYTES // 3,
        max_size=MAX_NAME_BYTES + 20,
    )
)
def test_a_scenario_name_fits_its_log_file_name_or_is_refused(name: str) -> None:
    size = len(name.encode("utf-8"))
    try:
        Scenario(name=name)
    except BadInput as exc:
        assert size > MAX_NAME_BYTES and "bytes in UTF-8" in exc.message
    else:
        assert size <= MAX_NAME_BYTES
        assert len(f"{name}-r999.log".encode()) <= 255


def test_a_minimal_hand_written_results_csv_works_with_compare_report_and_history(tmp_path: Path) -> None:
    """The five required columns are a results file for every reader: the rest reads as empty."""
    for side, speed in (("a", "10.5"), ("b", "10.2")):
        folder = tmp_path / side
        folder.mkdir()
        (folder / "results.csv").write_text(
            f"scenario,repeat,status,samples_per_s,peak_mem_mb\nbase,0,ok,10,100\nbase,1,ok,{speed},100\n"
        )
    assert gpubench_in_process("compare", tmp_path / "a", tmp_path / "b").code == 0
    done = gpubench_in_process("report", tmp_path / "a", "-o", tmp_path / "r.html")
    assert done.code == 0, done.err
    assert (tmp_path / "r.html").stat().st_size > 1000
    done = gpubench_in_process("history", "import", "--db", tmp_path / "h.sqlite", tmp_path / "a")
    assert done.code in (0, 2), done.err
    assert "internal error" not in done.err and "Traceback" not in done.err


@given(st.text(max_size=40))
def test_a_markdown_cell_holds_no_raw_html_and_no_bare_pipe(text: str) -> None:
    from bench.fmt import md_cell

    cell = md_cell(text)
    assert "<" not in cell and ">" not in cell and "\n" not in cell
    assert cell.replace("\\|", "").count("|") == 0


def test_compare_markdown_escapes_a_scenario_name_holding_a_tag(tmp_path: Path) -> None:
    name = "<img src=x onerror=alert(1)>"
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "results.csv").write_text(
            f'scenario,repeat,status,samples_per_s,peak_mem_mb\n"{name}",0,ok,10,100\n'
        )
    done = gpubench_in_process("compare", tmp_path / "a", tmp_path / "b", "--format", "markdown")
    assert done.code == 0, done.err
    assert "&lt;img src=x onerror=alert(1)&gt;" in done.out and "<img" not in done.out


@given(gpus=st.integers(1, 8), nnodes=st.integers(1, 4), rank=st.integers(0, 40))
def test_a_fault_rank_must_be_a_rank_of_the_job(gpus: int, nnodes: int, rank: int) -> None:
    extra = {"rdzv_endpoint": "127.0.0.1:29500"} if nnodes > 1 else {}
    settings_ = {"strategy": "ddp", "gpus": gpus, "nnodes": nnodes, "inject_fault": "raise", "fault_rank": rank}
    try:
        Scenario(name="s", **settings_, **extra)
    except BadInput as exc:
        assert rank >= gpus * nnodes and "is not a rank of the job" in exc.message
    else:
        assert rank < gpus * nnodes


def test_a_doubled_header_column_is_refused(tmp_path: Path) -> None:
    from bench.results import read_results

    path = tmp_path / "results.csv"
    path.write_text("scenario,repeat,status,samples_per_s,peak_mem_mb,samples_per_s\nbase,0,ok,10,100,11\n")
    with pytest.raises(BadInput, match="the header names 'samples_per_s' more than once"):
        read_results(path)


def test_resume_refuses_a_results_file_with_a_hand_added_column(tmp_path: Path) -> None:
    """Before any work: resuming would rewrite the file without the column (nothing measured lost)."""
    matrix = write_matrix(tmp_path / "m.toml", {"a": {}}, base=SHORT)
    out = tmp_path / "out"
    done = gpubench_in_process("run", "--no-report", "--matrix", matrix, "--out", out)
    assert done.code == 0, done.err
    (out / "results.csv").write_text(
        "scenario,repeat,status,samples_per_s,peak_mem_mb,my_note\na,0,ok,10,100,keep me\n"
    )
    before = (out / "results.csv").read_text()
    done = gpubench_in_process("run", "--resume", out)
    assert done.code == 2 and "has columns gpubench does not write (my_note)" in done.err, done.err
    assert (out / "results.csv").read_text() == before
    # a row of a scenario scenarios.json does not plan: refused too, the file left as it was
    (out / "results.csv").write_text("scenario,repeat,status,samples_per_s,peak_mem_mb\nother,0,ok,10,100\n")
    done = gpubench_in_process("run", "--resume", out)
    assert done.code == 2 and "has rows of scenarios scenarios.json does not plan (other)" in done.err, done.err


def test_detect_on_single_repeats_says_a_spread_needs_two(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "results.csv").write_text("scenario,repeat,status,samples_per_s,peak_mem_mb\nbase,0,ok,10,100\n")
    done = gpubench_in_process("compare", "--detect", "5", tmp_path / "a")
    assert done.code == 0
    assert "has 2 or more ok repeats" in " ".join((done.out + done.err).split())


def test_history_import_refuses_a_run_still_being_written(tmp_path: Path) -> None:
    """A run holding its lock is no finished night: storing it would keep half of it as `ok`."""
    import fcntl
    import json as json_

    run = tmp_path / "run"
    run.mkdir()
    (run / "results.csv").write_text("scenario,repeat,status,samples_per_s,peak_mem_mb\nbase,0,ok,10,100\n")
    (run / "env.json").write_text(json_.dumps({"created_at": "2026-12-01T00:00:00+00:00", "host": "h", "gpu": None}))
    with open(run / ".gpubench.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as a running `gpubench run` holds it
        done = gpubench_in_process("history", "import", "--db", tmp_path / "h.sqlite", run)
    assert done.code == 2 and "is writing this result directory" in done.err, done.err
    assert not (tmp_path / "h.sqlite").exists() or "recorded" not in done.err
    done = gpubench_in_process("history", "import", "--db", tmp_path / "h.sqlite", run)
    assert done.code == 0, done.err  # once the run has ended


def test_report_over_two_runs_never_merges_two_scenarios_into_one_name(tmp_path: Path) -> None:
    header = "scenario,repeat,status,samples_per_s,peak_mem_mb\n"
    for side, rows in (("a", "s,0,ok,10,100\nb/s,0,ok,20,100\n"), ("b", "s,0,ok,30,100\n")):
        (tmp_path / side).mkdir()
        (tmp_path / side / "results.csv").write_text(header + rows)
    done = gpubench_in_process("report", tmp_path / "a", tmp_path / "b", "-o", tmp_path / "r.html")
    assert done.code == 2 and "would stand for rows of two runs" in done.err, done.err


def test_errors_name_the_option_the_user_gave(tmp_path: Path) -> None:
    from bench.history import chart

    with pytest.raises(BadInput, match=r"^--svg \S*chart\.png: the chart is written as SVG"):
        chart.write_svg([], tmp_path / "chart.png", "t")
    import fcntl

    from bench.run.plan import RunRequest, _resume  # the resume path's lock message

    out = tmp_path / "run"
    out.mkdir()
    (out / "scenarios.json").write_text("{}")
    with open(out / ".gpubench.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with pytest.raises(BadInput) as exc:
            _resume(RunRequest(resume=out), tmp_path, None)
    assert "is writing this result directory" in exc.value.message
    assert "--out" not in f"{exc.value.message} {exc.value.hint}"


def _safetensors(path: Path, tensors: dict[str, list[int]]) -> None:
    """A safetensors file whose header names `tensors` (fp32, zero-filled data)."""
    import json as json_
    import math

    header, offset = {}, 0
    for name, shape in tensors.items():
        size = 4 * math.prod(shape)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json_.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + bytes(offset))


LLAMA = {
    "model_type": "llama",
    "hidden_size": 16,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "intermediate_size": 32,
    "vocab_size": 64,
}


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("bert-keys", "share no tensor name with the architecture"),
        ("wrong-shape", "has shape [64, 8], but its config.json builds [64, 16]"),
        ("symlink-loop", "cannot read the weights"),
        ("not-safetensors", "not a safetensors file"),
        ("config-not-object", "not a model config"),
    ],
)
def test_a_broken_checkpoint_is_refused_at_plan_time(tmp_path: Path, case: str, message: str) -> None:
    import json as json_

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json_.dumps(LLAMA if case != "config-not-object" else [LLAMA]))
    weights = ckpt / "model.safetensors"
    if case == "bert-keys":
        _safetensors(weights, {"bert.embeddings.word_embeddings.weight": [64, 16]})
    elif case == "wrong-shape":
        _safetensors(weights, {"model.embed_tokens.weight": [64, 8]})
    elif case == "symlink-loop":
        weights.symlink_to(weights)
    elif case == "not-safetensors":
        weights.write_bytes(b"\xff" * 16)
    matrix = write_matrix(tmp_path / "m.toml", {"baseline": {}})
    done = gpubench_in_process("run", "--matrix", matrix, "--model", ckpt, "--out", tmp_path / "out")
    assert done.code == 2 and message in done.err, done.err
    assert len(error_lines(done.err)) == 1 and not (tmp_path / "out").exists()


def test_cjk_scenario_names_draw_without_a_flood_of_glyph_warnings(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "results.csv").write_text(
        "scenario,repeat,status,samples_per_s,peak_mem_mb\n基准,0,ok,10,100\n实验,0,ok,12,90\n"
    )
    done = gpubench("report", tmp_path / "a", "-o", tmp_path / "r.html")
    assert done.returncode == 0, done.stderr
    assert "Glyph" not in done.stderr and "基准" in (tmp_path / "r.html").read_text(encoding="utf-8")


def test_a_refused_out_leaves_no_folder_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--out deep/a/b/c made, then found unwritable (a full disk, a read-only mount): refused, and
    none of the folders the check made is left; a folder that was there stays."""
    import tempfile

    from bench.run import request

    (tmp_path / "deep").mkdir()

    def unwritable(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", unwritable)
    with pytest.raises(BadInput, match="cannot write there: No space left on device"):
        request.check_writable(tmp_path / "deep" / "a" / "b" / "c")
    assert (tmp_path / "deep").is_dir() and list((tmp_path / "deep").iterdir()) == []
