"""Hot, warm and cold tiers of one table on one shard, and the rows moving between them.

```
 read(keys) ──► hot (bounded, policy: lru | lfu | paddle)     hit: served from RAM slots
                 │ evicted rows
                 ▼
                warm (bounded RAM, LRU)                        hit: promoted to hot
                 │ evicted rows
                 ▼
                cold (MemmapStore | RocksStore)                absent: initial_rows(id)
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

from heterps_exec.ps.policies import LRU, Policy

TIERS = ("hot", "warm", "cold", "new")


class CacheTier:
    """`capacity` RAM row slots whose residency a policy decides."""

    def __init__(self, policy: Policy, width: int):
        self.policy = policy
        self.data = np.zeros((max(policy.capacity, 1), width), dtype=np.float32)

    def admit(self, keys, rows, start_slots):
        """Record an access of distinct `keys` whose current values are `rows`; keys resident
        before hold `start_slots` >= 0. Returns (keys, rows) pushed out of the tier."""
        evk, evs = self.policy.access(keys)
        out_rows = rows[:0]
        if evk.size:
            order = np.argsort(keys, kind="stable")
            pos = np.searchsorted(keys[order], evk).clip(0, max(len(keys) - 1, 0))
            in_batch = (keys[order][pos] == evk) if len(keys) else np.zeros(evk.size, bool)
            idx = order[pos]
            out_rows = np.where(in_batch[:, None], rows[idx], self.data[evs])
            gone = self.policy.slot_of[evk] < 0  # evicted and not re-admitted since
            evk, first = np.unique(evk[gone], return_index=True)
            out_rows = out_rows[gone][first]
        final = self.policy.slot_of[keys]
        new = (final >= 0) & (final != start_slots)
        self.data[final[new]] = rows[new]
        return evk, out_rows


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
        hs = self.hot.policy.slot_of[keys]
        ws = self.warm.policy.slot_of[keys]
        rows = np.empty((len(keys), self.width), dtype=np.float32)
        in_hot, in_warm = hs >= 0, ws >= 0
        rows[in_hot] = self.hot.data[hs[in_hot]]
        rows[in_warm] = self.warm.data[ws[in_warm]]
        rest = ~(in_hot | in_warm)
        found = np.zeros(len(keys), dtype=bool)
        if rest.any():
            cold_rows, found_rest = self.cold.read(keys[rest])
            missing = ~found_rest
            if missing.any():
                cold_rows[missing] = self.init(keys[rest][missing])
            rows[rest] = cold_rows
            found[rest] = found_rest
        return rows, hs, in_hot, in_warm, found

    def peek(self, keys) -> np.ndarray:
        """Current rows of `keys`, no counting, no movement."""
        return self._locate(keys)[0]

    def read(self, keys) -> np.ndarray:
        """Rows of distinct `keys`, counted per tier; the hot policy promotes and demotes."""
        rows, hs, in_hot, in_warm, found = self._locate(keys)
        n_hot, n_warm, n_cold = int(in_hot.sum()), int(in_warm.sum()), int(found.sum())
        c = self.counts
        c["hot"] += n_hot
        c["warm"] += n_warm
        c["cold"] += n_cold
        c["new"] += len(keys) - n_hot - n_warm - n_cold
        out_keys, out_rows = self.hot.admit(keys, rows, hs)
        promoted = in_warm & (self.hot.policy.slot_of[keys] >= 0)
        self.warm.policy.remove(keys[promoted])
        if out_keys.size:  # rows still in warm (not promoted) need no demotion
            keep = self.warm.policy.slot_of[out_keys] < 0
            self._demote(out_keys[keep], out_rows[keep])
        return rows

    def _demote(self, keys, rows) -> None:
        if self.warm.policy.capacity == 0:
            self.cold.write(keys, rows)
            return
        spill_keys, spill_rows = self.warm.admit(keys, rows, np.full(len(keys), -1))
        self.cold.write(spill_keys, spill_rows)

    def end_pass(self) -> None:
        keys, slots = self.hot.policy.end_pass()
        if keys.size:
            self._demote(keys, self.hot.data[slots].copy())

    def write(self, keys, rows) -> None:
        """Overwrite rows of distinct `keys` wherever they live."""
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
