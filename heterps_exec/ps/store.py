"""The disk (cold) tier: where rows live when no RAM tier holds them.

Two stores with one interface, both keyed by a shard's dense local key:

- `MemmapStore`: a numpy memmap of (num_keys, width) float32 for tables of fixed size. The
  file is sparse (created by truncation), so a 10,000,000-row table costs disk only for the
  rows written; a RAM bitmap says which rows hold data (the others are still at their
  deterministic initial value and are never written).
- `RocksStore`: RocksDB through rocksdict for unbounded tables, where keys arrive without a
  known bound; one value per row (its float32 bytes), batched writes.

Neither store is the durable copy: a restart rebuilds the live store from the last
checkpoint (`shard.py`), so a write torn by a crash can never be read back.
"""

from __future__ import annotations

import os
import shutil

import numpy as np


class MemmapStore:
    """Rows of a fixed-size table in a sparse file `path` (float32, row-major)."""

    def __init__(self, path: str, num_keys: int, width: int):
        self.path, self.width = path, width
        os.makedirs(os.path.dirname(path), exist_ok=True)
        shape = (max(num_keys, 1), width)
        self.rows = np.memmap(path, dtype=np.float32, mode="w+", shape=shape)
        self.present = np.full(shape[0], False)

    def read(self, keys):
        found = self.present[keys]
        out = np.zeros((len(keys), self.width), dtype=np.float32)
        if found.any():
            out[found] = self.rows[keys[found]]
        return out, found

    def write(self, keys, rows) -> None:
        if len(keys):
            self.rows[keys] = rows
            self.present[keys] = True

    def items(self):
        keys = np.flatnonzero(self.present)
        return keys.astype(np.int64), np.asarray(self.rows[keys])

    def close(self) -> None:
        del self.rows
        if os.path.exists(self.path):
            os.remove(self.path)


class RocksStore:
    """Rows keyed by local key in a RocksDB directory `path` (created fresh)."""

    def __init__(self, path: str, width: int):
        from rocksdict import Options, Rdict, WriteBatch

        self._batch_cls = WriteBatch
        self.path, self.width = path, width
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.db = Rdict(path, options=Options(raw_mode=True))

    @staticmethod
    def _key(k) -> bytes:
        return int(k).to_bytes(8, "big")

    def read(self, keys):
        out = np.zeros((len(keys), self.width), dtype=np.float32)
        found = np.zeros(len(keys), dtype=bool)
        if len(keys):
            values = self.db[[self._key(k) for k in keys]]
            for i, v in enumerate(values):
                if v is not None:
                    out[i] = np.frombuffer(v, dtype=np.float32)
                    found[i] = True
        return out, found

    def write(self, keys, rows) -> None:
        if not len(keys):
            return
        batch = self._batch_cls(raw_mode=True)
        rows = np.ascontiguousarray(rows, dtype=np.float32)
        for k, row in zip(keys, rows):
            batch.put(self._key(k), row.tobytes())
        self.db.write(batch)

    def items(self):
        keys, rows = [], []
        for k, v in self.db.items():
            keys.append(int.from_bytes(k, "big"))
            rows.append(np.frombuffer(v, dtype=np.float32))
        if not keys:
            return np.empty(0, dtype=np.int64), np.empty((0, self.width), dtype=np.float32)
        return np.array(keys, dtype=np.int64), np.stack(rows)

    def close(self) -> None:
        self.db.close()
        shutil.rmtree(self.path, ignore_errors=True)
