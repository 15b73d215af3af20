"""The readers of the data files (bench/planner/datareaders.py): every malformed file of each kind is refused
at plan time, before any worker, in one line naming the file; a text file's encoding is named in the
data field. Property tests generate the malformed files; the CLI tests are the defects as a user met
them (a CIFAR batch of 20 images and 5 labels trained `ok` on 5)."""

from __future__ import annotations

import importlib.util
import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from harness import gpubench_in_process, write_matrix
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.errors import BadInput
from bench.planner import datakinds
from bench.planner.datakinds import DataSettings
from bench.planner.rules import check
from bench.recipe.scenario import Scenario

QUICK = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
VOCAB = 4096
LLAMA = {"model": "llama-tiny", "samples": 16, "seq_len": 32, "warmup_steps": 1, "batch_size": 4}
VIT = {"model": "vit-tiny", "samples": 16, "warmup_steps": 1, "batch_size": 4}
needs_datasets = pytest.mark.skipif(importlib.util.find_spec("datasets") is None, reason="needs datasets")


def refused(data: str, task: str = "causal-lm", cfg: dict[str, Any] | None = None, **given: Any) -> str:
    """The one-line message of the plan's refusal of `data`."""
    with pytest.raises(BadInput) as caught:
        datakinds.check(data, task, cfg or {"vocab_size": VOCAB, "num_labels": 10}, DataSettings(**given), "m")
    text = str(caught.value)
    assert "\n" not in text and "\r" not in text
    return text


def refused_by_run(tmp_path: Path, data: str, base: dict[str, Any]) -> str:
    """`gpubench run` on one scenario of `data`: exit 2, one error line, nothing written."""
    matrix = write_matrix(tmp_path / "m.toml", {"s": {"data": data}}, base=base)
    done = gpubench_in_process("run", "--matrix", matrix, "--device", "cpu", "--out", tmp_path / "out")
    assert done.code == 2, done.err
    (line,) = [ln for ln in done.lines if ln.strip()]
    assert line.startswith("gpubench: error: scenario 's': ") and "Traceback" not in done.err
    assert not (tmp_path / "out").exists()  # no worker started, no folder left
    return line


# -- text: UTF-8 unless the data field names another encoding --------------------------------------
INVALID_UTF8 = [b"\xff", b"\xfe", b"\x80", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82x", b"\xf5\x80\x80\x80"]


@QUICK
@given(
    before=st.text(st.characters(blacklist_categories=["Cs"]), max_size=40),
    bad=st.sampled_from(INVALID_UTF8),
    after=st.text(max_size=20).map(lambda t: t.encode("utf-8", "surrogatepass").decode("utf-8", "ignore")),
)
def test_a_text_file_that_is_not_utf8_is_refused_naming_the_file_and_the_byte(
    before: str, bad: bytes, after: str, tmp_path: Path
) -> None:
    path = tmp_path / "corpus.txt"
    head = ("x" + before).encode("utf-8")
    path.write_bytes(head + bad + after.encode("utf-8"))
    message = refused(f"text:{path}")
    assert f"{path}: not utf-8 text (byte 0x{bad[0]:02x} at offset {len(head)}" in message
    assert 'data = "text[latin-1]:PATH"' in message
    datakinds.check(f"text[latin-1]:{path}", "causal-lm", {"vocab_size": VOCAB}, DataSettings(), "m")  # every byte


def test_the_encoding_is_named_in_brackets_kept_in_the_row_and_checked_by_form(tmp_path: Path) -> None:
    assert datakinds.parse("text[latin-1]:/a:b.txt") == ("text", "latin-1", "/a:b.txt")
    assert datakinds.split("text[latin-1]:/a.txt") == ("text", "/a.txt") and datakinds.encoding("text:/a") == "utf-8"
    assert Scenario(name="s", data="text[cp1252]:x").data == "text[cp1252]:x"
    with pytest.raises(BadInput, match="names an unknown encoding 'klingon'"):
        check(Scenario(name="s", data="text[klingon]:x"))
    with pytest.raises(BadInput, match='takes no encoding: data = "cifar10:DIR"'):
        check(Scenario(name="s", data="cifar10[utf-8]:x"))
    with pytest.raises(BadInput, match="is not a data kind"):
        check(Scenario(name="s", data="text[latin-1:x"))
    (tmp_path / "c.txt").write_bytes(b"caf\xe9")
    assert datakinds.absolute(f"text[latin-1]:{tmp_path}/./c.txt") == f"text[latin-1]:{tmp_path / 'c.txt'}"


def test_the_worker_reads_the_named_encoding_as_the_plan_did(tmp_path: Path) -> None:
    from bench.families.build import model_config
    from bench.worker.dataset import dataset_for

    (tmp_path / "latin.txt").write_bytes("café crème\n\nüber".encode("latin-1"))
    (tmp_path / "utf8.txt").write_text("café crème\n\nüber", encoding="utf-8")
    cfg = model_config("llama-tiny")
    latin = dataset_for(cfg, "causal-lm", 2, 8, 0, "memory", f"text[latin-1]:{tmp_path / 'latin.txt'}")
    utf8 = dataset_for(cfg, "causal-lm", 2, 8, 0, "memory", f"text:{tmp_path / 'utf8.txt'}")
    assert latin.inputs["input_ids"].tolist() == utf8.inputs["input_ids"].tolist()
    with pytest.raises(BadInput, match="not utf-8 text"):  # never replacement characters
        dataset_for(cfg, "causal-lm", 2, 8, 0, "memory", f"text:{tmp_path / 'latin.txt'}")


def test_run_refuses_a_text_file_that_is_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "latin.txt").write_bytes("a text in latin-1: café\n".encode("latin-1"))
    line = refused_by_run(tmp_path, f"text:{tmp_path / 'latin.txt'}", LLAMA)
    assert f"{tmp_path / 'latin.txt'}: not utf-8 text (byte 0xe9 at offset 22" in line


# -- CIFAR-10: images and labels agree in count and shape ---------------------------------------------
def cifar_folder(root: Path, batch: Any = None, raw: bytes | None = None, protocol: int = 2) -> Path:
    """A folder of one data_batch_1: `batch` pickled as CIFAR's own are (protocol 2), or `raw` bytes."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "data_batch_1").write_bytes(raw if raw is not None else pickle.dumps(batch, protocol=protocol))
    return root


def images(n: int, width: int = 3072, dtype: Any = np.uint8) -> np.ndarray:
    return np.zeros((n, width), dtype=dtype)


GOOD = {b"data": images(4), b"labels": [0, 1, 2, 9]}
MALFORMED = st.one_of(
    st.tuples(st.integers(1, 30), st.integers(0, 30))
    .filter(lambda nm: nm[0] != nm[1])
    .map(lambda nm: ({b"data": images(nm[0]), b"labels": [1] * nm[1]}, f"{nm[0]} images but {nm[1]} labels")),
    st.integers(1, 5).flatmap(
        lambda n: st.sampled_from([-1, 10, 11, 255, -300]).map(
            lambda bad: ({b"data": images(n), b"labels": [0] * (n - 1) + [bad]}, f"label {bad} of image {n - 1}")
        )
    ),
    st.sampled_from([1024, 3071, 3073, 6144]).map(
        lambda w: ({b"data": images(2, w), b"labels": [0, 1]}, f"(2, {w}) array of uint8")
    ),
    st.sampled_from([np.int64, np.float32, np.int8]).map(
        lambda t: ({b"data": images(2, dtype=t), b"labels": [0, 1]}, "not N x 3072 uint8 pixels")
    ),
    st.just(({b"data": images(2), b"labels": [0.5, 1.0]}, "not a list of whole numbers")),
    st.just(({b"data": images(2), b"labels": [[0], [1]]}, "not a list of whole numbers")),
    st.just(({b"data": images(0), b"labels": []}, "it holds no images")),
    st.just(({b"labels": [0]}, "not a dict with b'data' and b'labels'")),
    st.just(([1, 2, 3], "not a dict with b'data' and b'labels'")),
)


@QUICK
@given(case=MALFORMED)
def test_a_malformed_cifar_batch_is_refused_naming_the_file(
    case: tuple[Any, str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    batch, says = case
    folder = cifar_folder(tmp_path_factory.mktemp("cifar"), batch, protocol=4)  # 2 pickles b"" as a call
    message = refused(f"cifar10:{folder}", "image-classification")
    assert f"{folder / 'data_batch_1'}: not a CIFAR-10 batch (" in message and says in message


@QUICK
@given(cut=st.integers(0, 200), junk=st.binary(max_size=20))
def test_a_truncated_or_garbled_cifar_batch_is_refused(
    cut: int, junk: bytes, tmp_path_factory: pytest.TempPathFactory
) -> None:
    whole = pickle.dumps(GOOD, protocol=2)
    folder = cifar_folder(tmp_path_factory.mktemp("cifar"), raw=whole[:cut] + junk)
    assert f"{folder / 'data_batch_1'}: not a CIFAR-10 batch (" in refused(f"cifar10:{folder}", "image-classification")


def test_the_held_out_batch_is_read_only_when_scored(tmp_path: Path) -> None:
    folder = cifar_folder(tmp_path / "cifar", GOOD)
    (folder / "test_batch").write_bytes(pickle.dumps({b"data": images(3), b"labels": [1]}, protocol=2))
    cfg = {"num_labels": 10}
    datakinds.check(f"cifar10:{folder}", "image-classification", cfg, DataSettings(), "m")
    assert "3 images but 1 labels" in refused(f"cifar10:{folder}", "image-classification", cfg, held_out=True)


def test_run_refuses_a_cifar_batch_of_20_images_and_5_labels(tmp_path: Path) -> None:
    folder = cifar_folder(tmp_path / "cifar", {b"data": images(20), b"labels": [0, 1, 2, 3, 4]})
    line = refused_by_run(tmp_path, f"cifar10:{folder}", VIT)
    assert f"{folder / 'data_batch_1'}: not a CIFAR-10 batch (20 images but 5 labels)" in line


# -- saved: token ids are whole numbers below the vocabulary, no empty rows; the folder's JSON -------
def save(path: Path, columns: dict[str, list[Any]]) -> Path:
    from datasets import Dataset

    Dataset.from_dict(columns).save_to_disk(str(path))
    return path


ROWS = st.lists(st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=6), min_size=1, max_size=5)
BAD_ROW = st.one_of(
    st.lists(st.integers(0, VOCAB - 1), max_size=3).flatmap(
        lambda ok: st.sampled_from([-1, -(2**40), VOCAB, VOCAB + 7, 2**40]).map(
            lambda bad: (ok + [bad], f"holds token id {bad}, not a whole number from 0 to {VOCAB - 1}")
        )
    ),
    st.just(([], "holds no token ids")),
)


@needs_datasets
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=ROWS, bad=BAD_ROW, at=st.integers(0, 5))
def test_a_saved_token_column_with_a_bad_row_is_refused_naming_the_row(
    rows: list[list[int]], bad: tuple[list[int], str], at: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    row, says = bad
    at = min(at, len(rows))
    folder = save(tmp_path_factory.mktemp("saved") / "ds", {"ids": rows[:at] + [row] + rows[at:]})
    message = refused(f"saved:{folder}", column="ids")
    assert f"{folder}: column 'ids': row {at} {says}" in message


@needs_datasets
@pytest.mark.parametrize(
    ("values", "says"),
    [
        ([[1.0, 2.0], [3.5]], "holds list<item: double>, not text nor lists of whole-number token ids"),
        ([1, 2, 3], "holds int64, not text nor lists"),
        ([[1, 2], None], "row 1 holds no token ids"),
        (["some text", None], "row 1 holds no text (None)"),
    ],
)
def test_a_saved_column_of_floats_numbers_or_missing_rows_is_refused(
    values: list[Any], says: str, tmp_path: Path
) -> None:
    folder = save(tmp_path / "ds", {"c": values})
    assert f"{folder}: column 'c'" in (message := refused(f"saved:{folder}", column="c")) and says in message


@needs_datasets
@QUICK
@given(
    doc=st.one_of(
        st.binary(min_size=1, max_size=30).filter(lambda b: not _is_json(b)),
        st.sampled_from([b'{"splits": "train"}', b'{"splits": 3}', b'{"splits": []}', b'{"splits": [1]}']),
        st.sampled_from([b"[]", b"null", b'"train"', b'{"splits": {"train": 1}}', b'{"splits": [""]}']),
    )
)
def test_a_saved_folder_whose_dataset_dict_json_is_malformed_is_refused_naming_it(
    doc: bytes, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.mktemp("saved")
    (folder / "dataset_dict.json").write_bytes(doc)
    message = refused(f"saved:{folder}")
    assert f"{folder / 'dataset_dict.json'}: " in message
    assert "not JSON" in message or "its 'splits' is not a list of split names" in message


def _is_json(raw: bytes) -> bool:
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(doc, dict) and isinstance(doc.get("splits"), list)


@needs_datasets
def test_a_saved_folder_with_damaged_arrow_data_is_refused(tmp_path: Path) -> None:
    folder = save(tmp_path / "ds", {"text": ["some text", "more"]})
    for arrow in folder.glob("*.arrow"):
        arrow.write_bytes(b"not arrow")
    assert f"{folder}: not a readable save_to_disk folder (" in refused(f"saved:{folder}")


@needs_datasets
@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: save(p, {"text": [[5, -1, 7]]}), "column 'text': row 0 holds token id -1"),
        (lambda p: (p.mkdir(), (p / "dataset_dict.json").write_text("{not json"), p)[2], "dataset_dict.json: not JSON"),
        (
            lambda p: (p.mkdir(), (p / "dataset_dict.json").write_text('{"splits": 3}'), p)[2],
            "dataset_dict.json: its 'splits' is not a list of split names",
        ),
    ],
    ids=["negative-id", "dict-not-json", "splits-not-a-list"],
)
def test_run_refuses_a_malformed_saved_folder(make: Any, says: str, tmp_path: Path) -> None:
    folder = make(tmp_path / "ds")
    line = refused_by_run(tmp_path, f"saved:{folder}", LLAMA)
    assert f"{folder}" in line and says in line
