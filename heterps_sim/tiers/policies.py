"""Cache policies of a bounded tier: which rows stay resident, which are demoted.

One policy object decides residency for one tier of one table on one shard; it never touches
row data (`tiers/tiers.py` moves the rows). The same objects drive the live parameter server and
`tiers/replay.py`, so a hit rate predicted by replaying an id stream is the hit rate the server gets
on that stream, by construction.

Keys are dense local integers in [0, key_space) (a shard maps its row ids onto them); a
policy keeps `slot_of[key]` (-1 = not resident) and `key_of[slot]`. `access(keys, rows,
data)` takes one batch of keys in order, moves row data into the tier's slots as it admits
them, and returns the evicted keys, their slots and their rows. The per-key work runs in
numba (`tiers/kernels.py`: O(1) or O(log capacity) per key), a fraction of a millisecond per batch
of 4,096 keys.

- `lru`: evict the least recently used row.
- `lfu`: evict the least frequently used row; counts cover the whole history of a key (also
  while it is not resident), ties go to the older access. `admit` (default on) is a
  TinyLFU-like admission rule: a missing key enters a full cache only if its count exceeds
  the count of the row it would evict - under skewed (Zipf) ids this keeps one-off rows from
  flushing the heavy hitters.
- `paddle`: Paddle's SSD sparse table rule: rows unseen for `passes` passes (a pass = one
  `end_pass()`, the server calls it once per training step) are demoted; LRU when full.
"""

from __future__ import annotations

import numpy as np

from heterps_sim.tiers import POLICIES
from heterps_sim.tiers.kernels import _lfu_access, _lru_access, _lru_remove


def _grow(a: np.ndarray, size: int, fill) -> np.ndarray:
    out = np.full(size, fill, dtype=a.dtype)
    out[: a.size] = a
    return out


class Policy:
    """Residency of up to `capacity` rows over keys [0, key_space); see the module docstring."""

    name = "base"

    def __init__(self, capacity: int, key_space: int):
        if capacity < 0 or key_space < 0:
            raise ValueError("capacity and key_space must be >= 0")
        self.capacity = int(capacity)
        self.slot_of = np.full(max(key_space, 1), -1, dtype=np.int64)
        self.key_of = np.full(max(self.capacity, 1), -1, dtype=np.int64)
        self._evk = np.empty(0, dtype=np.int64)
        self._evs = np.empty(0, dtype=np.int64)

    def grow(self, key_space: int) -> None:
        """Make room for keys up to `key_space` (unbounded tables grow as ids arrive)."""
        if key_space > self.slot_of.size:
            self.slot_of = _grow(self.slot_of, max(key_space, 2 * self.slot_of.size), -1)

    def _buffers(self, n: int):
        if self._evk.size < n:
            self._evk = np.empty(2 * n, dtype=np.int64)
            self._evs = np.empty(2 * n, dtype=np.int64)
        return self._evk, self._evs

    def access(self, keys, rows=None, data=None):
        """Record an access of `keys` (one batch, in order). With `rows` (the batch's current
        rows) and `data` (the tier's slots) it also moves the data. Returns (evicted keys,
        their slots, their rows), in eviction order."""
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        if data is None:
            data = np.empty((max(self.capacity, 1), 0), dtype=np.float32)
            rows = np.empty((keys.size, 0), dtype=np.float32)
        vrows = np.empty((keys.size, data.shape[1]), dtype=np.float32)
        if self.capacity == 0 or keys.size == 0:
            self._miss_only(keys)
            return self._evk[:0].copy(), self._evs[:0].copy(), vrows[:0]
        evk, evs = self._buffers(keys.size)
        n = self._kernel(keys, evk, evs, rows, data, vrows)
        return evk[:n].copy(), evs[:n].copy(), vrows[:n]

    def _miss_only(self, keys) -> None:
        pass

    def _kernel(self, keys, evk, evs, rows, data, vrows) -> int:
        raise NotImplementedError

    def end_pass(self) -> tuple[np.ndarray, np.ndarray]:
        """Called once per pass (training step); returns rows the policy demotes now."""
        return self._evk[:0].copy(), self._evs[:0].copy()

    def resident(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys, slots) of the resident rows."""
        slots = np.flatnonzero(self.key_of[: self.capacity] >= 0)
        return self.key_of[slots], slots


class LRU(Policy):
    name = "lru"

    def __init__(self, capacity: int, key_space: int):
        super().__init__(capacity, key_space)
        c = max(self.capacity, 1)
        self.prev = np.full(c, -1, dtype=np.int64)
        self.next = np.full(c, -1, dtype=np.int64)
        self.free = np.arange(self.capacity - 1, -1, -1, dtype=np.int64)
        self.free = _grow(self.free, c, 0)
        self.meta = np.array([-1, -1, self.capacity], dtype=np.int64)
        self.seen = np.full(c, 0, dtype=np.int64)  # np.full: pages touched now, not per request
        self.now = 0

    def _kernel(self, keys, evk, evs, rows, data, vrows):
        return _lru_access(keys, self.slot_of, self.key_of, self.prev, self.next, self.free,
                           self.meta, self.seen, self.now, evk, evs, rows, data, vrows)

    def remove(self, keys) -> None:
        """Forget `keys` (they moved to another tier); their slots become free."""
        if self.capacity:
            _lru_remove(np.ascontiguousarray(keys, dtype=np.int64), self.slot_of, self.key_of,
                        self.prev, self.next, self.free, self.meta)


class Paddle(LRU):
    name = "paddle"

    def __init__(self, capacity: int, key_space: int, passes: int = 16):
        super().__init__(capacity, key_space)
        if passes < 1:
            raise ValueError(f"passes must be >= 1, got {passes}")
        self.passes = int(passes)

    def end_pass(self):
        self.now += 1
        keys, slots = self.resident()
        stale = slots[self.now - self.seen[slots] > self.passes]
        keys = self.key_of[stale]
        self.remove(keys)
        return keys, stale


class LFU(Policy):
    name = "lfu"

    def __init__(self, capacity: int, key_space: int, admit: bool = True):
        super().__init__(capacity, key_space)
        c = max(self.capacity, 1)
        self.admit = bool(admit)
        self.freq = np.full(self.slot_of.size, 0, dtype=np.int64)
        self.heap = np.full(c, 0, dtype=np.int64)
        self.hpos = np.full(c, 0, dtype=np.int64)
        self.stamp = np.full(c, 0, dtype=np.int64)
        self.meta = np.array([0, self.capacity, 0], dtype=np.int64)

    def grow(self, key_space: int) -> None:
        super().grow(key_space)
        if self.slot_of.size > self.freq.size:
            self.freq = _grow(self.freq, self.slot_of.size, 0)

    def _miss_only(self, keys) -> None:
        np.add.at(self.freq, keys, 1)

    def _kernel(self, keys, evk, evs, rows, data, vrows):
        return _lfu_access(keys, self.slot_of, self.key_of, self.freq, self.heap, self.hpos,
                           self.stamp, self.meta, self.admit, evk, evs, rows, data, vrows)


def make_policy(name: str, capacity: int, key_space: int, *, passes: int = 16,
                admit: bool = True) -> Policy:
    """A policy by name (`POLICIES`); `passes` for paddle, `admit` for lfu."""
    if name == "lru":
        return LRU(capacity, key_space)
    if name == "lfu":
        return LFU(capacity, key_space, admit=admit)
    if name == "paddle":
        return Paddle(capacity, key_space, passes=passes)
    raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}")
