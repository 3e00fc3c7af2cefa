"""Hot, warm and cold tiers of one table on one shard, and the rows moving between them.

```
 read(keys) ──► hot (bounded, policy: lru | lfu | paddle)     hit: served from RAM slots
                 │ evicted rows
                 ▼
                warm (bounded RAM, LRU)                        hit: promoted to hot
                 │ evicted rows
                 ▼
                cold (a store: heterps_exec.ps.store, or NullStore)  absent: init(keys)
```
Tiers are exclusive: a row lives in exactly one of hot and warm, or only in cold (cold may
also hold an outdated copy of a row that a RAM tier now owns; RAM wins). Every access is
counted in the tier that served it ("new" = a row never written, made by its initialiser).
`peek`/`write` serve the optimizer: they find a row wherever it lives without counting or
moving it, so an update never changes what the policy sees.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit

from heterps_sim.tiers.policies import LRU, Policy

TIERS = ("hot", "warm", "cold", "new")


@njit(cache=True)
def _gather(keys, hot_slot, hot_data, warm_slot, warm_data, out, where):
    """Rows of `keys` found in hot or warm into `out`; where = 0 hot, 1 warm, 2 neither."""
    for i in range(keys.size):
        s = hot_slot[keys[i]]
        if s >= 0:
            out[i, :] = hot_data[s]
            where[i] = 0
            continue
        s = warm_slot[keys[i]]
        if s >= 0:
            out[i, :] = warm_data[s]
            where[i] = 1
        else:
            where[i] = 2


class NullStore:
    """A cold tier without data: every read misses, writes are dropped (replays use it)."""

    def __init__(self, width: int = 0):
        self.width = width

    def read(self, keys):
        return np.zeros((len(keys), self.width), dtype=np.float32), np.zeros(len(keys), bool)

    def write(self, keys, rows) -> None:
        pass

    def items(self):
        return np.empty(0, dtype=np.int64), np.empty((0, self.width), dtype=np.float32)

    def close(self) -> None:
        pass


class CacheTier:
    """`capacity` RAM row slots whose residency a policy decides."""

    def __init__(self, policy: Policy, width: int):
        self.policy = policy
        self.data = np.full((max(policy.capacity, 1), width), 0.0, dtype=np.float32)  # eager pages

    def admit(self, keys, rows):
        """Record an access of `keys` whose current values are `rows`; returns (keys, rows)
        pushed out of the tier (rows evicted and not re-admitted within the batch)."""
        evk, _, vrows = self.policy.access(keys, rows, self.data)
        if evk.size:
            gone = self.policy.slot_of[evk] < 0
            evk, vrows = evk[gone][::-1], vrows[gone][::-1]
            evk, last = np.unique(evk, return_index=True)  # the latest copy of each row
            vrows = vrows[last]
        return evk, vrows


class TieredRows:
    """One table's rows on one shard; keys are the shard's dense local keys."""

    def __init__(self, hot: Policy, warm_rows: int, width: int, cold, init: Callable):
        self.hot = CacheTier(hot, width)
        self.warm = CacheTier(LRU(warm_rows, hot.slot_of.size), width)
        self.cold, self.init, self.width = cold, init, width
        self.counts = dict.fromkeys(TIERS, 0)

    def grow(self, key_space: int) -> None:
        self.hot.policy.grow(key_space)
        self.warm.policy.grow(key_space)

    def _locate(self, keys):
        """(rows, where): where = 0 hot, 1 warm, 2 cold (written before), 3 new."""
        rows = np.empty((len(keys), self.width), dtype=np.float32)
        where = np.empty(len(keys), dtype=np.int64)
        _gather(keys, self.hot.policy.slot_of, self.hot.data, self.warm.policy.slot_of,
                self.warm.data, rows, where)
        rest = np.flatnonzero(where == 2)
        if rest.size:
            cold_rows, found = self.cold.read(keys[rest])
            if not found.all():
                missing = ~found
                cold_rows[missing] = self.init(keys[rest[missing]])
                where[rest[missing]] = 3
            rows[rest] = cold_rows
        return rows, where

    def peek(self, keys) -> np.ndarray:
        """Current rows of `keys`, no counting, no movement."""
        return self._locate(keys)[0]

    def read(self, keys) -> np.ndarray:
        """Rows of `keys`, counted per tier; the hot policy promotes and demotes."""
        rows, where = self._locate(keys)
        for tier, n in zip(TIERS, np.bincount(where, minlength=4).tolist()):
            self.counts[tier] += n
        out_keys, out_rows = self.hot.admit(keys, rows)
        in_hot = self.hot.policy.slot_of[keys] >= 0
        promoted = (where == 1) & in_hot
        if promoted.any():
            self.warm.policy.remove(keys[promoted])
        if out_keys.size:  # rows still in warm (not promoted) need no demotion
            keep = self.warm.policy.slot_of[out_keys] < 0
            self._demote(out_keys[keep], out_rows[keep])
        bypassed = ~in_hot & (where != 0)  # not admitted to hot: the warm tier keeps them,
        if bypassed.any():  # so their updates land in RAM, not on a disk page each
            self._demote(keys[bypassed], rows[bypassed])
        return rows

    def _demote(self, keys, rows) -> None:
        if self.warm.policy.capacity == 0:
            self.cold.write(keys, rows)
            return
        spill_keys, spill_rows = self.warm.admit(keys, rows)
        self.cold.write(spill_keys, spill_rows)

    def end_pass(self) -> None:
        keys, slots = self.hot.policy.end_pass()
        if keys.size:
            self._demote(keys, self.hot.data[slots].copy())

    def write(self, keys, rows) -> None:
        """Overwrite rows of `keys` (distinct) wherever they live."""
        hs = self.hot.policy.slot_of[keys]
        ws = self.warm.policy.slot_of[keys]
        in_hot, in_warm = hs >= 0, ws >= 0
        self.hot.data[hs[in_hot]] = rows[in_hot]
        self.warm.data[ws[in_warm]] = rows[in_warm]
        rest = ~(in_hot | in_warm)
        self.cold.write(keys[rest], rows[rest])

    def snapshot(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys, rows) of every row that has been written or cached (RAM tiers win)."""
        parts = [self.cold.items()]
        for tier in (self.warm, self.hot):
            keys, slots = tier.policy.resident()
            parts.append((keys, tier.data[slots]))
        keys = np.concatenate([p[0] for p in parts])
        rows = np.concatenate([p[1] for p in parts]).reshape(-1, self.width)
        last = len(keys) - 1 - np.unique(keys[::-1], return_index=True)[1]
        return keys[last], rows[last]


def compile_kernels() -> None:
    """Run every numba kernel once on a toy table, so that no request pays for compiling
    (cached on disk after the first process; still ~0.1 s per process to load)."""
    from heterps_sim.tiers.policies import make_policy

    for name in ("lru", "lfu", "paddle"):
        tiers = TieredRows(make_policy(name, 2, 16, passes=1), 2, 2, NullStore(2),
                           lambda k: np.zeros((len(k), 2), np.float32))
        for keys in ([1, 2, 3], [4, 5, 1, 6, 7], [8, 9]):
            tiers.read(np.array(keys, dtype=np.int64))
            tiers.end_pass()
