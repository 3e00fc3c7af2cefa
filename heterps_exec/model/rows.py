"""Deterministic initial embedding rows, shared by local tables and the parameter server.

A row's initial value depends only on (seed, table name, row id), never on which process
creates it or when, so a table created lazily on a PS shard, a local `nn.EmbeddingBag` and a
single-process reference model all start from the same numbers. Values are uniform in
[-1/sqrt(dim), 1/sqrt(dim)], drawn from a splitmix64 hash of (seed, table, id, column).
No torch.
"""

from __future__ import annotations

import zlib

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = x + _GOLDEN
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


def initial_rows(table: str, ids, dim: int, seed: int) -> np.ndarray:
    """float32 array (len(ids), dim): the initial rows `ids` of `table`."""
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    if dim < 1:
        raise ValueError(f"dim must be >= 1, got {dim}")
    key = np.uint64((int(seed) & 0xFFFFFFFF) << 32 | zlib.crc32(table.encode()))
    with np.errstate(over="ignore"):
        cells = ids.astype(np.uint64)[:, None] * np.uint64(dim) + np.arange(dim, dtype=np.uint64)
        bits = _splitmix64(_splitmix64(cells ^ _splitmix64(np.full(1, key)))[..., None])[..., 0]
    unit = (bits >> np.uint64(40)).astype(np.float64) / float(1 << 24)  # [0, 1), 24 bits
    bound = 1.0 / np.sqrt(dim)
    return ((2.0 * unit - 1.0) * bound).astype(np.float32)
