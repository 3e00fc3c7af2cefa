"""Compound polish moves that raise a plan's bottleneck level (schedulers/search/polish.py, at a local optimum).

Why: with least provisioning a plan costs hours x summed unit prices, and hours = samples over
the slowest stage's throughput. Far above the throughput limit (one unit per stage; optima of
random 64 x 64 problems have 30-60 stages), raising the slowest stage alone does not pay when
the next-slowest sits just above it: it pays only when every stage below some level theta
changes at once. No one-move neighbour does that.

level_moves(plan): for each target level theta (the throughputs the plan's stages reach above
its bottleneck, and a ladder of multiples of the bottleneck), the plan's stages are grouped
(singly, and in runs of `span` consecutive stages at each alignment) and every group holding
a stage below theta is cut anew: at most 3 pieces per stage of the group, the cut points
anywhere inside the group, each piece on its cheapest type that reaches theta, every piece's
boundary costed at the network speed of the type after it (_StageCuts: a shortest path over
the group's layers and the network speeds). Groups are visited last to first, so each sees
the type that follows it; a group's first piece keeps the stage before it at theta where it
can. A second plan per level and grouping re-cuts every group. Each compound plan is then
costed exactly by the caller (search_space.PlanBudget); the estimates here only propose.
The group's boundaries (the plan's own stage boundaries every `span` stages) stay fixed: this
is a local move around the current plan, not a search over all partitions of the model.

Stages are estimated with the problem's own cost model (cost/provision.py: under the default
model the all-reduce, fixed costs, memory and minimum batch per unit, and the parameter
server's cap on the plan). Knowingly approximate: a stage's units are the fewest that meet
the limit (least provisioning), caps are ignored, and groups are cut one at a time (greedily,
not jointly).
"""

from __future__ import annotations

import numpy as np

from heterps_sim.cost.provision import provision
from heterps_sim.cost.reference import ps_cap
from heterps_sim.cost.terms import boundary_latency_s
from heterps_sim.schedulers.search.space import SearchSpace

LADDER = (1.01, 1.02, 1.05, 1.1, 1.2, 1.35, 1.5, 2.0, 2.5, 3.0, 4.0)
"""Levels tried above the bottleneck besides the plan's own stage throughputs (x bottleneck)."""
MAX_LEVELS = 32
"""Most target levels per call (the lowest first)."""
PIECES = 3
"""Most pieces a stage of a group is cut into."""
CACHE = 4096
"""Most memoised stage throughputs kept (StageOptions); emptied beyond it."""
CACHE_BYTES = 256 * 2**20
"""Most bytes of group tables kept (StageOptions.cuts); emptied beyond it."""
MAX_GROUP_LAYERS = 32
"""Longer groups are not cut (a group's tables grow with its layers squared)."""
MAX_SPEEDS = 6
"""Network speeds told apart when cutting; more are binned, each bin at its slowest speed
(so a piece estimated to reach a level does)."""


class StageOptions:
    """Per (layers lo..hi-1, type): price x the fewest units meeting the limit (USD/h), and
    the throughput those units reach; prefix sums over layers make a segment O(types)."""

    def __init__(self, space: SearchSpace) -> None:
        p = space.problem
        self.problem, ok = p, space.usable

        def prefix(x: np.ndarray) -> np.ndarray:
            out = np.zeros((p.num_layers + 1, p.num_types))
            out[1:] = np.cumsum(np.where(ok, x, 0.0), axis=0)
            return out

        self._oct, self._odt = prefix(p.oct_s), prefix(p.odt_s)
        self._aoct = prefix(p.alpha * p.oct_s)
        self._bad = np.zeros((p.num_layers + 1, p.num_types), np.int64)
        self._bad[1:] = np.cumsum(~ok, axis=0)  # unusable layers before i, per type
        self._net = np.asarray(p.network_bytes_per_s, float)
        self._price = np.asarray(p.price_per_hour, float)
        self._latency = boundary_latency_s(p)
        self._ps_cap = ps_cap(p)
        self._thr: dict[tuple[int, ...], float] = {}
        self._prev: dict[tuple[int, ...], np.ndarray] = {}
        self.speeds, self.speed_of = _speed_bins(self._net)
        self.cuts: dict[tuple[int, ...], _StageCuts] = {}
        """level_moves' stage tables by (start, end, next type, previous type), kept across
        calls (most stages of a plan outlive a move)."""

    def table(self, lo: np.ndarray, hi: np.ndarray,
              nxt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rate, thr), each (C, M), for the C segments lo..hi-1 on every type, followed by
        type nxt (C,) or (C, M) (-1: nothing follows). rate is inf and thr 0 where the type
        cannot hold the segment or no number of units reaches the limit."""
        nxt = np.asarray(nxt, np.int64)
        if nxt.ndim == 1:
            nxt = np.repeat(nxt[:, None], self.problem.num_types, axis=1)
        bw = np.where(nxt >= 0, np.minimum(self._net[None, :], self._net[nxt]), 0.0)
        return self.table_bw(lo, hi, bw)

    def table_bw(self, lo: np.ndarray, hi: np.ndarray,
                 bw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """table() with the boundary's bandwidth per segment and type given, (C, M) bytes/s
        (0: nothing follows)."""
        p = self.problem
        lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
        o = self._oct[hi] - self._oct[lo]
        d = self._odt[hi] - self._odt[lo]
        ao = self._aoct[hi] - self._aoct[lo]
        last = np.minimum(hi, p.num_layers) - 1
        with np.errstate(divide="ignore", invalid="ignore"):
            d = d + np.where(bw > 0, p.boundary_bytes[last][:, None] / bw + self._latency, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            a = np.where(o > 0, ao / o, 0.0)
            par, ser = (o + d, 0.0) if p.odt_parallel else (o, d)
            # the problem's own model (cost/provision.py): all-reduce and fixed costs count
            pr = provision(p, par, ser, a, np.minimum(lo, last)[:, None], last[:, None],
                           np.arange(p.num_types)[None, :], p.batch_size / p.throughput_limit)
            thr = np.minimum(p.batch_size / pr.step_s, self._ps_cap)
        good = (self._bad[hi] == self._bad[lo]) & pr.ok
        return np.where(good, self._price * pr.units, np.inf), np.where(good, thr, 0.0)

    def stage_thr(self, s: int, e: int, j: int, nxt: int) -> float:
        """Throughput of one stage (layers s..e-1 on type j, then type nxt), memoised."""
        key = (s, e, j, nxt)
        if key not in self._thr:
            if len(self._thr) > CACHE:
                self._thr.clear()
            self._thr[key] = float(self.table(np.array([s]), np.array([e]),
                                              np.array([nxt]))[1][0, j])
        return self._thr[key]

    def keeps_prev(self, b: np.ndarray, s: int, theta: float) -> np.ndarray | None:
        """(V,) bool: network speeds of a type at layer s with which the stage ending at
        s - 1 still reaches theta; None when there is no such stage or it does not now."""
        if s == 0:
            return None
        j = int(b[s - 1])
        ps = s - 1
        while ps > 0 and b[ps - 1] == j:
            ps -= 1
        key = (ps, s, j)
        if key not in self._prev:
            if len(self._prev) > CACHE:
                self._prev.clear()
            bw = np.minimum(self._net[j], self.speeds)[:, None].repeat(len(self._net), 1)
            thr = self.table_bw(np.full(len(self.speeds), ps), np.full(len(self.speeds), s),
                                bw)[1][:, j]
            self._prev[key] = thr
        thr = self._prev[key]
        now = thr[self.speed_of[int(b[s])]]
        return thr >= theta if now >= theta else None

    def stages(self, a: np.ndarray) -> tuple[np.ndarray, ...]:
        """(starts, ends, types, rate, thr) of the stages of assignment a, as costed here."""
        starts, ends = SearchSpace.stages(a)
        types = a[starts]
        nxt = np.append(types[1:], -1)
        rate, thr = self.table(starts, ends, nxt)
        g = np.arange(len(starts))
        return starts, ends, types, rate[g, types], thr[g, types]


def _speed_bins(net: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(speeds, speed index per type): the distinct network speeds, or, beyond MAX_SPEEDS,
    that many bins of them (by rank), each at its slowest speed."""
    unique, index = np.unique(net, return_inverse=True)
    if len(unique) <= MAX_SPEEDS:
        return unique, index
    bin_of = np.arange(len(unique)) * MAX_SPEEDS // len(unique)
    return unique[np.searchsorted(bin_of, np.arange(MAX_SPEEDS))], bin_of[index]


class _StageCuts:
    """One stage's sub-segments on every type, for cutting it at any level: each piece's
    boundary costed for every network speed the next piece's type may have. Types are kept
    grouped by their own network speed (columns permuted), so a level's cheapest type per
    speed is one masked minimum per group."""

    def __init__(self, opts: StageOptions, s: int, e: int, nxt: int, prev: int) -> None:
        self.opts, self.s, self.n = opts, s, e - s
        net = opts._net
        speeds, speed_of = opts.speeds, opts.speed_of  # V speeds
        self.perm = np.argsort(speed_of, kind="stable")
        self.bounds = np.searchsorted(speed_of[self.perm], np.arange(len(speeds)))
        lo, hi = np.triu_indices(self.n + 1, 1)
        inner = hi < self.n
        self.lo, self.hi = lo[inner], hi[inner]
        self.seg = np.zeros((self.n + 1, self.n + 1), np.int64)
        self.seg[self.lo, self.hi] = np.arange(len(self.lo))
        V, M, C = len(speeds), len(net), len(self.lo)
        bw = np.minimum(net[None, None, :], speeds[None, :, None])  # (1, V, M)
        rate, thr = opts.table_bw(np.repeat(s + self.lo, V), np.repeat(s + self.hi, V),
                                  np.broadcast_to(bw, (C, V, M)).reshape(C * V, M))
        rate, thr = rate.reshape(C, V, M), thr.reshape(C, V, M)
        last_rate, last_thr = opts.table(s + np.arange(self.n), np.full(self.n, e),
                                         np.full(self.n, nxt))
        if nxt >= 0:
            last_rate[:, nxt] = np.inf  # the stages would merge
        if prev >= 0:
            last_rate[0, prev] = np.inf
            rate[self.lo == 0, :, prev] = np.inf
        self.rate, self.thr = rate[..., self.perm], thr[..., self.perm]
        self.last_rate, self.last_thr = last_rate[:, self.perm], last_thr[:, self.perm]
        self.nbytes = 2 * (self.rate.nbytes + self.last_rate.nbytes)

    def _masked(self, rate: np.ndarray, thr: np.ndarray, theta: float) -> np.ndarray:
        return np.where(thr >= theta, rate, np.inf)

    def _type(self, masked_row: np.ndarray, u: int) -> int:
        """The cheapest type of speed group u in one masked row."""
        lo = self.bounds[u]
        hi = self.bounds[u + 1] if u + 1 < len(self.bounds) else len(self.perm)
        return int(self.perm[lo + int(np.argmin(masked_row[lo:hi]))])

    def cut(self, theta: float, pieces: int,
            first_speeds: np.ndarray | None = None) -> list[tuple[int, int, int]]:
        """Cheapest cut into at most `pieces` stages that each reach theta (each piece's
        boundary at the speed of the next piece's type), the first piece on a type of a speed
        allowed by `first_speeds` ((V,) bool) if any is; [(lo, hi, type), ...] or []."""
        n, V = self.n, len(self.bounds)
        last_m = self._masked(self.last_rate, self.last_thr, theta)
        inner_m = self._masked(self.rate, self.thr, theta)
        last = np.minimum.reduceat(last_m, self.bounds, axis=-1)  # (n, V own)
        inner = np.minimum.reduceat(inner_m, self.bounds, axis=-1)  # (C, V next, V own)
        dense = np.full((n + 1, n + 1, V, V), np.inf)
        dense[self.lo, self.hi] = inner
        exact = [np.full((n + 1, V), np.inf)]  # exact[k-1][lo, u]: lo..n-1 in k pieces,
        exact[0][:n] = last                     # the first one on a type of speed u
        backs = [None]
        for _ in range(pieces - 1):
            total = dense + exact[-1][None, :, :, None]  # (lo, hi, v next, u own)
            flat = total.transpose(0, 3, 1, 2).reshape(n + 1, V, -1)
            backs.append(flat.argmin(axis=2))
            exact.append(flat.min(axis=2))
        firsts = np.array([row[0] for row in exact])  # (pieces, V)
        if first_speeds is not None and np.isfinite(firsts[:, first_speeds]).any():
            firsts[:, ~first_speeds] = np.inf
        top, u = np.unravel_index(int(np.argmin(firsts)), firsts.shape)
        if not np.isfinite(firsts[top, u]):
            return []
        out, lo, u = [], 0, int(u)
        for k in range(int(top), 0, -1):
            hi, v = divmod(int(backs[k][lo, u]), V)
            out.append((self.s + lo, self.s + hi, self._type(inner_m[self.seg[lo, hi], v], u)))
            lo, u = hi, v
        out.append((self.s + lo, self.s + n, self._type(last_m[lo], u)))
        return self._unmerge(out, theta)

    def _unmerge(self, out: list, theta: float) -> list[tuple[int, int, int]]:
        """Adjacent pieces on one type would be one stage: the left one moves to its next
        cheapest type that reaches theta (at its real boundary), or the cut is dropped."""
        for i in range(len(out) - 2, -1, -1):
            (lo, hi, j), nxt = out[i], out[i + 1][2]
            if j != nxt:
                continue
            rate, thr = self.opts.table(np.array([lo]), np.array([hi]), np.array([nxt]))
            r = np.where(thr[0] >= theta, rate[0], np.inf)
            r[nxt] = np.inf
            if i > 0:
                r[out[i - 1][2]] = np.inf
            if not np.isfinite(r.min()):
                return []
            out[i] = (lo, hi, int(np.argmin(r)))
        return out


def levels(thr: np.ndarray) -> list[float]:
    """Target levels above the bottleneck: the stages' own throughputs, then a ladder."""
    theta0 = float(thr.min())
    above = sorted(set(float(t) for t in thr if t > theta0 * (1 + 1e-9)))
    out = sorted(set(above[:MAX_LEVELS - len(LADDER)] + [theta0 * r for r in LADDER]))
    return out[:MAX_LEVELS]


def _units(starts: np.ndarray, ends: np.ndarray, span: int, offset: int) -> list:
    """(start, end, stages) of groups of `span` consecutive stages, the first `offset` long."""
    n, out, g = len(starts), [], 0
    sizes = [offset] if 0 < offset < n else []
    while sum(sizes) < n:
        sizes.append(min(span, n - sum(sizes)))
    for size in sizes:
        out.append((int(starts[g]), int(ends[g + size - 1]), range(g, g + size)))
        g += size
    return out


def level_moves(opts: StageOptions, a: np.ndarray, max_pieces: int = PIECES,
                span: int = 3) -> np.ndarray:
    """(K, L): per target level (levels()) and per grouping of the stages into runs of 1 or
    `span` (each alignment), the plan with every group holding a stage below the level cut
    anew (_StageCuts: at most max_pieces per stage in the group, each piece on its cheapest
    type reaching the level); and the plan with every group so cut. Groups are visited last
    to first, so each sees the type that follows it."""
    a = np.asarray(a, np.int64)
    starts, ends, _, _, thr = opts.stages(a)
    groupings = [_units(starts, ends, 1, 0)]
    groupings += [_units(starts, ends, span, off) for off in range(span) if span > 1]
    rows = [np.empty((0, len(a)), np.int64)]
    cuts = opts.cuts
    if sum(c.nbytes for c in cuts.values()) > CACHE_BYTES:
        cuts.clear()
    for theta in levels(thr):
        for units in groupings:
            for every in (False, True):
                b = a.copy()
                for s, e, members in reversed(units):
                    if not every and thr[members.start:members.stop - 1].min(
                            initial=np.inf) >= theta:
                        last = int(starts[members.stop - 1])  # its next type may have changed
                        if opts.stage_thr(last, e, int(b[last]),
                                          int(b[e]) if e < len(b) else -1) >= theta:
                            continue
                    if e - s > MAX_GROUP_LAYERS:
                        break
                    key = (s, e, int(b[e]) if e < len(b) else -1, int(b[s - 1]) if s else -1)
                    if key not in cuts:
                        cuts[key] = _StageCuts(opts, *key)
                    pieces = cuts[key].cut(theta, max_pieces * len(members),
                                           opts.keeps_prev(b, s, theta))
                    if not pieces:
                        break
                    for lo, hi, j in pieces:
                        b[lo:hi] = j
                else:
                    if not np.array_equal(a, b):
                        rows.append(b[None, :])
    out = np.concatenate(rows)
    if len(out) == 0:
        return out
    _, first = np.unique(out, axis=0, return_index=True)
    return out[np.sort(first)]
