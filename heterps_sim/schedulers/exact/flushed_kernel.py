"""The label sweep of schedulers/exact/flushed.py compiled by numba (same numbers, same
dominance; the module docstring there says what they are), with bounds the Python reference
does not have (_prefix_bounds: a prefix's least price within the time a suffix leaves it, its
least fill and drain; suffixes scanned cheapest first with a break). They only drop what
cannot beat the incumbent, so both find the same optimum (tested).

Labels live in flat arrays, layer after layer from the last: FL[x] = (D, f, PF, PB, Z,
r_first, n_first, startup, pulls, -net of the first type), IL[x] = (first type, units, last
layer of the first stage, parent label or -1), UL[x] = units of each capped type. Stage terms
come from the exact scheduler's tables (sweep._tables) with its arithmetic (kernels.stage_sums,
kernels.dm_of), so a stage costs what cost.stage_terms says to the last rounding.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from heterps_sim.cost import dominant_numba as dominant
from heterps_sim.schedulers.exact.kernels import dm_of, stage_sums

NF = 10
"""Float fields of a label."""
DONE, TOO_MANY = 0, 1


@njit(cache=True, inline="always")
def _job_cost(per_hour, startup_s, step_s, batch, cap, samples, gran):
    if per_hour <= 0.0:
        return 0.0
    thr = cap
    if step_s > 0.0:
        thr = min(batch / step_s, cap)
    return per_hour * dominant.billed_hours(startup_s + samples / thr, gran)


@njit(cache=True, inline="always")
def _dominates(FL, UL, a, b):
    """flushed._dominates: the same relation on flat labels."""
    if (FL[a, 1] > FL[b, 1] or FL[a, 6] > FL[b, 6] or FL[a, 7] > FL[b, 7]
            or FL[a, 8] > FL[b, 8] or FL[a, 9] > FL[b, 9]):
        return False
    for c in range(UL.shape[1]):
        if UL[a, c] > UL[b, c]:
            return False
    excess_y = max(0.0, (FL[a, 3] + FL[a, 4]) - (FL[b, 3] + FL[b, 4]), FL[a, 3] - FL[b, 3],
                   FL[a, 5] - FL[b, 5])
    return FL[a, 0] + max(0.0, FL[a, 2] - FL[b, 2]) + excess_y <= FL[b, 0]


@njit(cache=True)
def search(oct_t, odt_t, aoct_t, run_t, ext, lvl, lev, price, kmax, batch, par,
           flag, step_oh, layer_oh, net, capm, cum_p, cum_s, cum_a, lat2, k_batch,
           m, beta, fs, allreduce, transfers, contention, pulls_q, latency, bytes_, sparse_cum,
           starts, slot, avail, t_max, cap, samples, gran, ends, types, fixed_cuts, incumbent,
           max_labels, max_work):
    """(status, best label or -1, its cost, FL, IL, UL, labels made); TOO_MANY past
    max_labels labels made or max_work stage options tried. fixed_cuts: a stage ends at the
    first end at or after its first layer (the plan's own cuts, no two stages merged)."""
    M, L = oct_t.shape
    C = avail.shape[0]
    size = 1024
    FL = np.zeros((size, NF))
    IL = np.zeros((size, 4), np.int64)
    UL = np.zeros((size, max(C, 1)), np.int64)
    lo = np.zeros(L + 1, np.int64)
    hi = np.zeros(L + 1, np.int64)
    starts_at = np.zeros(L + 1, np.bool_)
    starts_at[0] = True
    for e in range(L - 1):
        if ends[e]:
            starts_at[e + 1] = True
    next_end = np.full(L + 1, L - 1, np.int64)
    for e in range(L - 2, -1, -1):
        next_end[e] = e if ends[e] else next_end[e + 1]
    min_fill, min_fd, level_price = _prefix_bounds(
        oct_t, odt_t, aoct_t, run_t, kmax, batch, par, flag, step_oh, layer_oh, net, capm,
        cum_p, cum_s, cum_a, lat2, k_batch, m, beta, allreduce, price, t_max, ends, types,
        starts_at, next_end, fixed_cuts)
    count = 0
    work = 0  # stage options tried: what bounds the time when few of them become labels
    pos = 0
    best = -1
    for i in range(L - 1, -1, -1):
        if not starts_at[i]:
            lo[i] = pos
            hi[i] = pos
            continue
        start = pos
        rest_fill = min_fill[i]
        rest_fd = min_fd[i]
        t_least = min_fd[L]  # no plan's step is shorter than the whole model's least fill+drain
        for e in range(i, L):
            if not (ends[e] or e == L - 1) or (fixed_cuts and e != next_end[i]):
                continue
            last = e == L - 1
            p_lo = 0 if last else lo[e + 1]
            p_hi = 1 if last else hi[e + 1]
            sparse = sparse_cum[e + 1] - sparse_cum[i] > 0.0
            for j in range(M):
                if not types[i, j] or not _runs(run_t, j, i, e):
                    continue
                so, sd, alpha, dm, k_lo, k_hi = _stage(
                    j, i, e, oct_t, odt_t, aoct_t, flag, step_oh, layer_oh, net, capm, cum_p,
                    cum_s, cum_a, lat2, batch, k_batch, kmax)
                if k_lo > k_hi:
                    continue
                # the suffixes come least USD per hour first: past the first whose cheapest
                # completion costs the incumbent even at the least step time any plan has,
                # every later one does too
                f_lo = price[j] * k_lo + level_price[LEVELS, i]
                for q in range(p_lo, p_hi):
                    par_ = -1 if last else q
                    if par_ >= 0 and _job_cost(FL[par_, 1] + f_lo, starts[j], t_least, batch,
                                               cap, samples, gran) >= incumbent * (1.0 - 1e-12):
                        break
                    ser = 0.0
                    lat = 0.0
                    odt = sd
                    if par_ >= 0:
                        nj = IL[par_, 0]
                        v = min(lvl[j], lvl[nj])
                        odt = sd + ext[e, v]
                        if transfers:
                            ser = bytes_[e] / m / lev[v]
                            lat = latency
                    w, u = _work(so, odt, alpha, par, dm[1], m)
                    a_fill = (1.0 - beta) * w + fs * ser + lat
                    c_drain = beta * w + (1.0 - fs) * ser + lat
                    prev_n = m + 1
                    for n in range(m, 0, -1):
                        k = max(k_lo, (m + n - 1) // n)
                        if k > k_hi:
                            break
                        nn = (m + k - 1) // k
                        if nn == prev_n:
                            continue
                        prev_n = nn
                        work += 1
                        if work > max_work:
                            return TOO_MANY, -1, np.inf, FL, IL, UL, count
                        sl = slot[j]
                        if sl >= 0:
                            used = k if par_ < 0 else UL[par_, sl] + k
                            if used > avail[sl]:
                                continue
                        ar = dominant.allreduce_time(dm[2], dm[3], k) if allreduce else 0.0
                        r = ar + u
                        pf = (1.0 - beta) * (nn - 1) * w
                        pb = beta * (nn - 1) * w
                        if contention:
                            pf = max(pf, fs * (nn - 1) * ser)
                            pb = max(pb, (1.0 - fs) * (nn - 1) * ser)
                        pl = 1.0 if (sparse and nn > 1) else 0.0
                        if par_ < 0:
                            D = a_fill + c_drain
                            f = price[j] * k
                            PF = pf
                            PB = pb
                            Z = r
                            s = starts[j]
                        else:
                            D = FL[par_, 0] + a_fill + c_drain
                            f = FL[par_, 1] + price[j] * k
                            PF = FL[par_, 2]
                            PB = FL[par_, 3]
                            Z = FL[par_, 4]
                            if contention:
                                x = (1.0 - fs) * (FL[par_, 6] - 1.0) * ser
                                if x > PB:
                                    Z = max(Z - (x - PB), FL[par_, 5])
                                    PB = x
                                pf = max(pf, fs * (max(FL[par_, 6], float(nn)) - 1.0) * ser)
                            PF = max(PF, pf)
                            pb_new = max(PB, pb)
                            Z = max(Z - c_drain - (pb_new - PB), r)
                            PB = pb_new
                            s = max(FL[par_, 7], starts[j])
                            pl = max(pl, FL[par_, 8])
                        pace = D + max(PF, pulls_q if pl > 0.0 else 0.0) + PB
                        t_lo = max(pace + Z + rest_fill, pace + rest_fd)
                        if t_lo > t_max:
                            continue
                        rest_price = level_price[_level(t_max - D, t_max, 1.0 + 1e-9), i]
                        if _job_cost(f + rest_price, s, t_lo, batch, cap, samples,
                                     gran) >= incumbent * (1.0 - 1e-12):
                            continue
                        if pos >= FL.shape[0]:
                            FL, IL, UL = _grow(FL, IL, UL)
                        FL[pos, 0] = D
                        FL[pos, 1] = f
                        FL[pos, 2] = PF
                        FL[pos, 3] = PB
                        FL[pos, 4] = Z
                        FL[pos, 5] = r if (contention and nn > 1) else 0.0
                        FL[pos, 6] = float(nn) if contention else 1.0
                        FL[pos, 7] = s
                        FL[pos, 8] = pl
                        FL[pos, 9] = -net[j]
                        IL[pos, 0] = j
                        IL[pos, 1] = k
                        IL[pos, 2] = e
                        IL[pos, 3] = par_
                        for c in range(C):
                            UL[pos, c] = 0 if par_ < 0 else UL[par_, c]
                        if sl >= 0:
                            UL[pos, sl] += k
                        pos += 1
                        count += 1
                        if count > max_labels:
                            return TOO_MANY, -1, np.inf, FL, IL, UL, count
        pos = _pareto(FL, IL, UL, start, pos)
        lo[i] = start
        hi[i] = pos
    best_cost = incumbent
    for x in range(lo[0], hi[0]):
        t = FL[x, 0] + max(FL[x, 2], pulls_q if FL[x, 8] > 0.0 else 0.0) + FL[x, 3] + FL[x, 4]
        c = _job_cost(FL[x, 1], FL[x, 7], t, batch, cap, samples, gran)
        if c < best_cost:
            best_cost = c
            best = x
    return DONE, best, best_cost, FL, IL, UL, count


LEVELS = 32
"""Time budgets (fractions of the limit's step time) at which a prefix's least price is
known (_prefix_bounds)."""


@njit(cache=True, inline="always")
def _level(budget, t_max, slack):
    """The least budget level at or above `budget` x slack (0: none left; LEVELS: the whole
    t_max). A suffix's budget is looked up with a slack > 1 and a stage's time with none, so
    rounding never puts a stage that fits a suffix's budget above its level."""
    if budget <= 0.0:
        return 0
    g = int(np.ceil(budget * slack / t_max * LEVELS))
    return min(max(g, 1), LEVELS)


@njit(cache=True)
def _prefix_bounds(oct_t, odt_t, aoct_t, run_t, kmax, batch, par, flag, step_oh, layer_oh, net,
                   capm, cum_p, cum_s, cum_a, lat2, k_batch, m, beta, allreduce, price, t_max,
                   ends, types, starts_at, next_end, fixed_cuts):
    """Bounds on how a prefix of layers 0..i-1 completes a suffix (boundaries left out: they
    only add time).

    min_fill[i]: its least forward fill (T >= the suffix's own T + that);
    min_fd[i]: its least fill and drain (T >= the suffix's D + PF + PB + that, its Y being at
        least its PB);
    level_price[g, i]: its least USD per hour when every stage h of it has
        n_h w_h + r_h <= t_max g / LEVELS. A stage h before a suffix of fill and drain D has
        T >= D + a_h + c_h + pf_h + pb_h + r_h = D + n_h w_h + r_h, so a suffix leaves its
        prefix the budget t_max - D, and the level at or above it bounds the prefix's price."""
    M, L = oct_t.shape
    min_fill = np.full(L + 1, np.inf)
    min_fd = np.full(L + 1, np.inf)
    level_price = np.full((LEVELS + 1, L + 1), np.inf)
    min_fill[0] = 0.0
    min_fd[0] = 0.0
    level_price[:, 0] = 0.0
    stage_price = np.empty(LEVELS + 1)
    for e in range(L):
        if not (ends[e] or e == L - 1):
            continue
        for a in range(e + 1):
            if not starts_at[a] or min_fill[a] == np.inf or (fixed_cuts and next_end[a] != e):
                continue
            for j in range(M):
                if not types[a, j] or not _runs(run_t, j, a, e):
                    continue
                so, sd, alpha, dm, k_lo, k_hi = _stage(
                    j, a, e, oct_t, odt_t, aoct_t, flag, step_oh, layer_oh, net, capm, cum_p,
                    cum_s, cum_a, lat2, batch, k_batch, kmax)
                w, u = _work(so, sd, alpha, par, dm[1], m)
                if k_lo > k_hi:
                    continue
                min_fill[e + 1] = min(min_fill[e + 1], min_fill[a] + (1.0 - beta) * w)
                min_fd[e + 1] = min(min_fd[e + 1], min_fd[a] + w)
                # the fewest units for each level (more units: a higher price)
                stage_price[:] = np.inf
                lowest = LEVELS + 1
                for n in range(m, 0, -1):
                    k = max(k_lo, (m + n - 1) // n)
                    if k > k_hi or lowest <= 1:
                        break
                    nn = (m + k - 1) // k
                    ar = dominant.allreduce_time(dm[2], dm[3], k) if allreduce else 0.0
                    g = _level(nn * w + ar + u, t_max, 1.0)
                    if nn * w + ar + u > t_max:
                        continue
                    for x in range(g, lowest):
                        stage_price[x] = price[j] * k
                    lowest = min(lowest, g)
                for x in range(1, LEVELS + 1):
                    pr = level_price[x, a] + stage_price[x]
                    if pr < level_price[x, e + 1]:
                        level_price[x, e + 1] = pr
    return min_fill, min_fd, level_price


@njit(cache=True, inline="always")
def _runs(run_t, j, a, e):
    for x in range(a, e + 1):
        if not run_t[j, x]:
            return False
    return True


@njit(cache=True, inline="always")
def _stage(j, a, e, oct_t, odt_t, aoct_t, flag, step_oh, layer_oh, net, capm, cum_p, cum_s,
           cum_a, lat2, batch, k_batch, kmax):
    """Layers a..e on type j without its boundary: OCT, ODT, alpha (kernels.stage_sums), the
    default model's terms (kernels.dm_of) and the unit range [k_lo, k_hi]."""
    so, sd, alpha = stage_sums(j, a, e, oct_t, odt_t, aoct_t)
    dm = dm_of(flag, step_oh, layer_oh, net, capm, cum_p, cum_s, cum_a, lat2, batch, k_batch,
               0.0, j, a, e, kmax[j])
    return so, sd, alpha, dm, max(1, int(dm[4])), int(dm[5])


@njit(cache=True, inline="always")
def _work(so, odt, alpha, par, fixed_s, m):
    """(w, u): one microbatch's splitting work on one unit, the step-end phase's non-splitting
    work and fixed costs (as cost.stage_terms and cost/flush.py compute them)."""
    if par:
        p_s = so + odt
        s_s = 0.0
    else:
        p_s = so
        s_s = odt
    return alpha * p_s / m, (1.0 - alpha) * p_s + s_s + fixed_s


@njit(cache=True)
def _grow(FL, IL, UL):
    n = FL.shape[0] * 2
    F2 = np.zeros((n, FL.shape[1]))
    I2 = np.zeros((n, IL.shape[1]), np.int64)
    U2 = np.zeros((n, UL.shape[1]), np.int64)
    F2[:FL.shape[0]] = FL
    I2[:IL.shape[0]] = IL
    U2[:UL.shape[0]] = UL
    return F2, I2, U2


@njit(cache=True)
def _pareto(FL, IL, UL, start, stop):
    """Keep the labels of [start, stop) that no other one dominates, compacted to the front
    (least f, then D, first); returns the new stop."""
    n = stop - start
    if n <= 1:
        return stop
    by_d = np.argsort(FL[start:stop, 0], kind="mergesort")
    order = by_d[np.argsort(FL[start:stop, 1][by_d], kind="mergesort")]  # f, then D
    F = FL[start:stop].copy()
    G = IL[start:stop].copy()
    U = UL[start:stop].copy()
    kept = 0
    for t in range(n):
        x = order[t]
        FL[start + kept] = F[x]
        IL[start + kept] = G[x]
        UL[start + kept] = U[x]
        y = start + kept
        dominated = False
        for z in range(start, y):
            if _dominates(FL, UL, z, y):
                dominated = True
                break
        if not dominated:
            kept += 1
    return start + kept
