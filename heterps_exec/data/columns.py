"""Named columns of a file -> the model's raw tensors (what `GraphModel` reads).

    mapper = ColumnMap(raw, {"dense": INT_COLUMNS, "ids_0": ["C1"], ...}, hash_seed=0)
    tensors, good = mapper(chunk.columns)   # {tensor: [n, width]}, rows to keep

- label tensor: one 0/1 column -> [n, 1] (float32; int64 for a softmax head);
- features tensor: `width` numeric columns -> float32, missing (NaN) as 0, then the chosen
  transform: "log1p" is log(1 + max(x, 0)) (DLRM's preprocessing of Criteo's counts);
- ids tensor: `width` categorical columns (uint64 values) -> int64 rows of the tensor's
  table: `hash_row(value, rows, seed)`, the SplitMix64 finaliser of value + seed, modulo rows;
- bag (a multi-hot ids tensor with a lengths tensor): ONE list column (Parquet's list<int> or
  list<string>, read as a padded [n, max_len] array and each row's length: sources.py),
  each value hashed as above; a row longer than max_len keeps its first max_len ids, the
  padding is 0, and the lengths tensor gets the row's length (empty lists: 0);
- a weighted bag's weights: ONE list<float> column (declared in `columns`, or named like the
  tensor, <bag>_weights), padded with 0 like the ids; a row whose weights are not finite or
  whose list is not as long as its ids' is malformed;
- features tensor with id columns (a user model's one float input: `id_columns`): its first
  columns are categorical, hashed as above to rows below each column's cardinality and stored
  as floats; the rest numeric, as any features tensor.
  The mixing spreads values that share low bits; hashing needs no dictionary pass, so a
  stream never has to see the whole file first. Collisions are the price, as in every
  hashed-embedding CTR pipeline.
A row whose label is not 0/1 or whose numeric value is infinite is malformed (`good` False).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from heterps_exec.data.synthetic import RawTensor

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def hash_row(values: np.ndarray, rows: int, seed: int = 0) -> np.ndarray:
    """Table rows (int64 in [0, rows)) of uint64 categorical values."""
    with np.errstate(over="ignore"):
        z = values.astype(np.uint64) + _GOLDEN * np.uint64((seed + 1) & 0xFFFFFFFFFFFFFFFF)
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        z ^= z >> np.uint64(31)
    return (z % np.uint64(rows)).astype(np.int64)


def label_ok(y: np.ndarray, dtype: str) -> np.ndarray:
    """0/1 for a binary label (float32), a whole number >= 0 for a class index (int64)."""
    if dtype == "float32":
        return (y == 0) | (y == 1)
    return (y >= 0) & (y == np.floor(y))


class MappingError(ValueError):
    """A column mapping that does not fit the model or the file (the message names both)."""


def resolve(raw: Sequence[RawTensor], given: Mapping[str, str | Sequence[str]],
            available: Sequence[str], *, numeric: Sequence[str] = (),
            categorical: Sequence[str] = (), label: str = "label") -> dict[str, list[str]]:
    """Every raw tensor's columns: `given` first, then the defaults (the label column; the
    next unused `numeric` columns for features, `categorical` ones for ids, in order)."""
    names = {t.name for t in raw if t.role != "lengths"}  # (a bag's lengths: from its list)
    for tensor, cols in given.items():
        if tensor not in names:
            raise MappingError(f"columns.{tensor}: the model has no raw tensor {tensor!r} "
                               f"(it reads: {', '.join(sorted(names))})")
        for c in [cols] if isinstance(cols, str) else cols:
            if c not in available:
                raise MappingError(f"columns.{tensor}: unknown column {c!r}")
    out = {t: [c] if isinstance(c, str) else list(c) for t, c in given.items()}
    used = {c for cols in out.values() for c in cols}
    pools = {"features": [c for c in numeric if c not in used],
             "ids": [c for c in categorical if c not in used]}
    for t in raw:
        if t.name in out or t.role == "lengths":
            continue
        if t.lengths:  # a bag: one list column, by default the one named like the tensor
            if t.name not in available:
                what = ("bag weights {!r} read one list column (Parquet list<float>)"
                        if t.role == "weights" else "bag {!r} reads one list column (Parquet "
                        "list<int> or list<string>)")
                raise MappingError(f"columns.{t.name}: the model's {what.format(t.name)}; map "
                                   "it explicitly")
            out[t.name] = [t.name]
            continue
        k = len(t.id_columns)
        if k and t.role == "features":  # its first k columns categorical, the rest numeric
            if len(pools["ids"]) < k or len(pools["features"]) < t.width - k:
                raise MappingError(f"columns.{t.name}: the model's features tensor needs {k} "
                                   f"categorical and {t.width - k} numeric columns; map it "
                                   "explicitly")
            out[t.name] = pools["ids"][:k] + pools["features"][:t.width - k]
            pools["ids"], pools["features"] = pools["ids"][k:], pools["features"][t.width - k:]
            continue
        if t.role == "label":
            if label not in available:
                raise MappingError(f"columns.{t.name}: no label column {label!r} in the file")
            out[t.name] = [label]
            continue
        pool = pools[t.role]
        if len(pool) < t.width:
            raise MappingError(f"columns.{t.name}: the model's {t.role} tensor needs {t.width} "
                               f"columns, only {len(pool)} unassigned remain; map it explicitly")
        out[t.name], pools[t.role] = pool[:t.width], pool[t.width:]
    for t in raw:
        if t.role == "lengths":
            continue
        if t.lengths and len(out[t.name]) != 1:
            raise MappingError(f"columns.{t.name}: a bag reads one list column, got "
                               f"{len(out[t.name])}")
        if t.lengths:
            continue
        if len(out[t.name]) != t.width:
            raise MappingError(f"columns.{t.name}: {len(out[t.name])} columns for a tensor of "
                               f"width {t.width}")
    return out


class ColumnMap:
    """Columns -> raw tensors, per the resolved mapping (see the module docstring)."""

    def __init__(self, raw: Sequence[RawTensor], mapping: Mapping[str, Sequence[str]], *,
                 hash_seed: int = 0, dense_transform: str = "log1p") -> None:
        self.raw, self.mapping = list(raw), {k: list(v) for k, v in mapping.items()}
        self.hash_seed, self.dense_transform = hash_seed, dense_transform

    def __call__(self, columns: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray],
                                                                   np.ndarray]:
        first = next(iter(columns.values()))
        n = len(first[1] if isinstance(first, tuple) else first)  # (a bag: padded, lengths)
        good = np.ones(n, bool)
        out = {}
        for t in self.raw:
            if t.role == "lengths":
                continue  # with its bag
            cols = [columns[c] for c in self.mapping[t.name]]
            if t.role == "weights":  # after its bag, whose lengths are in out
                padded, lengths = cols[0]
                count = out[t.lengths].reshape(-1)
                keep = np.arange(padded.shape[1]) < count[:, None]
                good &= (np.minimum(lengths, t.width) == count) & \
                    (np.isfinite(padded) | ~keep).all(1)
                out[t.name] = np.where(keep & np.isfinite(padded), padded, 0).astype(np.float32)
            elif t.lengths:
                padded, lengths = cols[0]  # (sources.py reads a list column so)
                keep = np.arange(padded.shape[1]) < np.minimum(lengths, t.width)[:, None]
                out[t.name] = np.where(keep, hash_row(padded, t.rows, self.hash_seed), 0)
                out[t.lengths] = np.minimum(lengths, t.width).reshape(-1, 1).astype(np.int64)
            elif t.role == "ids":
                out[t.name] = np.stack([hash_row(c, t.rows, self.hash_seed) for c in cols], 1)
            elif t.role == "label":
                y = np.asarray(cols[0], np.float64)
                good &= label_ok(y, t.dtype)
                out[t.name] = np.nan_to_num(y).reshape(-1, 1).astype(t.dtype)
            else:
                k = len(t.id_columns)
                x = np.stack(cols[k:], 1).astype(np.float64) if len(cols) > k else np.zeros((n, 0))
                good &= ~np.isinf(x).any(1)
                x = np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)
                if self.dense_transform == "log1p":
                    x = np.log1p(np.maximum(x, 0.0))
                ids = [hash_row(c, rows, self.hash_seed) for c, rows in zip(cols, t.id_columns)]
                out[t.name] = np.concatenate([np.stack(ids, 1).astype(np.float64), x], 1).astype(
                    np.float32) if k else x.astype(np.float32)
        return out, good
