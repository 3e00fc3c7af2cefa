"""The numba kernels behind `tiers/policies.py`: one batch of keys per call, O(1) (LRU) or
O(log capacity) (LFU heap) per key, moving row data as residency changes.

State lives in plain numpy arrays owned by the policy objects, so the kernels are pure
functions of them (numba caches the compiled code on disk: `cache=True`).
"""

from __future__ import annotations

from numba import njit

from heterps_sim.util.numba_cache import prepare

prepare()  # a writable cache folder, one line when compiling (every tiers kernel imports this)


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
