"""The data-kind registry: what a scenario trains on (its `data` field), one torch-free row per kind.

`data = "NAME"` or `data = "NAME:ARGUMENT"` (a path; a text file's encoding in brackets:
"text[latin-1]:PATH"). A row says which tasks the kind serves, the
argument it takes, the pip package it needs, and the worker function that builds it by name
(`bench/worker/data*.py`), so the parent checks a kind, its task and its files before any work
(exit 2) without importing torch. `data_source` is another axis: the container the worker hands
the engine (a plain torch Dataset or a `datasets.Dataset`), whatever the kind. The plan reads every
file with the readers the worker uses (bench/planner/datareaders.py), so a malformed one is exit 2 before any
worker starts. Adding a kind: a row here and a builder in the worker (docs/data.md).
"""

from __future__ import annotations

import codecs
import functools
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import BadInput, did_you_mean
from ..families.base import TASKS
from . import datareaders
from .datareaders import CIFAR_CLASSES, saved_columns, saved_split

CAUSAL, CLASSIFY, IMAGE = "causal-lm", "sequence-classification", "image-classification"
BYTE_VOCAB = 257  # the byte-level fallback: byte b is id b + 1, id 0 ends a document
CIFAR_BATCHES = "data_batch_*"
CIFAR_TEST = "test_batch"

Check = Callable[[str, "DataSettings", Mapping[str, Any]], None]


@dataclass(frozen=True)
class DataSettings:
    """The scenario's data fields a check reads (the kind's argument aside)."""

    tokenizer: str = ""
    column: str = "text"
    held_out: bool = False  # eval_samples > 0: the kind's held-out split is read too
    encoding: str = "utf-8"  # a text file's, from the data field's "text[ENCODING]:PATH"


@dataclass(frozen=True)
class DataKind:
    """One kind of data. `builder`: "module:function" of the worker that builds it; `argument`:
    what follows "NAME:" ("" when it takes none); `tokenized`: text that `tokenizer` turns into ids;
    `columns`: a table whose column `data_column` holds the text; `encoded`: a text file whose
    encoding the data field may name ("text[latin-1]:PATH"; UTF-8 when it names none);
    `learnable`: a deterministic task a model learns (the loss falls), not noise; `held_out`: what
    its held-out split is, which `eval_samples` scores after training ("": it has none)."""

    name: str
    tasks: tuple[str, ...]
    builder: str
    description: str
    argument: str = ""
    package: str | None = None
    tokenized: bool = False
    columns: bool = False  # reads the scenario's data_column
    encoded: bool = False  # takes "[ENCODING]" after its name
    learnable: bool = False
    check: Check | None = None  # plan-time check of the argument, given the model's config
    held_out: str = ""

    def serves(self, task: str) -> bool:
        return task in self.tasks


# -- plan-time checks of each kind's argument ---------------------------------------------------
def _file(arg: str, what: str) -> Path:
    path = Path(arg).expanduser()
    if not path.exists():
        raise BadInput(f"{what}: {path} does not exist", hint="give an existing path after the kind's colon")
    return path


def _vocab(cfg: Mapping[str, Any]) -> int:
    """The model's vocabulary, as the worker reads it (bench/worker/dataset.py DataRequest.vocab)."""
    return int(cfg.get("vocab_size") or 30522)


def _check_vocab(settings: DataSettings, cfg: Mapping[str, Any], what: str) -> None:
    vocab = int(cfg.get("vocab_size") or 0)
    if not settings.tokenizer and vocab < BYTE_VOCAB:
        raise BadInput(
            f"{what}: the byte-level fallback needs a vocabulary of {BYTE_VOCAB} ids, the model has {vocab}",
            hint='give tokenizer = "DIR" (a local tokenizer) or a model with a larger vocab_size',
        )


def check_text(arg: str, settings: DataSettings, cfg: Mapping[str, Any]) -> None:
    what = f'data = "text:{arg}"'
    path = _file(arg, what)
    if not path.is_file():
        raise BadInput(f"{what}: {path} is not a file", hint="give a text file")
    if not datareaders.read_text(path, settings.encoding).strip():
        raise BadInput(f"{what}: {path} holds no text", hint="give a file with at least one non-blank line")
    _check_vocab(settings, cfg, what)


def check_saved(arg: str, settings: DataSettings, cfg: Mapping[str, Any]) -> None:
    what = f'data = "saved:{arg}"'
    path = _file(arg, what)
    if not path.is_dir():
        raise BadInput(f"{what}: {path} is not a folder", hint="give the folder save_to_disk wrote")
    columns = saved_columns(path)
    if settings.column not in columns:
        hint = did_you_mean(settings.column, list(columns))
        raise BadInput(
            f"{what}: the dataset has no column '{settings.column}' (its columns: {', '.join(columns)})",
            hint=hint or "set data_column to its text column, or to a column of token ids",
        )
    feature = columns[settings.column]
    if isinstance(feature, dict) and feature.get("dtype") == "string":
        _check_vocab(settings, cfg, what)
    if importlib.util.find_spec("datasets") is None:
        return  # the worker skips the row, naming the package (DataKind.package)
    values = datareaders.read_saved_column(path, settings.column, _vocab(cfg))
    if values and isinstance(values[0], str) and not any(v.strip() for v in values):
        raise BadInput(f"{what}: the column '{settings.column}' of {saved_split(path)} holds no text")


def check_cifar10(arg: str, settings: DataSettings, cfg: Mapping[str, Any]) -> None:
    what = f'data = "cifar10:{arg}"'
    path = _file(arg, what)
    if not path.is_dir() or not any(path.glob(CIFAR_BATCHES)):
        raise BadInput(
            f"{what}: {path} holds no data_batch_N files",
            hint="give the cifar-10-batches-py folder of CIFAR-10's python version",
        )
    labels = cfg.get("num_labels") or len(cfg.get("id2label") or {}) or 2
    if int(labels) < CIFAR_CLASSES:
        raise BadInput(
            f"{what}: CIFAR-10 has {CIFAR_CLASSES} classes, the model has num_labels = {labels}",
            hint="set num_labels = 10 in the model's config (the vit presets have it)",
        )
    if int(cfg.get("num_channels", 3)) != 3:
        raise BadInput(f"{what}: CIFAR-10's images are RGB, the model takes num_channels = {cfg['num_channels']}")
    if settings.held_out and not (path / CIFAR_TEST).is_file():
        raise BadInput(
            f"{what}: {path} holds no {CIFAR_TEST}, the test images eval_samples scores",
            hint="give the whole cifar-10-batches-py folder, or set eval_samples = 0",
        )
    for batch in sorted(path.glob(CIFAR_BATCHES)) + ([path / CIFAR_TEST] if settings.held_out else []):
        stat = batch.stat()
        _cifar_images(str(batch), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _cifar_images(path: str, _size: int, _mtime_ns: int) -> int:
    """A CIFAR batch read and checked once per version of the file (a matrix's scenarios share it)."""
    return len(datareaders.read_cifar_batch(Path(path))[1])


WORKER = "bench.worker"
SYNTHETIC_HELD_OUT = "new rows of the same task (other draws of its seed), never trained on"
KINDS: dict[str, DataKind] = {
    kind.name: kind
    for kind in (
        DataKind(
            "random",
            TASKS,
            f"{WORKER}.dataset:random_data",
            "the guide's recipe: uniform token ids (or normal pixels), labels all 0; nothing to learn",
        ),
        DataKind(
            "lm-synthetic",
            (CAUSAL,),
            f"{WORKER}.datasynth:lm_synthetic",
            "a sparse Markov chain over 512 token ids: the loss falls from ln(vocab) toward ~1.1",
            learnable=True,
            held_out=SYNTHETIC_HELD_OUT,
        ),
        DataKind(
            "cls-synthetic",
            (CLASSIFY,),
            f"{WORKER}.datasynth:cls_synthetic",
            "the label is the majority class of the tokens (token class = id mod num_labels)",
            learnable=True,
            held_out=SYNTHETIC_HELD_OUT,
        ),
        DataKind(
            "vision-synthetic",
            (IMAGE,),
            f"{WORKER}.datasynth:vision_synthetic",
            "one smooth pattern per class plus noise, at the model's image size",
            learnable=True,
            held_out=SYNTHETIC_HELD_OUT,
        ),
        DataKind(
            "text",
            (CAUSAL,),
            f"{WORKER}.datafiles:text_file",
            "a local text file (UTF-8, or text[ENCODING]:PATH), documents split at blank lines, tokenised and packed",
            argument="PATH",
            tokenized=True,
            encoded=True,
            learnable=True,
            check=check_text,
        ),
        DataKind(
            "saved",
            (CAUSAL,),
            f"{WORKER}.datafiles:saved_dataset",
            "a datasets Dataset saved with save_to_disk: its data_column (text or token ids), packed",
            argument="PATH",
            package="datasets",
            tokenized=True,
            columns=True,
            learnable=True,
            check=check_saved,
        ),
        DataKind(
            "cifar10",
            (IMAGE,),
            f"{WORKER}.datafiles:cifar10",
            "CIFAR-10's python batches (data_batch_N), resized to the model's image size",
            argument="DIR",
            learnable=True,
            check=check_cifar10,
            held_out=f"{CIFAR_TEST}: CIFAR-10's 10,000 test images",
        ),
    )
}
DEFAULT = "random"


def parse(data: str) -> tuple[str, str | None, str]:
    """(kind name, encoding or None, argument) of a `data` value: "text[latin-1]:/a.txt" ->
    ("text", "latin-1", "/a.txt"). A head with an unbalanced "[" is the name, unknown."""
    head, _, arg = data.partition(":")
    name, bracket, rest = head.partition("[")
    if bracket and rest.endswith("]"):
        return name, rest[:-1], arg
    return head, None, arg


def split(data: str) -> tuple[str, str]:
    """(kind name, argument) of a `data` value: "text:/a/b.txt" -> ("text", "/a/b.txt")."""
    name, _, arg = parse(data)
    return name, arg


def encoding(data: str) -> str:
    """The encoding of a text kind's file: the one the value names, else UTF-8."""
    return parse(data)[1] or "utf-8"


def _encoding_error(name: str, named: str | None) -> str | None:
    if named is None:
        return None
    if not KINDS[name].encoded:
        return f'takes no encoding: data = "{name}:{KINDS[name].argument}"'
    try:
        codecs.lookup(named)
    except LookupError:
        return f'names an unknown encoding {named!r}: data = "{name}[latin-1]:PATH" names one Python knows'
    return None


def syntax_error(data: Any) -> str | None:
    """Why a `data` value is not a kind with the argument it takes, or None (no file is read)."""
    if not isinstance(data, str):
        return "must be a string"
    name, named, arg = parse(data)
    if name not in KINDS:
        forms = [f"{k.name}:{k.argument}" if k.argument else k.name for k in KINDS.values()]
        hint = did_you_mean(name, list(KINDS))
        return f"is not a data kind ({', '.join(forms)})" + (f"; {hint}" if hint else "")
    kind = KINDS[name]
    if kind.argument and not arg.strip():
        return f'needs its {kind.argument}: data = "{name}:{kind.argument}"'
    if not kind.argument and ":" in data:
        return f'takes no argument: data = "{name}"'
    return _encoding_error(name, named)


def held_out_error(data: str) -> str | None:
    """Why `eval_samples` cannot score this data after training (its kind has no held-out split), or None."""
    name, _ = split(data)
    if KINDS[name].held_out:
        return None
    having = ", ".join(f"{k.name}:{k.argument}" if k.argument else k.name for k in KINDS.values() if k.held_out)
    why = "its labels are all 0, nothing to learn" if name == DEFAULT else "it is training data only"
    return f'needs data with a held-out split; data = "{data}" has none ({why}): use {having}, or eval_samples = 0'


def absolute(data: str) -> str:
    """The value with its path made absolute (rows and scenarios.json name the file that ran)."""
    name, arg = split(data)
    if not KINDS[name].argument:
        return data
    return f"{data.partition(':')[0]}:{Path(arg).expanduser().resolve()}"


def check(data: str, task: str, cfg: Mapping[str, Any], settings: DataSettings, model: str) -> None:
    """Plan-time: the kind serves the model's task and its argument is usable. BadInput otherwise."""
    name, arg = split(data)
    kind = KINDS[name]
    if not kind.serves(task):
        takers = [k.name for k in KINDS.values() if k.serves(task)]
        raise BadInput(
            f'data = "{data}": the {name} kind serves {", ".join(kind.tasks)}, but {model} trains {task}',
            hint=f"for {task} use one of {', '.join(takers)}",
        )
    if settings.tokenizer and not Path(settings.tokenizer).expanduser().is_dir():
        raise BadInput(
            f'tokenizer = "{settings.tokenizer}": not a folder',
            hint="give a local folder a tokenizer was saved to (save_pretrained), or leave it out for bytes",
        )
    if kind.check is not None:
        kind.check(arg, replace(settings, encoding=encoding(data)), cfg)
