"""The one reader of each data file format a kind trains on (bench/planner/datakinds.py): a text file, CIFAR-10's
python batches, a `datasets` save_to_disk folder. The plan reads every file with these before any
worker starts, and the worker reads them again with the same functions, so a file the plan took is the
file that trains. A malformed file is `BadInput` naming it, in one line. Torch-free: numpy and
`datasets` are imported only where a kind needs them.
"""

from __future__ import annotations

import io
import json
import pickle
from pathlib import Path
from typing import Any

from ..errors import BadInput

CIFAR_SIDE = 32
CIFAR_PIXELS = 3 * CIFAR_SIDE * CIFAR_SIDE
CIFAR_CLASSES = 10


def one_line(text: object) -> str:
    """A library's message (pickle, pyarrow, json) as one line."""
    return " ".join(str(text).split())


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise BadInput(f"{path}: cannot read it: {exc.strerror or exc}") from None


# -- text ---------------------------------------------------------------------------------------
def read_text(path: Path, encoding: str = "utf-8") -> str:
    """The file decoded strictly as `encoding`: a byte that is not of it is BadInput naming its offset."""
    raw = _read_bytes(path)
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        raise BadInput(
            f"{path}: not {encoding} text (byte 0x{raw[exc.start]:02x} at offset {exc.start}: {one_line(exc.reason)})",
            hint='save it as UTF-8, or name its encoding in the data field: data = "text[latin-1]:PATH"',
        ) from None


# -- CIFAR-10 -----------------------------------------------------------------------------------
class _ArraysOnly(pickle.Unpickler):
    """Unpickles CIFAR-10's batches (dicts of bytes, lists and numpy arrays) and nothing that runs code."""

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("_codecs", "encode"),  # bytes in a protocol-2 pickle written by Python 3
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"it holds {module}.{name}: only arrays are unpickled")
        return super().find_class(module, name)


def read_cifar_batch(path: Path) -> tuple[Any, Any]:
    """(images as uint8 N x 3 x 32 x 32, labels as int64 N) of one data_batch_N or test_batch file:
    a dict whose b"data" is an N x 3072 uint8 array and b"labels" N whole numbers from 0 to 9."""
    import numpy as np

    def bad(why: str) -> BadInput:
        return BadInput(
            f"{path}: not a CIFAR-10 batch ({why})",
            hint="give the cifar-10-batches-py folder of CIFAR-10's python version, its files as they came",
        )

    try:
        batch = _ArraysOnly(io.BytesIO(_read_bytes(path)), encoding="bytes").load()
    except BadInput:
        raise
    except Exception as exc:  # noqa: BLE001 - a malformed pickle raises any type; the unpickler runs no code
        raise bad(one_line(exc) or type(exc).__name__) from None
    if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
        raise bad("it is not a dict with b'data' and b'labels'")
    data, labels = batch[b"data"], batch[b"labels"]
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != CIFAR_PIXELS:
        shape = f"a {data.shape} array of {data.dtype}" if isinstance(data, np.ndarray) else type(data).__name__
        raise bad(f"its images are {shape}, not N x {CIFAR_PIXELS} uint8 pixels")
    if not data.shape[0]:
        raise bad("it holds no images")
    try:
        label_array = np.asarray(labels)
    except (ValueError, TypeError) as exc:
        raise bad(f"its labels are not a list of numbers: {one_line(exc)}") from None
    if label_array.shape == (0,):
        label_array = label_array.astype(np.int64)  # [] reads as float64
    if label_array.ndim != 1 or label_array.dtype.kind not in "iu":
        raise bad(f"its labels are {label_array.dtype} of shape {label_array.shape}, not a list of whole numbers")
    if len(label_array) != data.shape[0]:
        raise bad(f"{data.shape[0]} images but {len(label_array)} labels")
    outside = np.flatnonzero((label_array < 0) | (label_array >= CIFAR_CLASSES))
    if outside.size:
        raise bad(f"label {label_array[outside[0]]} of image {outside[0]} is not a class from 0 to {CIFAR_CLASSES - 1}")
    return data.reshape(-1, 3, CIFAR_SIDE, CIFAR_SIDE), label_array.astype(np.int64)


# -- datasets' save_to_disk -----------------------------------------------------------------------
def _json(path: Path) -> Any:
    try:
        return json.loads(_read_bytes(path).decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadInput(
            f"{path}: not JSON ({one_line(exc)})", hint="save the dataset again with save_to_disk(PATH)"
        ) from None


def saved_split(path: Path) -> Path:
    """The folder of the split a `save_to_disk` folder trains on: itself for a Dataset, else its
    "train" split (the first one when there is none) for a DatasetDict (its dataset_dict.json)."""
    splits_file = path / "dataset_dict.json"
    if not splits_file.is_file():
        return path
    doc = _json(splits_file)
    splits = doc.get("splits") if isinstance(doc, dict) else None
    if not isinstance(splits, list) or not splits or not all(isinstance(s, str) and s.strip() for s in splits):
        raise BadInput(
            f"{splits_file}: its 'splits' is not a list of split names ({one_line(json.dumps(splits))[:80]})",
            hint="save the dataset again with DatasetDict.save_to_disk(PATH)",
        )
    name = "train" if "train" in splits else splits[0]
    if "/" in name or name in (".", ".."):
        raise BadInput(f"{splits_file}: split {name!r} is not a folder name")
    return path / name


def saved_columns(path: Path) -> dict[str, Any]:
    """The features (column -> feature) of a save_to_disk folder, from its dataset_info.json."""
    info = saved_split(path) / "dataset_info.json"
    try:
        features = json.loads(info.read_text(encoding="utf-8")).get("features")
    except (OSError, ValueError, AttributeError):
        features = None
    if not isinstance(features, dict):
        raise BadInput(
            f"{path}: not a dataset saved with datasets' save_to_disk (no features in {info})",
            hint="save it with Dataset.save_to_disk(PATH), or give a text file with text:PATH",
        )
    return features


def read_saved_column(path: Path, column: str, vocab: int) -> list[Any]:
    """The column `column` of a save_to_disk folder (its train split): a list of strings (text), or of
    lists of token ids, each list non-empty and every id a whole number from 0 to vocab - 1."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from datasets import load_from_disk

    split = saved_split(path)
    try:
        table = load_from_disk(str(split)).data
        values = table.column(column).combine_chunks()
    except Exception as exc:  # noqa: BLE001 - datasets and pyarrow raise many types for a damaged folder
        raise BadInput(
            f"{split}: not a readable save_to_disk folder ({type(exc).__name__}: {one_line(exc)[:200]})",
            hint="save the dataset again with save_to_disk(PATH)",
        ) from None
    where = f"{split}: column '{column}'"
    kind = values.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        if values.null_count:
            raise BadInput(f"{where}: row {_first(pc.is_null(values))} holds no text (None)")
        return values.to_pylist()
    lists = pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)
    if not lists or not pa.types.is_integer(kind.value_type):
        raise BadInput(
            f"{where} holds {kind}, not text nor lists of whole-number token ids",
            hint="set data_column to a column of text (strings) or of token ids (lists of int)",
        )
    lengths = pc.list_value_length(values).fill_null(0)
    if pc.min(lengths).as_py() == 0:
        raise BadInput(f"{where}: row {_first(pc.equal(lengths, 0))} holds no token ids", hint="drop the empty rows")
    ids, parents = pc.list_flatten(values), pc.list_parent_indices(values)
    outside = pc.or_kleene(pc.is_null(ids), pc.or_kleene(pc.less(ids, 0), pc.greater_equal(ids, vocab)))
    if pc.any(outside).as_py():
        index = _first(outside.fill_null(True))
        raise BadInput(
            f"{where}: row {parents[index].as_py()} holds token id {ids[index].as_py()}, not a whole number "
            f"from 0 to {vocab - 1} (the model's vocab_size is {vocab})",
            hint="give ids the model's vocabulary holds, or a model with a larger vocab_size",
        )
    return values.to_pylist()


def _first(mask: Any) -> int:
    """The index of the first true value of a boolean arrow array."""
    return next(i for i, v in enumerate(mask.to_pylist()) if v)
