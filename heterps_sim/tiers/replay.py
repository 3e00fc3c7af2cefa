"""Replay an id stream through the tier logic: hit rates per tier, and Belady's optimum.

The simulator and the server share this: `replay_hit_rates` runs the very `TieredRows` code a
PS shard runs (with a `NullStore` and zero-width rows, so no data moves), split over shards by
id modulo `num_shards` and de-duplicated per batch as `PSClient` does. A hit rate here is
therefore the hit rate the server measures on the same stream, not a model of it.

`belady_hit_rate` is the offline optimum for the hot tier alone (Belady's MIN with bypass:
on a miss with a full cache, drop whichever of the cached rows and the new one is next used
furthest in the future), on the same per-shard, per-batch-distinct access sequence.

For the simulator (`heterps_sim.des`, whose `PsOptions` takes hot/warm/cold hit rates):
`ps_options(stream, ...)` returns a `PsOptions` with the replayed rates, e.g.
`DesOptions(ps=ps_options(ids, policy="lfu", hot_rows=...), ...)`; `heterps-sim evaluate
--engine des --effects ps --ps-policy lfu` builds them so (cli/des.py).
"""

from __future__ import annotations

import heapq

import numpy as np
from numba import njit

from heterps_sim.tiers.policies import make_policy
from heterps_sim.tiers.tiers import NullStore, TieredRows


def zipf_ids(num: int, num_rows: int, alpha: float, seed: int = 0) -> np.ndarray:
    """`num` ids in [0, num_rows) with P(rank r) ~ 1/r^alpha, ranks scattered over ids.

    Drawn by inverting the discrete CDF (alpha may be <= 1, unlike numpy's zipf); the
    permutation keeps hot ids from all landing on one shard."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, num_rows + 1, dtype=np.float64) ** alpha
    cdf = np.cumsum(weights)
    ranks = np.searchsorted(cdf, rng.random(num) * cdf[-1]).clip(0, num_rows - 1)
    perm = np.random.default_rng(seed + 1).permutation(num_rows)
    return perm[ranks].astype(np.int64)


def zipf_top_ids(num_rows: int, k: int, seed: int = 0) -> np.ndarray:
    """The `k` most probable ids of `zipf_ids(..., num_rows, ..., seed)` (ranks 0..k-1)."""
    return np.random.default_rng(seed + 1).permutation(num_rows)[:k].astype(np.int64)


def static_hit_rate(id_stream, cached_ids, *, batch_size: int = 4096) -> float:
    """Hit rate of a cache that admits exactly `cached_ids` and keeps them forever, counted as
    replay counts (per-batch distinct ids; an id's first access is a miss, as for any cache).

    With the true top-k ids of an i.i.d. stream this is about what the best online policy can
    expect; Belady's optimum is higher because it knows the future."""
    ids = np.asarray(id_stream, dtype=np.int64).reshape(-1)
    size = int(max(ids.max(), np.max(cached_ids))) + 1
    cached, seen = np.zeros(size, dtype=bool), np.zeros(size, dtype=bool)
    cached[cached_ids] = True
    hits = total = 0
    for start in range(0, ids.size, batch_size):
        batch = np.unique(ids[start:start + batch_size])
        hits += int((cached[batch] & seen[batch]).sum())
        seen[batch] = True
        total += batch.size
    return hits / max(total, 1)


def first_seen_unique(a: np.ndarray) -> np.ndarray:
    """Distinct values of `a` in order of first appearance (the order PSClient sends them)."""
    _, first = np.unique(a, return_index=True)
    return a[np.sort(first)]


def shard_batches(id_stream, batch_size: int, num_shards: int):
    """Per shard, the list of per-batch distinct local keys (dense), as the servers see them."""
    ids = np.asarray(id_stream, dtype=np.int64).reshape(-1)
    uniq, inverse = np.unique(ids, return_inverse=True)
    out: list[list[np.ndarray]] = [[] for _ in range(num_shards)]
    for start in range(0, ids.size, batch_size):
        batch = first_seen_unique(inverse[start:start + batch_size])  # dense keys
        shard = uniq[batch] % num_shards
        for s in range(num_shards):
            out[s].append(batch[shard == s])
    return out, uniq.size


def replay_hit_rates(id_stream, policy: str, hot_rows: int, *, warm_rows: int = 0,
                     num_shards: int = 1, batch_size: int = 4096, passes: int = 16,
                     admit: bool = True) -> dict[str, float]:
    """Shares of accesses served by hot, warm, cold (written before) and new rows.

    `hot_rows`/`warm_rows` are totals over shards (each shard gets an equal part); one batch =
    one pass for the paddle policy, as one training step is on the server."""
    per_shard, key_space = shard_batches(id_stream, batch_size, num_shards)
    counts = dict.fromkeys(("hot", "warm", "cold", "new"), 0)
    for batches in per_shard:
        pol = make_policy(policy, hot_rows // num_shards, key_space, passes=passes, admit=admit)
        tiers = TieredRows(pol, warm_rows // num_shards, 0, _RecordingStore(),
                           lambda k: np.zeros((len(k), 0), np.float32))
        for keys in batches:
            tiers.read(keys)
            tiers.end_pass()
        for k, v in tiers.counts.items():
            counts[k] += v
    total = max(sum(counts.values()), 1)
    rates = {k: v / total for k, v in counts.items()}
    rates["accesses"] = float(total)
    return rates


class _RecordingStore(NullStore):
    """Remembers which keys were written, so a later read counts as a cold hit, not new."""

    def __init__(self):
        super().__init__(0)
        self.seen: set[int] = set()

    def read(self, keys):
        found = np.fromiter((int(k) in self.seen for k in keys), bool, len(keys))
        return np.zeros((len(keys), 0), np.float32), found

    def write(self, keys, rows) -> None:
        self.seen.update(int(k) for k in keys)


@njit(cache=True)
def _next_use(seq, key_space):
    nxt = np.empty(seq.size, dtype=np.int64)
    last = np.full(key_space, seq.size, dtype=np.int64)  # seq.size = never again
    for i in range(seq.size - 1, -1, -1):
        nxt[i] = last[seq[i]]
        last[seq[i]] = i
    return nxt


def _belady_hits(seq: np.ndarray, key_space: int, capacity: int) -> int:
    if capacity <= 0 or seq.size == 0:
        return 0
    return int(_belady_kernel(seq, _next_use(seq, key_space), key_space, capacity))


@njit(cache=True)
def _belady_kernel(seq, nxt, key_space, capacity):
    cached_next = np.full(key_space, -1, dtype=np.int64)  # -1: not cached
    heap = [(-np.int64(0), np.int64(0))]  # max-heap on next use, lazily cleaned
    heap.pop()
    size = 0
    hits = 0
    for i in range(seq.size):
        k = seq[i]
        if cached_next[k] >= 0:
            hits += 1
            cached_next[k] = nxt[i]
            heapq.heappush(heap, (-nxt[i], k))
            continue
        if size < capacity:
            cached_next[k] = nxt[i]
            heapq.heappush(heap, (-nxt[i], k))
            size += 1
            continue
        while True:  # the furthest live entry
            neg, victim = heap[0]
            if cached_next[victim] == -neg:
                break
            heapq.heappop(heap)
        if -neg > nxt[i]:
            heapq.heappop(heap)
            cached_next[victim] = -1
            cached_next[k] = nxt[i]
            heapq.heappush(heap, (-nxt[i], k))
    return hits


def belady_hit_rate(id_stream, hot_rows: int, *, num_shards: int = 1,
                    batch_size: int = 4096) -> float:
    """Belady's optimal hot-tier hit rate on the stream, as `replay_hit_rates` counts it."""
    per_shard, key_space = shard_batches(id_stream, batch_size, num_shards)
    hits = total = 0
    for batches in per_shard:
        seq = np.concatenate(batches) if batches else np.empty(0, np.int64)
        hits += _belady_hits(seq.astype(np.int64), key_space, hot_rows // num_shards)
        total += seq.size
    return hits / max(total, 1)


def ps_options(id_stream, policy: str, hot_rows: int, *, warm_rows: int = 0,
               num_shards: int = 1, batch_size: int = 4096, base=None):
    """`heterps_sim.des.options.PsOptions` whose tier hit rates come from this replay."""
    from heterps_sim.des.options import PsOptions

    rates = replay_hit_rates(id_stream, policy, hot_rows, warm_rows=warm_rows,
                             num_shards=num_shards, batch_size=batch_size)
    base = base or PsOptions(num_shards=num_shards)
    hot, warm = rates["hot"], rates["warm"]
    return base.model_copy(update={
        "hot": base.hot.model_copy(update={"hit_rate": hot}),
        "warm": base.warm.model_copy(update={"hit_rate": warm}),
        "cold": base.cold.model_copy(update={"hit_rate": max(0.0, 1.0 - hot - warm)}),
    })
