"""The label sweep of schedulers/exact/flushed.py compiled by numba: the same labels, numbers
and dominance (the module docstring there says what they are), with bounds the Python
reference does not have. They only drop what cannot beat the ceiling, so both find the same
optimum (tested against each other and against brute force).

Two kernels, over the stages of flushed_stages.stage_table:

prefix_tables bounds on how the layers 0..i-1 before a suffix complete it, once per m
              (_prefix_tables' docstring).
search        the label sweep under a cost ceiling, within a work budget.

Labels live in flat arrays, layer after layer from the last: FL[x] = flushed_reference's
fields (D, f, PF, PB, Z, r1, n1, s, -net of the first type, w1, sa1) and a score (beam mode:
the least cost the bounds allow a plan holding it), IL[x] = (first type, units, last layer of
the first stage, parent label or -1), UL[x] = units of each capped type. q_all is the step's
PS pulls' pace Q, every plan's (flushed_reference's module docstring).

Every plan's price includes `fixed` USD/h (cost.reference.fixed_price_per_hour: the hosts
every plan pays for), added before the bill as cost.reference.job_cost adds it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from heterps_sim.cost import dominant_numba as dominant
from heterps_sim.cost import ps_stage_numba as ps_stage
from heterps_sim.schedulers.exact.flushed_stages import _work

NF = 12
"""Float fields of a label."""
DONE, TOO_MANY = 0, 1
LEVELS = 64
"""Time budgets (fractions of the limit's step time) at which a prefix's least price is
known (prefix_tables), unless the caller asks for more (CompiledSearch's `levels`). A stage's
fill and drain shift the budget left to the stages before it by whole levels, rounded down
(a cheaper bound, never a tighter one), so a table loses up to a level per stage of the
prefix: at large m a stage's fill and drain are a fraction of a level, and the deep plans
the optimum has there lose them all (certified.table_levels)."""
LEVELS_PER_UNIT = 16
"""A stage's passes over the levels in prefix_tables past LEVELS count one work unit per
this many levels (1,024 levels cost about 30 units' time more per stage than 64 on
synthetic-64x64, 12 more per stage for 256 levels on a 32x32 problem); at LEVELS a table
costs what it always did, one unit per stage option, so searches that never refine are
budgeted as before."""


@njit(cache=True, inline="always")
def job_cost(per_hour, fixed, startup_s, step_s, batch, cap, samples, gran):
    """cost.reference.job_cost of a plan of `per_hour` USD/h (its stages) + `fixed`."""
    if per_hour + fixed <= 0.0:
        return 0.0
    thr = cap
    if step_s > 0.0:
        thr = min(batch / step_s, cap)
    return (per_hour + fixed) * dominant.billed_hours(startup_s + samples / thr, gran)


@njit(cache=True, inline="always")
def _dominates(FL, UL, a, b, q, pending, beta, fs):
    """flushed_reference.dominates: the same relation on flat labels (pending: 1F1B's
    interface queue under contention)."""
    if (FL[a, 1] > FL[b, 1] or FL[a, 6] > FL[b, 6] or FL[a, 7] > FL[b, 7]
            or FL[a, 8] > FL[b, 8]):
        return False
    for c in range(UL.shape[1]):
        if UL[a, c] > UL[b, c]:
            return False
    e_pf = max(0.0, FL[a, 2] - FL[b, 2])
    e_x = 0.0
    if pending:
        ca = FL[a, 6] - 1.0
        cb = FL[b, 6] - 1.0
        wa, wb, sa, sb = FL[a, 9], FL[b, 9], FL[a, 10], FL[b, 10]
        e_x = max(0.0, ca * beta * wa - cb * beta * wb,
                  ca * (fs * sa - (1.0 - beta) * wa) - cb * (fs * sb - (1.0 - beta) * wb),
                  ca * ((1.0 - fs) * sa - (1.0 - beta) * wa)
                  - cb * ((1.0 - fs) * sb - (1.0 - beta) * wb))
    excess_y = max(0.0, (FL[a, 3] + FL[a, 4]) - (FL[b, 3] + FL[b, 4]), FL[a, 3] - FL[b, 3],
                   e_x, e_x + FL[a, 5] - FL[b, 5])
    return FL[a, 0] + e_pf + excess_y <= FL[b, 0]


@njit(cache=True, inline="always")
def paces(nn, w, before, after, beta, fs, contention, one_f_one_b):
    """(pf, pb) of a stage: flushed_reference.Search.paces."""
    pf = (1.0 - beta) * (nn - 1) * w
    pb = beta * (nn - 1) * w
    if contention and one_f_one_b:
        q = max(fs * after + (1.0 - fs) * before, fs * before + (1.0 - fs) * after)
        pb = max(pb, (nn - 1) * q - (1.0 - beta) * (nn - 1) * w)
    elif contention:
        pf = max(pf, fs * (nn - 1) * max(before, after))
        pb = max(pb, (1.0 - fs) * (nn - 1) * max(before, after))
    return pf, pb


@njit(cache=True, inline="always")
def level_floor(g, t_max, levels):
    """The least step of a prefix in level g of a table of `levels` levels (just above level
    g - 1's top, less a rounding margin): the step a lookup of that level may assume."""
    return t_max * max(g - 1, 0) / levels * (1.0 - 1e-9)


@njit(cache=True, inline="always")
def _level(budget, t_max, slack, levels):
    """The least level at or above `budget` x slack (0: none left; `levels`: the whole t_max).
    A lookup of a budget uses a slack > 1, a stage's own time one < 1, so rounding only ever
    lowers a bound."""
    if budget <= 0.0:
        return 0
    g = int(np.ceil(budget * slack / t_max * levels))
    return min(max(g, 1), levels)


# ---- bounds on a prefix ----------------------------------------------------------------

@njit(cache=True)
def prefix_tables(first, count, E, F, K, L, M, par, m, beta, fs, allreduce, transfers,
                  contention, one_f_one_b, pull_per_byte, holds, q_all, latency, ext, lvl,
                  lev, bytes_, price, t_max, levels):
    """Bounds on how the layers 0..i-1 before a suffix starting at i complete it. Each stage
    h of the prefix has a boundary after it (h is never the plan's last) on at most its own
    type's bandwidth, so its fill a_h, drain c_h, paces pf_h, pb_h and step-end phase r_h
    are at least those on net[j]. Then (cost/flush.py's T = A + PF + max_g (C_g + PB_g + r_g)):

    min_fill[i]  the least forward fill A_p of the prefix: T >= the suffix's own step + it;
    min_fd[i]    its least fill and drain: T >= the suffix's D + PF + PB + it;
    price[x, i]  its least USD per hour when X_p <= t_max x / levels, where
                     X_p = max_h (fills of the stages before h + a_h + c_h + pf_h + pb_h
                                  + r_h + fills and drains of the stages after h)
                 (pf_h with the step's pulls' pace Q = q_all, every plan's, as max(pf_h, Q),
                 and, when h holds embedding bytes, its pull stagger in pf_h and its pushes'
                 drain in r_h: cost/flush.py). Taking
                 g = h in T, every term of X_p is in it beside the suffix's D, so
                 T >= D_suffix + X_p (the fills before h are bounded by min_fill).
    pace[x, i]   its least USD per hour when V_p <= t_max x / levels, V_p = A_p + its largest
                 forward pace pf_h (with the pulls' bound): taking the suffix's stages as g in
                 T, T >= D_suffix + Y_suffix + A_p + PF >= D_suffix + Y_suffix + V_p (a cheap
                 prefix of slow units or few units on its embedding stage fills and paces the
                 forwards for the whole pipeline). V_p = max(V_before + a_h, fills before h
                 + a_h + pf_h), a DP like price's.

    The table is a DP over the prefix's last stage: X_p = max(X_before + a_h + c_h, own_h),
    the budget left to the stages before looked up at or above it (never a tighter bound)."""
    min_fill = np.full(L + 1, np.inf)
    min_fd = np.full(L + 1, np.inf)
    P = np.full((levels + 1, L + 1), np.inf)
    PV = np.full((levels + 1, L + 1), np.inf)
    PV[:, 0] = 0.0
    stage_price_v = np.empty(levels + 1)
    min_fill[0] = 0.0
    min_fd[0] = 0.0
    P[:, 0] = 0.0
    stage_price = np.empty(levels + 1)
    work = 0  # stage options (unit counts) tried: the tables' deterministic cost
    for a in range(L):
        if P[levels, a] == np.inf:
            continue
        for j in range(M):
            for s in range(first[a, j], first[a, j] + count[a, j]):
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
                a_fill = (1.0 - beta) * w + fs * ser + lat
                c_drain = beta * w + (1.0 - fs) * ser + lat
                min_fill[e + 1] = min(min_fill[e + 1], min_fill[a] + a_fill)
                min_fd[e + 1] = min(min_fd[e + 1], min_fd[a] + a_fill + c_drain)
                k_lo, k_hi = K[s, 0], K[s, 1]
                pull = pull_per_byte * F[s, 6]
                stage_price[:] = np.inf
                stage_price_v[:] = np.inf
                lowest = levels + 1
                lowest_v = levels + 1
                prev_n = m + 1
                for n in range(m, 0, -1):  # units ascending: the fewest for each level
                    k = max(k_lo, (m + n - 1) // n)
                    if k > k_hi or (lowest <= 1 and lowest_v <= 1):
                        break
                    nn = (m + k - 1) // k
                    if nn == prev_n:
                        continue
                    prev_n = nn
                    work += 1
                    ar = dominant.allreduce_time(F[s, 4], F[s, 5], k) if allreduce else 0.0
                    pf, pb = paces(nn, w, 0.0, ser, beta, fs, contention, one_f_one_b)
                    r = ar + u
                    if pull > 0.0:  # as search's options (h is never the plan's last stage)
                        pace_h, drain = ps_stage.stage_terms(pull, k, m, nn, (nn - 1) * w, w,
                                                             beta, holds, False)
                        pf = max(pf, pace_h)
                        r = max(r, drain)
                    pf = max(pf, q_all)
                    own = min_fill[a] + a_fill + c_drain + pf + pb + r
                    if own > t_max * (1.0 + 1e-12):
                        continue
                    g = _level(own, t_max, 1.0 - 1e-12, levels)
                    for x in range(g, lowest):
                        stage_price[x] = price[j] * k
                    lowest = min(lowest, g)
                    g = _level(min_fill[a] + a_fill + pf, t_max, 1.0 - 1e-12, levels)
                    for x in range(g, lowest_v):
                        stage_price_v[x] = price[j] * k
                    lowest_v = min(lowest_v, g)
                shift = int(np.floor(a_fill / t_max * levels * (1.0 - 1e-9)))
                for x in range(lowest_v, levels + 1):
                    pr = PV[max(x - shift, 0), a] + stage_price_v[x]
                    if pr < PV[x, e + 1]:
                        PV[x, e + 1] = pr
                # the level of the budget left before it, t_max x / levels - a - c, rounded
                # up (a whole level more at most: a cheaper bound, never a tighter one)
                shift = int(np.floor((a_fill + c_drain) / t_max * levels * (1.0 - 1e-9)))
                for x in range(lowest, levels + 1):
                    before = max(x - shift, 0)
                    pr = P[before, a] + stage_price[x]
                    if pr < P[x, e + 1]:
                        P[x, e + 1] = pr
                # the stage's passes over the levels past LEVELS (the stage option's unit
                # above has always stood for its passes over LEVELS)
                work += (levels - LEVELS) // LEVELS_PER_UNIT
    return min_fill, min_fd, P, PV, work


@njit(cache=True)
def breakpoints(P):
    """(start, levels): for each i, the levels where the prefix's least price drops
    (levels[start[i]:start[i + 1]], ascending): the only ones a bound needs to try."""
    G, L1 = P.shape
    start = np.zeros(L1 + 1, np.int64)
    out = np.zeros(G * L1, np.int64)
    n = 0
    for i in range(L1):
        start[i] = n
        last = np.inf
        for g in range(G):
            if P[g, i] < last:
                out[n] = g
                n += 1
                last = P[g, i]
    start[L1] = n
    return start, out[:n].copy()


@njit(cache=True, inline="always")
def _beats(f, D, t_lo, s, i, P, bp_start, bp_lev, fixed, t_max, batch, cap, samples, gran,
           ceiling):
    """(can some prefix complete a suffix (price f, fill and drain D, step at least t_lo,
    startup s) below `ceiling`?, levels tried: the work). Its X_p lies in a level g (price
    >= P[g, i]) and above the level below (T >= D + t_max (g - 1) / levels, P's rows being
    levels 0..levels); the cheapest levels first, after the cheapest price at the shortest
    step, which no level beats: a suffix that rules out costs one try, not one per level."""
    if bp_start[i + 1] == bp_start[i] or job_cost(
            f + P[bp_lev[bp_start[i + 1] - 1], i], fixed, s, max(t_lo, D), batch, cap, samples,
            gran) >= ceiling:
        return False, 1
    tried = 1
    for b in range(bp_start[i + 1] - 1, bp_start[i] - 1, -1):
        g = bp_lev[b]
        below = level_floor(g, t_max, P.shape[0] - 1)
        if D + below > t_max * (1.0 + 1e-12):
            continue
        tried += 1
        if job_cost(f + P[g, i], fixed, s, max(t_lo, D + below), batch, cap, samples,
                    gran) < ceiling:
            return True, tried
    return False, tried


@njit(cache=True, inline="always")
def _least(f, D, t_lo, s, i, P, bp_start, bp_lev, fixed, t_max, batch, cap, samples, gran):
    """The least cost _beats's levels allow a completion of the suffix (inf: none)."""
    least = np.inf
    for b in range(bp_start[i + 1] - 1, bp_start[i] - 1, -1):
        g = bp_lev[b]
        below = level_floor(g, t_max, P.shape[0] - 1)
        if D + below > t_max * (1.0 + 1e-12):
            continue
        least = min(least, job_cost(f + P[g, i], fixed, s, max(t_lo, D + below), batch, cap,
                                    samples, gran))
    return least


# ---- the sweep -------------------------------------------------------------------------

@njit(cache=True)
def search(first, count, E, F, K, starts_at, L, M, par, m, beta, fs, allreduce,
           transfers, contention, one_f_one_b, pull_per_byte, holds, q_all, latency, ext,
           lvl, lev, bytes_, price, net, startup, slot, avail, t_max, cap, samples, gran,
           batch, fixed, min_fill, min_fd, P, bp_start, bp_lev, PV, bpv_start, bpv_lev,
           incumbent, max_labels, max_work, beam):
    """(status, best label or -1, its cost, FL, IL, labels made, work): the cheapest plan
    below `incumbent` at m; TOO_MANY past max_labels labels or max_work units of work (stage
    options tried plus dominance tests: deterministic, unlike time). beam > 0: a heuristic,
    not a proof: each layer keeps only its `beam` labels of least score (a plan, fast)."""
    C = avail.shape[0]
    size = 1024
    FL = np.zeros((size, NF))
    IL = np.zeros((size, 4), np.int64)
    UL = np.zeros((size, max(C, 1)), np.int64)
    lo = np.zeros(L + 1, np.int64)
    hi = np.zeros(L + 1, np.int64)
    ceiling = incumbent * (1.0 - 1e-12)
    count_ = 0
    work = 0
    pos = 0
    best = -1
    t_least = min_fd[L]  # no plan's step is shorter than the whole model's least fill+drain
    pending = contention and one_f_one_b
    top = P.shape[0] - 1  # the table's last level: the whole t_max
    for i in range(L - 1, -1, -1):
        lo[i] = pos
        hi[i] = pos
        if not starts_at[i] or P[top, i] == np.inf:
            continue
        start = pos
        rest_fill = min_fill[i]
        rest_fd = min_fd[i]
        for j in range(M):
            f_lo0 = P[top, i]
            for s in range(first[i, j], first[i, j] + count[i, j]):
                e = E[s]
                last = e == L - 1
                p_lo = 0 if last else lo[e + 1]
                p_hi = 1 if last else hi[e + 1]
                k_lo, k_hi = K[s, 0], K[s, 1]
                f_lo = price[j] * k_lo + f_lo0
                so, sd, alpha, fixed_s = F[s, 0], F[s, 1], F[s, 2], F[s, 3]
                pull = pull_per_byte * F[s, 6]
                for q in range(p_lo, p_hi):
                    par_ = -1 if last else q
                    # suffixes come least USD per hour first: past the first whose cheapest
                    # completion reaches the ceiling at the least step any plan has, all do
                    if par_ >= 0 and job_cost(FL[par_, 1] + f_lo, fixed, startup[j], t_least,
                                              batch, cap, samples, gran) >= ceiling:
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
                    w, u = _work(so, odt, alpha, par, fixed_s, m)
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
                            return TOO_MANY, -1, np.inf, FL, IL, count_, work
                        sl = slot[j]
                        if sl >= 0:
                            used = k if par_ < 0 else UL[par_, sl] + k
                            if used > avail[sl]:
                                continue
                        ar = dominant.allreduce_time(F[s, 4], F[s, 5], k) if allreduce else 0.0
                        r = ar + u
                        pf, pb = paces(nn, w, 0.0, ser, beta, fs, contention, one_f_one_b)
                        if pull > 0.0:  # its units' pull stagger and its pushes' drain
                            pace_h, drain = ps_stage.stage_terms(
                                pull, k, m, nn, (nn - 1) * w, w, beta, holds, par_ < 0)
                            pf = max(pf, pace_h)
                            r = max(r, drain)
                        if par_ < 0:
                            D = a_fill + c_drain
                            f = price[j] * k
                            PF = pf
                            PB = pb
                            Z = r
                            st = startup[j]
                        else:
                            D = FL[par_, 0] + a_fill + c_drain
                            f = FL[par_, 1] + price[j] * k
                            PF = FL[par_, 2]
                            PB = FL[par_, 3]
                            Z = FL[par_, 4]
                            if contention:
                                # the boundary before the suffix's first stage: its queue
                                x = paces(FL[par_, 6], FL[par_, 9], ser, FL[par_, 10], beta,
                                          fs, contention, one_f_one_b)[1]
                                if x > PB:
                                    Z = max(Z - (x - PB), FL[par_, 5])
                                    PB = x
                                if not one_f_one_b:
                                    pf = max(pf, fs * (max(FL[par_, 6], float(nn)) - 1.0) * ser)
                            PF = max(PF, pf)
                            pb_new = max(PB, pb)
                            Z = max(Z - c_drain - (pb_new - PB), r)
                            PB = pb_new
                            st = max(FL[par_, 7], startup[j])
                        pace = D + max(PF, q_all) + PB
                        t_lo = max(pace + Z + rest_fill, pace + rest_fd)
                        if t_lo > t_max:
                            continue
                        ok, tried = _beats(f, D, t_lo, st, i, P, bp_start, bp_lev, fixed,
                                           t_max, batch, cap, samples, gran, ceiling)
                        work += tried // 4
                        if not ok:
                            continue
                        # the prefix's fill and forward pace after the suffix's drain and Y
                        ok, tried = _beats(f, D + PB + Z, t_lo, st, i, PV, bpv_start, bpv_lev,
                                           fixed, t_max, batch, cap, samples, gran, ceiling)
                        work += tried // 4
                        if not ok:
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
                        FL[pos, 7] = st
                        FL[pos, 8] = -net[j]
                        FL[pos, 9] = w if contention else 0.0
                        FL[pos, 10] = ser if contention else 0.0
                        if beam > 0:
                            FL[pos, 11] = _least(f, D, t_lo, st, i, P, bp_start, bp_lev, fixed,
                                                 t_max, batch, cap, samples, gran)
                        IL[pos, 0] = j
                        IL[pos, 1] = k
                        IL[pos, 2] = e
                        IL[pos, 3] = par_
                        for c in range(C):
                            UL[pos, c] = 0 if par_ < 0 else UL[par_, c]
                        if sl >= 0:
                            UL[pos, sl] += k
                        pos += 1
                        count_ += 1
                        # a beam holds at most its labels per layer and the current layer's
                        # candidates: the cap is on what it holds, not on what it made
                        if (pos if beam > 0 else count_) > max_labels:
                            return TOO_MANY, -1, np.inf, FL, IL, count_, work
        if beam > 0:  # a heuristic: the least scores, no dominance tests
            if pos - start > beam:
                work += pos - start
                pos = _truncate(FL, IL, UL, start, pos, beam)
        else:
            pos, work = _pareto(FL, IL, UL, start, pos, work, q_all, pending, beta, fs,
                                max_work)
        if work > max_work:
            return TOO_MANY, -1, np.inf, FL, IL, count_, work
        lo[i] = start
        hi[i] = pos
    best_cost = incumbent
    for x in range(lo[0], hi[0]):
        t = FL[x, 0] + max(FL[x, 2], q_all) + FL[x, 3] + FL[x, 4]
        if t > t_max:
            continue
        c = job_cost(FL[x, 1], fixed, FL[x, 7], t, batch, cap, samples, gran)
        if c < best_cost:
            best_cost = c
            best = x
    return DONE, best, best_cost, FL, IL, count_, work


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
def _truncate(FL, IL, UL, start, stop, beam):
    """Keep the `beam` labels of [start, stop) of least score, least f first again."""
    keep = np.argsort(FL[start:stop, 11], kind="mergesort")[:beam]
    keep = keep[np.argsort(FL[start:stop, 1][keep], kind="mergesort")]
    F = FL[start:stop][keep].copy()
    G = IL[start:stop][keep].copy()
    U = UL[start:stop][keep].copy()
    FL[start:start + beam] = F
    IL[start:start + beam] = G
    UL[start:start + beam] = U
    return start + beam


@njit(cache=True)
def _pareto(FL, IL, UL, start, stop, work, q, pending, beta, fs, max_work):
    """Keep the labels of [start, stop) that no other one dominates, compacted to the front
    (least f, then D, first); returns the new stop and the work with one unit per test.
    Past max_work it stops at once (the labels are then partly compacted: the caller gives
    up the search), so one layer's quadratic pass cannot run the budget over by millions."""
    n = stop - start
    if n <= 1:
        return stop, work
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
            work += 1
            if _dominates(FL, UL, z, y, q, pending, beta, fs):
                dominated = True
                break
        if work > max_work:
            return start + kept, work
        if not dominated:
            kept += 1
    return start + kept, work
