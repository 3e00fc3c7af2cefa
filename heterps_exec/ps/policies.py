"""Cache policies of a bounded tier: which rows stay resident, which are demoted.

One policy object decides residency for one tier of one table on one shard; it never touches
row data (`tiers.py` moves the rows). The same objects drive the live parameter server and
`replay.py`, so a hit rate predicted by replaying an id stream is the hit rate the server gets
on that stream, by construction.

Keys are dense local integers in [0, key_space) (a shard maps its row ids onto them); a
policy keeps `slot_of[key]` (-1 = not resident) and `key_of[slot]`. `access(keys)` takes one
batch of distinct keys in order and returns the keys it evicted with the slots they held.
The per-key work runs in numba (an O(1) or O(log capacity) step per key), so a batch of 4,096
keys costs tens of microseconds.

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
from numba import njit

from heterps_exec.ps.spec import POLICIES


@njit(cache=True)
def _unlink(s, prev, nxt, meta):
    p, n = prev[s], nxt[s]
    if p >= 0:
        nxt[p] = n
    else:
        meta[0] = n
    if n >= 0:
        prev[n] = p
    else:
        meta[1] = p


@njit(cache=True)
def _push_front(s, prev, nxt, meta):
    prev[s] = -1
    nxt[s] = meta[0]
    if meta[0] >= 0:
        prev[meta[0]] = s
    meta[0] = s
    if meta[1] < 0:
        meta[1] = s


@njit(cache=True)
def _move(i, rows, s, data, n_ev, vrows, evicting):
    """Row i of the batch enters slot s; an evicted occupant's row is saved first."""
    if evicting:
        for c in range(data.shape[1]):
            vrows[n_ev, c] = data[s, c]
    for c in range(data.shape[1]):
        data[s, c] = rows[i, c]


@njit(cache=True)
def _lru_access(keys, slot_of, key_of, prev, nxt, free, meta, seen, now, evk, evs,
                rows, data, vrows):
    """meta = [head, tail, num_free]; returns the number of evictions written to evk/evs.
    Moves row data as it decides (rows of the batch -> data, evicted rows -> vrows), so a
    row admitted and evicted within one batch is never lost."""
    n_ev = 0
    for i in range(keys.size):
        k = keys[i]
        s = slot_of[k]
        if s >= 0:
            _unlink(s, prev, nxt, meta)
        elif meta[2] > 0:
            meta[2] -= 1
            s = free[meta[2]]
            _move(i, rows, s, data, n_ev, vrows, False)
        else:
            s = meta[1]
            _unlink(s, prev, nxt, meta)
            old = key_of[s]
            slot_of[old] = -1
            evk[n_ev] = old
            evs[n_ev] = s
            _move(i, rows, s, data, n_ev, vrows, True)
            n_ev += 1
        key_of[s] = k
        slot_of[k] = s
        seen[s] = now
        _push_front(s, prev, nxt, meta)
    return n_ev


@njit(cache=True)
def _lru_remove(keys, slot_of, key_of, prev, nxt, free, meta):
    for i in range(keys.size):
        s = slot_of[keys[i]]
        if s < 0:
            continue
        _unlink(s, prev, nxt, meta)
        slot_of[keys[i]] = -1
        key_of[s] = -1
        free[meta[2]] = s
        meta[2] += 1


@njit(cache=True)
def _less(a, b, freq, key_of, stamp):
    fa, fb = freq[key_of[a]], freq[key_of[b]]
    return fa < fb or (fa == fb and stamp[a] < stamp[b])


@njit(cache=True)
def _sift_down(i, heap, hpos, size, freq, key_of, stamp):
    while True:
        c = 2 * i + 1
        if c >= size:
            return
        if c + 1 < size and _less(heap[c + 1], heap[c], freq, key_of, stamp):
            c += 1
        if not _less(heap[c], heap[i], freq, key_of, stamp):
            return
        heap[i], heap[c] = heap[c], heap[i]
        hpos[heap[i]] = i
        hpos[heap[c]] = c
        i = c


@njit(cache=True)
def _sift_up(i, heap, hpos, freq, key_of, stamp):
    while i > 0:
        p = (i - 1) // 2
        if not _less(heap[i], heap[p], freq, key_of, stamp):
            return
        heap[i], heap[p] = heap[p], heap[i]
        hpos[heap[i]] = i
        hpos[heap[p]] = p
        i = p


@njit(cache=True)
def _lfu_access(keys, slot_of, key_of, freq, heap, hpos, stamp, meta, admit, evk, evs,
                rows, data, vrows):
    """meta = [size, capacity, clock]; heap of slots ordered by (freq of its key, stamp)."""
    n_ev = 0
    for i in range(keys.size):
        k = keys[i]
        freq[k] += 1
        meta[2] += 1
        s = slot_of[k]
        if s >= 0:
            stamp[s] = meta[2]
            _sift_down(hpos[s], heap, hpos, meta[0], freq, key_of, stamp)
            continue
        if meta[0] < meta[1]:
            s = meta[0]
            heap[s] = s
            hpos[s] = s
            meta[0] += 1
            key_of[s] = k
            slot_of[k] = s
            stamp[s] = meta[2]
            _move(i, rows, s, data, n_ev, vrows, False)
            _sift_up(hpos[s], heap, hpos, freq, key_of, stamp)
            continue
        s = heap[0]
        old = key_of[s]
        if admit and freq[k] <= freq[old]:
            continue  # not admitted: served from a lower tier
        slot_of[old] = -1
        evk[n_ev] = old
        evs[n_ev] = s
        _move(i, rows, s, data, n_ev, vrows, True)
        n_ev += 1
        key_of[s] = k
        slot_of[k] = s
        stamp[s] = meta[2]
        _sift_down(0, heap, hpos, meta[0], freq, key_of, stamp)
    return n_ev


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
        self.seen = np.zeros(c, dtype=np.int64)
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

    def __init__(self, capacity: int, key_space: int, passes: int = 4):
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
        self.freq = np.zeros(self.slot_of.size, dtype=np.int64)
        self.heap = np.zeros(c, dtype=np.int64)
        self.hpos = np.zeros(c, dtype=np.int64)
        self.stamp = np.zeros(c, dtype=np.int64)
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


def make_policy(name: str, capacity: int, key_space: int, *, passes: int = 4,
                admit: bool = True) -> Policy:
    """A policy by name (`POLICIES`); `passes` for paddle, `admit` for lfu."""
    if name == "lru":
        return LRU(capacity, key_space)
    if name == "lfu":
        return LFU(capacity, key_space, admit=admit)
    if name == "paddle":
        return Paddle(capacity, key_space, passes=passes)
    raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}")
