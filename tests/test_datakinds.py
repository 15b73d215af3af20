"""The data-kind registry (bench/planner/datakinds.py) and its builders (bench/worker/data*.py): every kind
builds for a tiny model of each task it serves, deterministically; packing and token counting; the
plan-time refusals of bad input; the learnable kinds are learnt."""

from __future__ import annotations

import importlib
import json
import math
import pickle
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.errors import BadInput
from bench.families import TASKS, read_config
from bench.planner import datakinds
from bench.planner.datakinds import KINDS, DataSettings
from bench.planner.rules import check
from bench.recipe.scenario import Scenario

MODEL_OF_TASK = {"causal-lm": "llama-tiny", "sequence-classification": "tiny", "image-classification": "vit-tiny"}
CASES = [(name, task) for name, kind in KINDS.items() for task in kind.tasks]
SAMPLES, SEQ_LEN = 6, 24
TEXT = "The first document.\nIt has two lines.\n\n\nA second one, é and ü.\n\n   \nThird.\n"


def has_datasets() -> bool:
    return importlib.util.find_spec("datasets") is not None


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One small file of each kind that reads one: a text file, a CIFAR-10 folder of one batch and
    its test batch (python's pickle format, protocol 2 as CIFAR's own), a save_to_disk folder."""
    import numpy as np

    root = tmp_path_factory.mktemp("data")
    (root / "corpus.txt").write_text(TEXT, encoding="utf-8")
    cifar = root / "cifar-10-batches-py"
    cifar.mkdir()
    rng = np.random.default_rng(0)
    batch = {b"data": rng.integers(0, 256, (5, 3072), dtype=np.uint8), b"labels": [0, 9, 3, 3, 1]}
    (cifar / "data_batch_1").write_bytes(pickle.dumps(batch, protocol=2))
    test = {b"data": rng.integers(0, 256, (3, 3072), dtype=np.uint8), b"labels": [7, 2, 5]}
    (cifar / "test_batch").write_bytes(pickle.dumps(test, protocol=2))
    out = {"text": root / "corpus.txt", "cifar10": cifar}
    if has_datasets():
        from datasets import Dataset

        Dataset.from_dict({"text": [TEXT, "", "More text here."], "n": [1, 2, 3]}).save_to_disk(str(root / "saved"))
        out["saved"] = root / "saved"
    return out


def data_value(name: str, files: dict[str, Path]) -> str:
    if not KINDS[name].argument:
        return name
    if name not in files:
        pytest.skip(f"{name}: needs the {KINDS[name].package} package (pip install {KINDS[name].package})")
    return f"{name}:{files[name]}"


def build(
    name: str, task: str, files: dict[str, Path], samples: int = SAMPLES, seed: int = 0, split: str = "train"
) -> Any:
    from bench.families.build import model_config
    from bench.worker.dataset import dataset_for

    config = model_config(MODEL_OF_TASK[task])
    return config, dataset_for(config, task, samples, SEQ_LEN, seed, "memory", data_value(name, files), split=split)


def test_every_kind_names_a_builder_tasks_and_the_argument_its_check_reads() -> None:
    assert {"random", "lm-synthetic", "cls-synthetic", "vision-synthetic", "text", "saved", "cifar10"} <= set(KINDS)
    from bench.worker.dataset import builder

    for kind in KINDS.values():
        assert kind.tasks and set(kind.tasks) <= set(TASKS), kind.name
        assert callable(builder(kind)), kind.name
        assert bool(kind.argument) == (kind.check is not None), kind.name  # every file is checked at plan time
    assert all(kind.learnable for kind in KINDS.values() if kind.name != "random")
    assert {t for k in KINDS.values() if k.learnable and not k.argument for t in k.tasks} == set(TASKS)


@pytest.mark.parametrize(("name", "task"), CASES, ids=[f"{n}-{t}" for n, t in CASES])
def test_every_kind_builds_for_a_tiny_model_of_each_task_it_serves(
    name: str, task: str, files: dict[str, Path]
) -> None:
    import torch

    config, ds = build(name, task, files)
    assert len(ds) == SAMPLES
    rows = [ds[i] for i in range(SAMPLES)]
    assert all(r["labels"].dtype == torch.long for r in rows)
    if task == "image-classification":
        assert {tuple(r["pixel_values"].shape) for r in rows} == {(3, config.image_size, config.image_size)}
        assert all(r["pixel_values"].dtype == torch.float32 for r in rows)
    else:
        assert {tuple(r["input_ids"].shape) for r in rows} == {(SEQ_LEN,)}
        ids = torch.stack([r["input_ids"] for r in rows])
        assert ids.dtype == torch.long and int(ids.min()) >= 0 and int(ids.max()) < config.vocab_size
    if task == "causal-lm":
        assert ds.trained_tokens_per_sample() == SEQ_LEN  # these files fill whole blocks
        assert all(torch.equal(r["labels"], r["input_ids"]) for r in rows)
    else:
        labels = torch.stack([r["labels"] for r in rows])
        assert labels.shape == (SAMPLES,) and int(labels.min()) >= 0 and int(labels.max()) < config.num_labels
        assert ds.trained_tokens_per_sample() is None
    _, again = build(name, task, files)  # the same rows, for the same seed
    assert all(
        torch.equal(a, b) for i in range(SAMPLES) for a, b in zip(ds[i].values(), again[i].values(), strict=True)
    )
    first = build(name, task, files, samples=3)[1]  # rows are drawn in order: fewer samples, the same first rows
    assert all(torch.equal(ds[i]["labels"], first[i]["labels"]) for i in range(3))


def test_the_learnable_kinds_do_not_follow_the_scenarios_seed_and_random_does(files: dict[str, Path]) -> None:
    import torch

    for name in ("lm-synthetic", "random"):
        a, b = build(name, "causal-lm", files, seed=1)[1], build(name, "causal-lm", files, seed=2)[1]
        assert torch.equal(a[0]["input_ids"], b[0]["input_ids"]) == (name != "random")


@pytest.mark.parametrize("split", ["train", "test"])
def test_the_synthetic_labels_are_functions_of_the_inputs(files: dict[str, Path], split: str) -> None:
    """cls-synthetic: the majority class of (id - 100) mod num_labels; about even classes; in the
    held-out split as in the training rows (the same task)."""
    import torch

    config, ds = build("cls-synthetic", "sequence-classification", files, samples=400, split=split)
    ids = ds.inputs["input_ids"] - 100
    counts = torch.stack([(ids % config.num_labels == c).sum(1) for c in range(config.num_labels)], 1)
    assert torch.equal(counts.argmax(1), ds.labels)
    assert torch.bincount(ds.labels).min() > 400 / config.num_labels * 0.8


HELD_OUT = [(name, task) for name, task in CASES if KINDS[name].held_out]


@pytest.mark.parametrize("case", HELD_OUT, ids=["/".join(c) for c in HELD_OUT])
def test_a_held_out_split_is_other_rows_of_the_same_task(case: tuple[str, str], files: dict[str, Path]) -> None:
    """eval_samples' rows: none of them a training row, the training rows as they were without one,
    and the task's structure shared (a synthetic kind's class patterns or chain; CIFAR-10's test batch)."""
    import torch

    name, task = case
    key = "pixel_values" if task == "image-classification" else "input_ids"
    _, train = build(name, task, files, samples=SAMPLES)
    _, test = build(name, task, files, samples=SAMPLES, split="test")
    _, again = build(name, task, files, samples=SAMPLES, seed=7)  # the learnable kinds ignore the seed
    assert torch.equal(train.inputs[key], again.inputs[key]) and len(test) == SAMPLES
    trained = {tuple(row.flatten().tolist()) for row in train.inputs[key]}
    assert not any(tuple(row.flatten().tolist()) in trained for row in test.inputs[key])
    if name == "cifar10":
        assert test.labels.tolist() == [7, 2, 5, 7, 2, 5]  # test_batch's, repeated up to the samples
    elif (
        name == "lm-synthetic"
    ):  # the same chain: every step of a test row is a step some row of a larger training set takes
        _, big = build(name, task, files, samples=400)
        seen = {(a, b) for row in big.inputs[key].tolist() for a, b in zip(row, row[1:], strict=False)}
        steps = [(a, b) for row in test.inputs[key].tolist() for a, b in zip(row, row[1:], strict=False)]
        assert sum(step in seen for step in steps) / len(steps) > 0.9
    elif name == "vision-synthetic":  # the same class patterns: each test image nearest its class's training mean
        _, big = build(name, task, files, samples=200)
        means = torch.stack([big.inputs[key][big.labels == c].mean(0) for c in range(int(big.labels.max()) + 1)])
        nearest = torch.cdist(test.inputs[key].flatten(1), means.flatten(1)).argmin(1)
        assert torch.equal(nearest, test.labels)


@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from([n for n, k in KINDS.items() if not k.held_out]),
    samples=st.integers(1, 10_000_000),
)
def test_eval_samples_on_data_without_a_held_out_split_is_refused_by_the_scenario(name: str, samples: int) -> None:
    value = f"{name}:/some/path" if KINDS[name].argument else name
    with pytest.raises(BadInput) as refused:
        check(Scenario(name="s", data=value, eval_samples=samples))
    message = refused.value.message
    assert message.startswith(f"scenario 's': eval_samples = {samples} needs data with a held-out split")
    assert all(n in message for n, k in KINDS.items() if k.held_out)
    assert Scenario(name="s", data=value).eval_samples == 0  # without eval_samples the data is fine


def test_a_cifar_folder_without_its_test_batch_is_refused_only_when_scored(
    files: dict[str, Path], tmp_path: Path
) -> None:
    import shutil

    cfg = read_config("vit-tiny")
    folder = tmp_path / "cifar"
    shutil.copytree(files["cifar10"], folder)
    (folder / "test_batch").unlink()
    datakinds.check(f"cifar10:{folder}", "image-classification", cfg, DataSettings(), "vit-tiny")
    with pytest.raises(BadInput, match=r"holds no test_batch, the test images eval_samples scores"):
        datakinds.check(f"cifar10:{folder}", "image-classification", cfg, DataSettings(held_out=True), "vit-tiny")


def test_packing_joins_documents_with_eos_and_cuts_blocks() -> None:
    import torch

    from bench.worker.datafiles import documents, pack

    assert documents(TEXT) == ["The first document.\nIt has two lines.", "A second one, é and ü.", "Third."]
    ds = pack([[5, 6, 7], [8, 9]], eos=1, seq_len=3, samples=5)  # stream 5 6 7 1 8 9 1: two blocks, 1 dropped
    assert ds.inputs["input_ids"].tolist() == [[5, 6, 7], [1, 8, 9], [5, 6, 7], [1, 8, 9], [5, 6, 7]]
    assert ds.trained_tokens_per_sample() == 3 and "attention_mask" not in ds.inputs
    short = pack([[5, 6]], eos=1, seq_len=6, samples=2)  # one padded block, its padding unlabelled
    assert short.inputs["input_ids"].tolist() == [[5, 6, 1, 1, 1, 1]] * 2
    assert short.labels.tolist() == [[5, 6, 1, -100, -100, -100]] * 2
    assert short.inputs["attention_mask"].tolist() == [[1, 1, 1, 0, 0, 0]] * 2
    assert short.trained_tokens_per_sample() == 3
    assert torch.equal(short[1]["labels"], short.labels[1])


def test_the_byte_fallback_maps_bytes_below_the_vocabulary(files: dict[str, Path]) -> None:
    from bench.worker.datafiles import tokenise
    from bench.worker.dataset import DataRequest

    ids, eos = tokenise(["é!"], DataRequest(None, "causal-lm", 1, 4, 0))
    assert ids == [[0xC3 + 1, 0xA9 + 1, ord("!") + 1]] and eos == 0


def test_a_cifar_batch_unpickles_arrays_only(tmp_path: Path) -> None:
    from bench.planner.datareaders import read_cifar_batch

    (tmp_path / "data_batch_1").write_bytes(pickle.dumps({b"data": [1], b"labels": Path("x")}))
    with pytest.raises(BadInput, match="not a CIFAR-10 batch \\(it holds pathlib.PosixPath: only arrays"):
        read_cifar_batch(tmp_path / "data_batch_1")


# -- bad input, at plan time and without torch ----------------------------------------------------
NAMES = st.text(alphabet=string.ascii_lowercase + "-_", min_size=1, max_size=12)
QUICK = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@QUICK
@given(name=NAMES.filter(lambda n: n not in KINDS))
def test_an_unknown_kind_is_refused_naming_the_kinds(name: str) -> None:
    with pytest.raises(BadInput, match=r"data = .* is not a data kind \(random, lm-synthetic"):
        check(Scenario(name="s", data=name))


def test_a_misspelt_kind_gets_a_did_you_mean_and_arguments_are_checked_by_form() -> None:
    with pytest.raises(BadInput, match="did you mean 'lm-synthetic'"):
        check(Scenario(name="s", data="lm-synthetc"))
    with pytest.raises(BadInput, match='needs its PATH: data = "text:PATH"'):
        check(Scenario(name="s", data="text:"))
    with pytest.raises(BadInput, match='takes no argument: data = "cls-synthetic"'):
        check(Scenario(name="s", data="cls-synthetic:x"))
    with pytest.raises(BadInput, match="tokenizer = 'tok' needs text data"):
        check(Scenario(name="s", data="lm-synthetic", tokenizer="tok"))
    with pytest.raises(BadInput, match="data_column = 'body' needs data = \"saved:PATH\""):
        check(Scenario(name="s", data="text:x", data_column="body"))


@QUICK
@given(kind=st.sampled_from([k for k in KINDS.values() if k.argument]), missing=NAMES)
def test_a_missing_file_is_refused(kind: datakinds.DataKind, missing: str, tmp_path: Path) -> None:
    task = kind.tasks[0]
    with pytest.raises(BadInput, match="does not exist"):
        datakinds.check(f"{kind.name}:{tmp_path / 'nothing' / missing}", task, {}, DataSettings(), "m")


@QUICK
@given(blank=st.text(alphabet=" \t\r\n", max_size=20))
def test_a_text_file_without_text_is_refused(blank: str, tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text(blank, encoding="utf-8")
    with pytest.raises(BadInput, match="holds no text"):
        datakinds.check(f"text:{tmp_path / 'empty.txt'}", "causal-lm", {"vocab_size": 4096}, DataSettings(), "m")


def saved_folder(path: Path, columns: list[str]) -> Path:
    """What save_to_disk writes that the plan reads: dataset_info.json's features (with `datasets`,
    the folder save_to_disk writes, each column one row of text)."""
    if has_datasets():
        from datasets import Dataset

        if not path.is_dir():
            Dataset.from_dict({c: ["some text"] for c in columns}).save_to_disk(str(path))
        return path
    path.mkdir(exist_ok=True)
    features = {c: {"dtype": "string", "_type": "Value"} for c in columns}
    (path / "dataset_info.json").write_text(json.dumps({"features": features}), encoding="utf-8")
    return path


@QUICK
@given(column=st.text(alphabet=string.ascii_letters + "_", min_size=1, max_size=10).filter(lambda c: c != "body"))
def test_a_saved_dataset_without_the_column_is_refused(column: str, tmp_path: Path) -> None:
    folder = saved_folder(tmp_path / "saved", ["body", "id"])
    with pytest.raises(BadInput, match=f"no column '{column}' \\(its columns: body, id\\)"):
        datakinds.check(f"saved:{folder}", "causal-lm", {"vocab_size": 4096}, DataSettings(column=column), "m")
    datakinds.check(f"saved:{folder}", "causal-lm", {"vocab_size": 4096}, DataSettings(column="body"), "m")


def test_a_folder_save_to_disk_did_not_write_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="not a dataset saved with datasets' save_to_disk"):
        datakinds.check(f"saved:{tmp_path}", "causal-lm", {"vocab_size": 4096}, DataSettings(), "m")


@QUICK
@given(names=st.lists(NAMES.filter(lambda n: not n.startswith("data_batch_")), max_size=4))
def test_a_cifar_folder_without_batches_is_refused(names: list[str], tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("cifar")
    for name in names:
        (folder / name).write_bytes(b"x")
    with pytest.raises(BadInput, match="holds no data_batch_N files"):
        datakinds.check(f"cifar10:{folder}", "image-classification", {"num_labels": 10}, DataSettings(), "m")


def test_cifar_needs_ten_labels_and_bytes_need_257_ids(files: dict[str, Path]) -> None:
    with pytest.raises(BadInput, match="CIFAR-10 has 10 classes, the model has num_labels = 2"):
        datakinds.check(f"cifar10:{files['cifar10']}", "image-classification", {}, DataSettings(), "m")
    with pytest.raises(BadInput, match="byte-level fallback needs a vocabulary of 257 ids, the model has 64"):
        datakinds.check(f"text:{files['text']}", "causal-lm", {"vocab_size": 64}, DataSettings(), "m")
    with pytest.raises(BadInput, match='tokenizer = "/no/such": not a folder'):
        datakinds.check(f"text:{files['text']}", "causal-lm", {}, DataSettings(tokenizer="/no/such"), "m")


@QUICK
@given(case=st.sampled_from([(k, t) for k in KINDS for t in TASKS if not KINDS[k].serves(t)]))
def test_a_kind_that_does_not_serve_the_models_task_is_refused(case: tuple[str, str]) -> None:
    name, task = case
    with pytest.raises(BadInput, match=f"the {name} kind serves .* but m trains {task}"):
        datakinds.check(f"{name}:/x" if KINDS[name].argument else name, task, {}, DataSettings(), "m")


def test_the_plan_names_the_scenario_and_saves_absolute_paths(files: dict[str, Path], monkeypatch: Any) -> None:
    from bench.run.plan import check_data

    monkeypatch.chdir(files["text"].parent)
    planned = check_data((Scenario(name="lm", model="llama-tiny", data="text:corpus.txt", samples=64),), "cpu")
    assert planned[0].data == f"text:{files['text']}"
    with pytest.raises(BadInput, match="scenario 'enc': data = \"lm-synthetic\": the lm-synthetic kind serves"):
        check_data((Scenario(name="enc", model="tiny", data="lm-synthetic", samples=64),), "cpu")


def test_rows_on_other_data_are_another_scenario_and_old_rows_are_random() -> None:
    from bench.results.identity import series_key, series_settings

    row = {"model": "llama-tiny", "samples": 64, "seq_len": 32}
    old = series_key(series_settings("a", row, "CPU"))
    assert series_key(series_settings("a", {**row, "data": "random"}, "CPU")) == old
    assert series_key(series_settings("a", {**row, "data": "lm-synthetic"}, "CPU")) != old
    assert read_config("llama-tiny")["vocab_size"] == 4096  # the loss test's ln(vocab)


# -- the learnable kinds are learnt --------------------------------------------------------------
def test_a_tiny_llama_learns_lm_synthetic_in_a_few_dozen_steps() -> None:
    """30 AdamW steps of 8 x 64 tokens: the loss falls from ln(4096) = 8.3 to well below ln(512),
    the best guess without the chain's structure (random ids cannot go below ln(3996))."""
    import torch
    from transformers import AutoModelForCausalLM

    from bench.families.build import model_config
    from bench.worker.dataset import dataset_for

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: more threads only wait on each other
    try:
        config = model_config("llama-tiny")
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config)
        ids = dataset_for(config, "causal-lm", 240, 64, 0, "memory", "lm-synthetic").inputs["input_ids"]
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        losses = []
        for step in range(30):
            batch = ids[step * 8 : step * 8 + 8]
            loss = model(input_ids=batch, labels=batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
    finally:
        torch.set_num_threads(threads)
    assert losses[0] > math.log(4096) - 0.5
    assert sum(losses[-5:]) / 5 < math.log(512) - 0.5, losses


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    samples=st.integers(min_value=1, max_value=200),
    seed=st.integers(min_value=0, max_value=2**31),
    threads=st.integers(min_value=1, max_value=4),
)
def test_random_images_depend_on_the_seed_alone_not_the_threads_that_draw_them(
    samples: int, seed: int, threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guide's random images, drawn in blocks on several threads: the same values for a seed
    whatever the thread count, a prefix of a longer set, standard normal, another seed another set."""
    import torch

    from bench.worker import dataset

    monkeypatch.setattr(dataset, "MAX_DRAW_THREADS", 1)
    one = dataset.random_images(samples, (2, 3, 3), seed)
    monkeypatch.setattr(dataset, "MAX_DRAW_THREADS", threads)
    monkeypatch.setattr(dataset.cpus, "available", lambda: set(range(threads)))
    assert torch.equal(dataset.random_images(samples, (2, 3, 3), seed), one)
    assert torch.equal(dataset.random_images(samples + 70, (2, 3, 3), seed)[:samples], one)
    assert not torch.equal(dataset.random_images(samples, (2, 3, 3), seed + 1), one)
    assert one.dtype == torch.float32 and one.shape == (samples, 2, 3, 3) and torch.isfinite(one).all()
    if samples >= 100:
        assert abs(float(one.mean())) < 0.15 and 0.85 < float(one.std()) < 1.15
