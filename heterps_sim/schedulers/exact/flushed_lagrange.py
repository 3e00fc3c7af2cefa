"""A Lagrangian lower bound on the cost of every flushed plan at one microbatch count m, much
tighter than the prefix tables' (flushed_kernel.prefix_tables): certified.py raises each m's
bound with it and closes the m's it lifts to the best plan's cost.

The relaxation. cost/flush.py's step time is, for every stage g of a plan,

    T >= A + PF' + C_g + pb_g + r_g

with A the sum of every stage's forward fill a_h, C_g the backward drains c_h of g and the
stages after it, PF' the forward pace (the largest stage pace pf_h, or the PS pulls when they
pace the forwards), pb_g its own backward pace and r_g = AR_g + u_g its step-end phase. Each
term is priced at or below its value in any plan: a boundary on the stage's own type's
bandwidth (min(net_j, net_j') is at most it), interface queues without the boundary before.
Write layer l's stage as g(l): for each layer l

    sum_h a_h + sum_{h: last layer >= l} c_h + (pb + r of the stage holding l) + PF' <= T,

additive over the plan's stages. Two guesses make the rest additive too: the step T lies in
a box [t_lo, t_hi] and PF' in [g_lo, g_hi]. In the box every stage's pf_h (and its own PS
pull stagger) is at most g_hi, the constraints use T <= t_hi and PF' >= g_lo; the step's PS
pulls pace every plan's forwards alike (cost/flush.py: q, the step's pulls, less one
microbatch's when the odt holds the PS side), so every plan adds max(g_lo, q), and the box
is empty when q > g_hi.

For multipliers mu_l >= 0 the least of

    sum_h USD/h_h + sum_l mu_l (constraint_l - t_hi)

over all plans is a shortest path over the stages (each stage's unit count chosen for its
weight), at most the least USD/h of a plan in the box (Lagrangian duality); the multipliers
rise by subgradient steps towards the cost to beat (Polyak steps, a fixed iteration count).
A box's bound on the cost is then job_cost(its USD/h bound + fixed, least startup, t_lo).
Boxes whose bound stays below the cost to beat are split (the wider of T and PF' in halves,
deterministically, least bound first) while the work budget lasts; the m's bound is the least
over the boxes that cover every T from the least step any plan has to the limit's and every
PF' from 0 to that.

A box also covers a range of m's [m_lo, m_hi] (certified.py asks for every open m at once):
each term is then its least over the range. The fills, drains and the microbatch's work w
fall as 1 / m (taken at m_hi); a stage's paces on k units are (ceil(m / k) - 1) / m times
their value per unit of work (least_share); the step's pulls' pace rises with m (taken at
m_lo), a stage's pull stagger is least at an end of the range. So one
first sweep bounds every m, and the m's are split (in halves, geometrically, before T or
PF') only where the bound stays below the cost to beat. Measured on synthetic-64x64
(docs/results/2026-11-27-certified-solver-incumbents.md): a range of m's is much looser than
one m (k >= m_lo units pace nothing over the range), so the bound per m comes from splitting.

The shortest paths are plans. Those of a box at one m are searched (CompiledSearch.price:
the label search over their stages alone, unit counts free) for a plan below the cost to
beat, which then lowers it.

What it leaves out (so it stays a bound): the largest backward pace of the stages after g
(only g's own counts), the neighbour's slower link, availability caps, startup beyond the
least. Work is counted in deterministic units (stage options scanned per path), never time.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from heterps_sim.cost import dominant_numba as dominant
from heterps_sim.schedulers.exact.flushed_kernel import job_cost, paces
from heterps_sim.schedulers.exact.flushed_stages import _work

ITERATIONS = 4
"""Subgradient steps per box (a box starts from the multipliers of the box evaluated before
it: its parent, or its neighbour in the first sweep). Fewer steps and more boxes raise the
bound faster (synthetic-64x64, every m, 30 M units: 12 steps 3.66 USD, 6 steps 4.49, 4 steps
5.13, 2 steps 4.99; m = 6 alone, 10 M units: 12 steps 6.89, 4 steps 7.24)."""
G_EDGES = 6
"""PF' boxes at the start: [0, t/2^5], then doubling up to the limit's step t."""
WORK_SCALE = 1
"""Stage options scanned per work unit (a unit is then about as long as one of the label
search's on the 2-core VM)."""
PRICE_PATHS = 12
"""The last shortest paths of a box whose stages are searched for a plan (their unit counts
free): the later multipliers' paths come nearer to meeting the step limit."""
PRICE_WORK = 1_000_000
"""The most work one such search may spend (past it, it gives no plan)."""
TERMS_KEPT = 8
"""m's whose stage terms are kept (a few MB each at 64 x 64)."""
MIN_SPLIT = 1e-3
"""A box is not split once both its ranges are narrower than this fraction of t."""


@njit(cache=True)
def stage_terms(first, count, E, F, L, M, par, m, beta, fs, transfers, latency, ext, lvl,
                lev, bytes_):
    """Per stage at m: (a, c, w, u, ser, first layer), each at or below its value in any
    plan (the boundary on the stage's own type's bandwidth)."""
    n = E.shape[0]
    A = np.zeros(n)
    C = np.zeros(n)
    W = np.zeros(n)
    U = np.zeros(n)
    SER = np.zeros(n)
    ST = np.zeros(n, np.int64)
    for i in range(L):
        for j in range(M):
            for s in range(first[i, j], first[i, j] + count[i, j]):
                e = E[s]
                odt = F[s, 1]
                ser = 0.0
                lat = 0.0
                if e < L - 1:
                    v = lvl[j]
                    odt += ext[e, v]
                    if transfers:
                        ser = bytes_[e] / m / lev[v]
                        lat = latency
                w, u = _work(F[s, 0], odt, F[s, 2], par, F[s, 3], m)
                A[s] = (1.0 - beta) * w + fs * ser + lat
                C[s] = beta * w + (1.0 - fs) * ser + lat
                W[s] = w
                U[s] = u
                SER[s] = ser
                ST[s] = i
    return A, C, W, U, SER, ST


@njit(cache=True)
def least_drains(first, count, E, C, L, M):
    """least_drains[i]: the least sum of drains any stages from layer i to the end have."""
    out = np.full(L + 1, np.inf)
    out[L] = 0.0
    for i in range(L - 1, -1, -1):
        for j in range(M):
            for s in range(first[i, j], first[i, j] + count[i, j]):
                v = C[s] + out[E[s] + 1]
                if v < out[i]:
                    out[i] = v
    return out


@njit(cache=True, inline="always")
def least_share(k, m_lo, m_hi):
    """The least (ceil(m / k) - 1) / m over m_lo <= m <= m_hi: a stage's paces on k units are
    this times their value per microbatch of work (w and the boundary's share both fall as
    1 / m). Within a run of equal ceil(m / k) it falls with m, so its least is at m_hi or at
    the end of the first run ending inside the range (a multiple of k); those ends rise."""
    least = ((m_hi + k - 1) // k - 1) / m_hi
    c = (m_lo + k - 1) // k
    if c * k <= m_hi:
        least = min(least, (c - 1) / (c * k))
    return least


@njit(cache=True)
def least_fills(first, count, E, A, L, M):
    """least_fills[i]: the least sum of fills any stages from layer 0 to i - 1 have."""
    out = np.full(L + 1, np.inf)
    out[0] = 0.0
    for i in range(L):
        if out[i] == np.inf:
            continue
        for j in range(M):
            for s in range(first[i, j], first[i, j] + count[i, j]):
                v = out[i] + A[s]
                if v < out[E[s] + 1]:
                    out[E[s] + 1] = v
    return out


@njit(cache=True)
def options(E, F, K, m_lo, m_hi, beta, fs, allreduce, contention, one_f_one_b, pull1, holds,
            A, C, W1, U, SER1, ST, stage_price, min_fill, min_drain, room, g_hi):
    """Each stage's unit counts worth trying in a box whose plans have some m in
    [m_lo, m_hi]: (start, k, USD/h, own, counts tried) with own = pb + AR + u, its forward
    pace (its pull stagger included) at most g_hi, the stage alone within `room` (t_hi - g_lo)
    beside the least fills before it and drains after it; only counts whose own time falls
    as the price rises. Each time is its least over the m's (least_share; A and C are taken
    at m_hi, W1 and SER1 are w and the boundary's share times m, pull1 a pull times m)."""
    n = E.shape[0]
    start = np.zeros(n + 1, np.int64)
    cap = 4 * n + 16
    OK = np.zeros(cap, np.int64)
    OP = np.zeros(cap)
    OO = np.zeros(cap)
    x = 0
    tried = 0
    for s in range(n):
        start[s] = x
        left = room - min_fill[ST[s]] - A[s] - C[s] - min_drain[E[s] + 1] - U[s]
        if left < 0.0:
            continue
        k_lo, k_hi = K[s, 0], K[s, 1]
        pull = pull1 * F[s, 6]
        # (nn - 1) times these: the paces at one more microbatch per unit than one
        pf1, pb1 = paces(2, W1[s], 0.0, SER1[s], beta, fs, contention, one_f_one_b)
        best_own = np.inf
        prev = -1.0
        # past m_hi units every m has one microbatch per unit: more only add all-reduce time
        for k in range(k_lo, max(k_lo, min(k_hi, m_hi)) + 1):
            share = least_share(k, m_lo, m_hi)
            if share == prev and k > k_lo and m_lo == m_hi:
                continue  # one m: the same microbatches per unit as fewer units
            prev = share
            tried += 1
            ar = dominant.allreduce_time(F[s, 4], F[s, 5], k) if allreduce else 0.0
            pf = pf1 * share
            pb = pb1 * share
            if pull > 0.0:  # its units' pull stagger (cost/flush.py), least over the m's
                extra = 0.0 if holds else 1.0
                stagger = min((min(k, m_lo) - 1.0 + extra) / m_lo,
                              (min(k, m_hi) - 1.0 + extra) / m_hi) * pull
                pf += stagger
            if pf > g_hi or pb + ar > left:
                continue
            own = pb + ar + U[s]
            if own >= best_own:
                continue
            best_own = own
            if x >= cap:
                cap *= 2
                OK2 = np.zeros(cap, np.int64)
                OP2 = np.zeros(cap)
                OO2 = np.zeros(cap)
                OK2[:x] = OK[:x]
                OP2[:x] = OP[:x]
                OO2[:x] = OO[:x]
                OK, OP, OO = OK2, OP2, OO2
            OK[x] = k
            OP[x] = stage_price[s] * k
            OO[x] = own
            x += 1
    start[n] = x
    return start, OK[:x].copy(), OP[:x].copy(), OO[:x].copy(), tried


@njit(cache=True)
def _path(first, count, E, ST, L, M, A, C, ostart, OK, OP, OO, mu, t_hi, g_lo, g_hi, q_all, d,
          back, PS, PK):
    """One shortest path under multipliers mu: (dual value, its constraint values per layer,
    work, its stage count); PS[:n], PK[:n] its stages and unit counts from the last stage to
    the first. The step's pulls pace every plan's forwards alike (q_all), so one state per
    layer."""
    pre = np.zeros(L + 1)
    for ell in range(L):
        pre[ell + 1] = pre[ell] + mu[ell]
    tot = pre[L]
    d[:] = np.inf
    d[0] = 0.0
    work = 0
    if q_all > g_hi:  # every plan's forwards are paced by the step's pulls (cost/flush.py)
        return np.inf, np.zeros(L), work, 0
    for i in range(L):
        if d[i] == np.inf:
            continue
        for j in range(M):
            for s in range(first[i, j], first[i, j] + count[i, j]):
                if ostart[s] == ostart[s + 1]:
                    continue
                e = E[s]
                base = d[i] + tot * A[s] + pre[e + 1] * C[s]
                inner = pre[e + 1] - pre[i]
                for o in range(ostart[s], ostart[s + 1]):
                    work += 1
                    v = base + OP[o] + inner * OO[o]
                    if v < d[e + 1]:
                        d[e + 1] = v
                        back[e + 1, 0] = s
                        back[e + 1, 1] = o
    g = np.zeros(L)
    if d[L] == np.inf:
        return np.inf, g, work, 0
    extra = max(g_lo, q_all)
    best = d[L] + tot * extra
    x = L
    n = 0
    fills = extra
    while x > 0:
        s = back[x, 0]
        o = back[x, 1]
        i = ST[s]
        PS[n] = s
        PK[n] = OK[o]
        n += 1
        fills += A[s]
        for ell in range(0, E[s] + 1):
            g[ell] += C[s]
        for ell in range(i, E[s] + 1):
            g[ell] += OO[o]
        x = i
    for ell in range(L):
        g[ell] += fills
    return best - t_hi * tot, g, work, n


@njit(cache=True)
def dual(first, count, E, ST, L, M, A, C, ostart, OK, OP, OO, mu, t_hi, g_lo, g_hi, q_all,
         target, iterations):
    """(best dual value: a bound on the USD/h of every plan in the box, the multipliers it
    ends with, work, the paths: PS[x, :PN[x]] and PK[x, :PN[x]] the stages and unit counts of
    step x's shortest path, last stage first; real plans): `iterations` subgradient steps
    (Polyak towards `target`, the USD/h to prove; stops once the bound reaches it)."""
    d = np.empty(L + 1)
    back = np.full((L + 1, 2), -1, np.int64)
    PS = np.zeros((iterations, L), np.int64)
    PK = np.zeros((iterations, L), np.int64)
    PN = np.zeros(iterations, np.int64)
    best = -np.inf
    work = 0
    theta = 1.0
    stall = 0
    mu = mu.copy()
    for it in range(iterations):
        val, g, w, n = _path(first, count, E, ST, L, M, A, C, ostart, OK, OP, OO, mu,
                             t_hi, g_lo, g_hi, q_all, d, back, PS[it], PK[it])
        PN[it] = n
        work += w
        if val == np.inf:
            return np.inf, mu, work, PS, PK, PN
        if val > best:
            best = val
            stall = 0
        else:
            stall += 1
            if stall >= 5:
                theta *= 0.5
                stall = 0
        if best >= target:
            break
        norm = 0.0
        for ell in range(L):
            sub = g[ell] - t_hi
            if mu[ell] <= 0.0 and sub < 0.0:
                sub = 0.0
            g[ell] = sub
            norm += sub * sub
        if norm <= 0.0:
            break  # the path meets every constraint: its USD/h is the box's least
        step = theta * max(target - val, 1e-9 * abs(target)) / norm
        for ell in range(L):
            mu[ell] = max(0.0, mu[ell] + step * g[ell])
    return max(best, 0.0), mu, work, PS, PK, PN


@dataclass
class Bounds:
    """LagrangeBound.bounds' answer."""

    per_m: dict
    """{m: USD}: no plan at m costs less."""
    work: int
    complete: bool
    """Every box's bound reached the target (the cost to beat, lowered by the plans found)."""
    best: object = None
    """The cheapest plan the shortest paths gave (a FlushedOptimum, priced exactly as the
    label search prices it) below the first target, or None."""
    priced: int = 0
    """Paths priced as plans."""


class LagrangeBound:
    """The bound for one problem (a flushed_compiled.CompiledSearch's stages), per m."""

    def __init__(self, search) -> None:
        self.s = search
        self._terms: dict = {}

    def bound(self, m: int, target: float, max_work: int) -> tuple[float, int, bool]:
        """(USD: no plan at m costs less, work, complete): bounds((m,), ...) without pricing
        the paths."""
        got = self.bounds((m,), target, max_work, price=False)
        return got.per_m[m], got.work, got.complete

    def bounds(self, ms, target: float, max_work: int, *, price: bool = True) -> Bounds:
        """A bound per m of `ms` (module docstring): a box covers a range of the m's as well
        as of T and PF'; its terms are their least over its m's (options). Boxes are split
        (least bound first; a range of m's in halves before T or PF') until every box's bound
        reaches `target` (the cost to beat) or `max_work` is spent; an m's bound is the least
        over the boxes covering it. price: each distinct shortest path is priced as a plan
        at the ends of its box's m's (CompiledSearch.price); a cheaper one lowers the
        target."""
        s = self.s
        ms = tuple(sorted(set(int(m) for m in ms)))
        t_max = s.t_max
        work = 0
        found = {"best": None, "target": float(target), "priced": 0}
        seen: set = set()

        def evaluate(box, mu):
            nonlocal work
            t_lo, t_hi, g_lo, g_hi, a, b = box
            m_lo, m_hi = ms[a], ms[b]
            A, C, W1, U, SER1, ST, fills, drains, price_, least_fd = self._stage_terms(m_hi)
            t_lo = max(t_lo, least_fd)  # fills and drains fall with m: least at m_hi
            if t_lo > t_hi:
                return math.inf, mu
            hours = float(job_cost(1.0, 0.0, s.least_startup, t_lo, s.B, s.cap, s.N, s.gran))
            goal = found["target"]
            f_target = goal / hours - s.fixed if hours > 0 else math.inf
            first, count, E, F, K = s.stages
            ostart, OK, OP, OO, tried = options(
                E, F, K, m_lo, m_hi, s.beta, s.fs, s.allreduce, s.contention, s.one_f_one_b,
                s.pull_per_byte(1), s.holds, A, C, W1, U, SER1, ST, price_, fills, drains,
                t_hi - g_lo, g_hi)
            work += (int(tried) // 4 + len(OP)) // WORK_SCALE
            if len(OP) == 0:
                return math.inf, mu
            f_lb, mu2, w, PS, PK, PN = dual(
                first, count, E, ST, s.L, s.M, A, C, ostart, OK, OP, OO, mu, t_hi, g_lo,
                g_hi, s.all_pulls(m_lo), f_target if math.isfinite(f_target) else 1e300,
                ITERATIONS)
            work += int(w) // WORK_SCALE
            if price and m_lo == m_hi:  # (a range's paths are poor plans at its ends)
                work += self._price(PS, PK, PN, (m_lo,), found, seen)
            if f_lb == math.inf:
                return math.inf, mu2
            usd = float(job_cost(f_lb, s.fixed, s.least_startup, t_lo, s.B, s.cap, s.N, s.gran))
            return usd, mu2

        t_least = self._stage_terms(ms[-1])[-1] if ms else math.inf
        if not ms or not math.isfinite(t_least) or t_least > t_max:
            return Bounds({m: math.inf for m in ms}, 0, True)
        edges = [0.0] + [t_max * 2.0 ** (x - G_EDGES + 1) for x in range(G_EDGES)]
        heap: list = []
        mu0 = np.zeros(s.L)
        for g_lo, g_hi in zip(edges[:-1], edges[1:]):
            box = (t_least, t_max, g_lo, g_hi, 0, len(ms) - 1)
            usd, mu = evaluate(box, mu0)
            heapq.heappush(heap, (usd, box, mu))
            mu0 = mu
            if work >= max_work:
                break
        complete = len(heap) == G_EDGES
        while heap and heap[0][0] < found["target"] and work < max_work and complete:
            usd, box, mu = heapq.heappop(heap)
            t_lo, t_hi, g_lo, g_hi, a, b = box
            if b > a:  # the m's first, halved geometrically
                mid = max(a, max(x for x in range(a, b) if ms[x] * ms[x] <= ms[a] * ms[b]))
                kids = [(t_lo, t_hi, g_lo, g_hi, a, mid), (t_lo, t_hi, g_lo, g_hi, mid + 1, b)]
            elif t_hi - t_lo <= MIN_SPLIT * t_max and g_hi - g_lo <= MIN_SPLIT * t_max:
                heapq.heappush(heap, (usd, box, mu))
                break
            elif g_hi - g_lo >= t_hi - t_lo:
                mid = 0.5 * (g_lo + g_hi)
                kids = [(t_lo, t_hi, g_lo, mid, a, b), (t_lo, t_hi, mid, g_hi, a, b)]
            else:
                mid = 0.5 * (t_lo + t_hi)
                kids = [(t_lo, mid, g_lo, g_hi, a, b), (mid, t_hi, g_lo, g_hi, a, b)]
            for kid in kids:
                if work >= max_work:  # the other half keeps its parent's bound
                    heapq.heappush(heap, (usd, kid, mu))
                    continue
                got, mu2 = evaluate(kid, mu)
                heapq.heappush(heap, (max(got, usd), kid, mu2))
        if not complete:
            return Bounds({m: 0.0 for m in ms}, work, False, found["best"], found["priced"])
        per_m = {m: math.inf for m in ms}
        for usd, box, _ in heap:
            for x in range(box[4], box[5] + 1):
                per_m[ms[x]] = min(per_m[ms[x]], usd)
        least = min(per_m.values())
        return Bounds(per_m, work, least >= found["target"], found["best"], found["priced"])

    def _price(self, PS, PK, PN, at, found, seen) -> int:
        """The cheapest plan at the m's `at` made of the stages of a box's shortest paths
        (CompiledSearch.price: their unit counts free); one below the target becomes the
        best plan and lowers the target. Returns the work."""
        s = self.s
        last = [x for x in range(len(PN)) if PN[x] > 0][-PRICE_PATHS:]
        stages = {int(PS[x, y]) for x in last for y in range(int(PN[x]))}
        key = frozenset(stages)
        work = 0
        for m in at:
            if not stages or (m, key) in seen:
                continue
            seen.add((m, key))
            found["priced"] += 1
            plan, w = s.price(m, sorted(stages), found["target"], PRICE_WORK)
            work += w
            if plan is not None and plan.cost_usd < found["target"]:
                found["best"], found["target"] = plan, plan.cost_usd
        return work

    def _stage_terms(self, m: int):
        """Per stage at m (stage_terms), with w and the boundary's share times m, the least
        fills before each layer and drains after it, each stage's price per unit, and the
        least fill and drain of a whole plan (no plan's step at m is shorter)."""
        got = self._terms.get(m)
        if got is None:
            s = self.s
            first, count, E, F, K = s.stages
            t = s.t
            latency = float(s.p.latency_s) if s.transfers else 0.0
            A, C, W, U, SER, ST = stage_terms(first, count, E, F, s.L, s.M, t.par, m, s.beta,
                                              s.fs, s.transfers, latency, t.ext, t.lvl, s.lev,
                                              s.bytes)
            fills = least_fills(first, count, E, A, s.L, s.M)
            drains = least_drains(first, count, E, C, s.L, s.M)
            least_fd = float(least_drains(first, count, E, A + C, s.L, s.M)[0])
            price = t.price[s.stage_types()]
            if len(self._terms) >= TERMS_KEPT:
                self._terms.pop(next(iter(self._terms)))
            got = self._terms[m] = (A, C, W * m, U, SER * m, ST, fills, drains, price,
                                    least_fd)
        return got

    def sweep_work(self) -> int:
        """About the work of one first sweep (G_EDGES boxes of ITERATIONS paths over every
        stage's few unit counts): what a bound over a range of m's costs at the least."""
        return int(G_EDGES * ITERATIONS * 2 * len(self.s.stages[2]) // WORK_SCALE)
