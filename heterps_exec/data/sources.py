"""Row sources: where a stream's chunks come from, per split ("train" or "holdout").

    source.chunks("train")    # Chunks of the training rows, in order; a fresh pass per call
    source.chunks("holdout")  # the held-out rows

Each source is built from the resolved data spec (a JSON-able dict that spec.py writes into
the run spec), so every rank re-creates the same source from the same numbers.
- criteo: the text file's lines [0, train_lines) train; [train_lines, end) or a separate
  file are held out;
- parquet: rows [0, train_rows) train (pyarrow's `iter_batches`, `batch_rows` at a time);
  numeric columns as float64 (null: NaN, i.e. missing), categorical ones as uint64 values
  (integers as they are, strings hashed by pandas' `hash_array`; null: 0, like Criteo);
- factory: fn(split=..., **kwargs) yields {raw tensor: array} chunks, checked row by row.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from heterps_exec.data.columns import label_ok
from heterps_exec.data.criteo import Chunk, read_chunks


@dataclass(slots=True)
class FileChunk(Chunk):
    first_line: int = 0
    """1-based row number of the chunk's first row (rows map 1:1, none pre-filtered)."""


class CriteoSource:
    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.name = spec["path"]

    def chunks(self, split: str) -> Iterator[Chunk]:
        s = self.spec
        if split == "train":
            return read_chunks(s["path"], block_bytes=s["block_bytes"], stop_line=s["train_rows"])
        if s["holdout_path"]:
            return read_chunks(s["holdout_path"], block_bytes=s["block_bytes"])
        return read_chunks(s["path"], block_bytes=s["block_bytes"], start_line=s["train_rows"])


class ParquetSource:
    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.name = spec["path"]
        self.categorical = set(spec["categorical"])
        self.bags = dict(spec.get("bags", {}))
        """List columns read as (padded [n, max_len] uint64 values, lengths): a bag's."""
        self.float_lists = set(spec.get("float_lists", ()))
        """Those of them read as float64 values instead: a weighted bag's weights."""

    def chunks(self, split: str) -> Iterator[Chunk]:
        s = self.spec
        if split == "train":
            yield from self._read(s["path"], 0, s["train_rows"])
        elif s["holdout_path"]:
            yield from self._read(s["holdout_path"], 0, None)
        else:
            yield from self._read(s["path"], s["train_rows"], None)

    def _read(self, path: str, start: int, stop: int | None) -> Iterator[Chunk]:
        import pyarrow.parquet as pq
        columns = sorted({c for cols in self.spec["columns"].values() for c in cols})
        row = 0
        with pq.ParquetFile(path) as pf:
            for batch in pf.iter_batches(batch_size=self.spec["batch_rows"], columns=columns):
                lo, hi = max(start - row, 0), batch.num_rows
                if stop is not None:
                    hi = min(hi, stop - row)
                if lo < hi:
                    part = batch.slice(lo, hi - lo)
                    cols = {c: self._column(c, part.column(c)) for c in columns}
                    yield FileChunk(cols, hi - lo, first_line=row + lo + 1)
                row += batch.num_rows
                if stop is not None and row >= stop:
                    return

    def _column(self, name: str, array):
        import pyarrow as pa
        if name in self.bags:
            return self._list_column(name, array)
        if name in self.categorical:
            if pa.types.is_integer(array.type):
                return array.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64).view(
                    np.uint64)
            import pandas as pd
            values = array.cast(pa.string()).fill_null("").to_numpy(zero_copy_only=False)
            hashed = pd.util.hash_array(values)
            hashed[values == ""] = 0
            return hashed
        return array.cast(pa.float64()).to_numpy(zero_copy_only=False)  # null -> NaN

    def _list_column(self, name: str, array) -> tuple[np.ndarray, np.ndarray]:
        """(values padded to max_len as uint64, or float64 for weights; each row's length:
        a null list is empty)."""
        import pyarrow as pa
        if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
            raise FactoryShapeError(f"{self.name}: column {name!r} is {array.type}, not a list: "
                                    "a bag reads a list column")
        array = array.fill_null([])
        lengths = np.asarray(array.value_lengths().to_numpy(zero_copy_only=False), np.int64)
        flat = array.flatten()
        if name in self.float_lists:
            values = flat.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False)
        else:
            values = self._column_values(flat)
        top = self.bags[name]
        padded = np.zeros((len(lengths), top), values.dtype)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        for j in range(top):  # the j-th value of every row that has one
            has = lengths > j
            padded[has, j] = values[starts[has] + j]
        return padded, lengths

    def _column_values(self, flat) -> np.ndarray:
        import pyarrow as pa
        if pa.types.is_integer(flat.type):
            return flat.to_numpy(zero_copy_only=False).astype(np.int64).view(np.uint64)
        import pandas as pd
        return pd.util.hash_array(flat.cast(pa.string()).to_numpy(zero_copy_only=False))


def load_factory(dotted: str, import_dirs: list[str]):
    """The function `pkg.mod:fn`, importable from the scenario's folder too."""
    for d in import_dirs:
        if d not in sys.path:
            sys.path.insert(0, d)
    module, _, name = dotted.partition(":")
    fn = getattr(importlib.import_module(module), name)
    if not callable(fn):
        raise TypeError(f"{dotted} is not callable")
    return fn


@dataclass(slots=True)
class FactorySource:
    spec: dict
    raw: list = field(default_factory=list)
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.spec["factory"]

    def chunks(self, split: str) -> Iterator[Chunk]:
        fn = load_factory(self.spec["factory"], self.spec["import_dirs"])
        row = 0
        for part in fn(split=split, **self.spec["kwargs"]):
            cols = tensor_columns(part, self.raw, self.name)
            n = len(next(iter(cols.values())))
            yield FileChunk(cols, n, first_line=row + 1)
            row += n


class FactoryShapeError(ValueError):
    """A factory chunk that does not have the model's raw tensors (not a per-row problem)."""


def tensor_columns(part, raw, name: str) -> dict[str, np.ndarray]:
    """A factory chunk as [n, width] arrays keyed by raw tensor (shape errors raise)."""
    if not hasattr(part, "keys"):
        raise FactoryShapeError(f"{name} yielded a {type(part).__name__}, expected a mapping "
                                "of raw tensor name -> array")
    missing = [t.name for t in raw if t.name not in part]
    if missing:
        raise FactoryShapeError(f"{name}: a chunk lacks the model's tensors {missing}")
    out, n = {}, None
    for t in raw:
        arr = np.asarray(part[t.name])
        arr = arr.reshape(len(arr), -1) if arr.ndim else arr.reshape(1, 1)
        if arr.shape[1] != t.width or (n is not None and len(arr) != n):
            raise FactoryShapeError(f"{name}: tensor {t.name!r} has shape {list(arr.shape)}, "
                                    f"expected [{n if n is not None else 'n'}, {t.width}]")
        n = len(arr)
        out[t.name] = arr
    return out


class FactoryMap:
    """A factory's tensors as the model reads them; a row is malformed when an id (in an ids
    tensor or a float tensor's id column) is not an integer in [0, rows), a feature is not
    finite, or the label is not 0/1 (a class index >= 0 for a softmax head)."""

    def __init__(self, raw) -> None:
        self.raw = list(raw)

    def __call__(self, columns: dict) -> tuple[dict[str, np.ndarray], np.ndarray]:
        n = len(next(iter(columns.values())))
        good = np.ones(n, bool)
        out = {}
        for t in self.raw:
            x = columns[t.name]
            if t.role == "lengths":  # 0..max_len ids (checked with its bag below)
                v = np.asarray(x, np.float64)
                good &= ((v >= 0) & (v <= t.rows) & (v == np.floor(v))).all(1)
                out[t.name] = np.where(np.isfinite(v) & (v >= 0) & (v <= t.rows), v, 0).astype(
                    np.int64)
            elif t.role == "weights":  # finite up to the row's length, 0 past it
                v = np.asarray(x, np.float64)
                count = np.asarray(columns[t.lengths], np.float64).reshape(-1, 1)
                real = np.arange(t.width) < count
                good &= (np.isfinite(v) | ~real).all(1)
                out[t.name] = np.where(real & np.isfinite(v), v, 0).astype(np.float32)
            elif t.role == "ids" and t.lengths:  # a bag: ids past a row's length are padding
                v = np.asarray(x, np.float64)
                count = np.asarray(columns[t.lengths], np.float64).reshape(-1, 1)
                real = np.arange(t.width) < count
                ok = (v >= 0) & (v < t.rows) & (v == np.floor(v))
                good &= (ok | ~real).all(1)
                out[t.name] = np.where(real & ok, v, 0).astype(np.int64)
            elif t.role == "ids":
                v = np.asarray(x, np.float64)
                good &= ((v >= 0) & (v < t.rows) & (v == np.floor(v))).all(1)
                out[t.name] = np.where(np.isfinite(v) & (v >= 0) & (v < t.rows), v, 0).astype(
                    np.int64)
            elif t.role == "label":
                v = np.asarray(x, np.float64)
                good &= label_ok(v, t.dtype).all(1)
                out[t.name] = np.nan_to_num(v).astype(t.dtype)
            else:
                v = np.array(x, np.float64)  # a copy: id columns are cleaned in place
                good &= np.isfinite(v).all(1)
                for k, rows in enumerate(t.id_columns):  # id columns: whole numbers in range
                    good &= (v[:, k] >= 0) & (v[:, k] < rows) & (v[:, k] == np.floor(v[:, k]))
                    v[:, k] = np.where(good, v[:, k], 0)
                out[t.name] = np.nan_to_num(v).astype(np.float32)
        return out, good
