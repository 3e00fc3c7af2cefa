"""Numba kernels of the exact scheduler: one DP pass over (segment, type, next bandwidth level).

A stage = layers a..b on type j followed by a stage on type j' (none for the last). Its units
depend on j' only through the boundary bandwidth min(net[j], net[j']), so the next types are
grouped by distinct network bandwidth ("levels", sorted ascending): for a type j on level l,
a next type on a level v < l gives bandwidth lev[v], and every next type on a level >= l gives
net[j]. Per start position p the pass keeps, per level, the best cost-to-go H[p][j'] of that
level, and over the levels >= l the best and second best (the second for when j' == j is not
allowed). One pass costs O(L^2/2 * M * levels) option evaluations instead of O(L^2/2 * M^2).

Every option is costed with exactly the arithmetic of `cost.StageTerms` (same operations in
the same order, sequential sums over the stage's layers), so the ceil() decisions agree with
the reference model; all in float64.

Objectives (`objective`):
    SUM         minimise sum of price_j * k over stages  (cost per hour of a plan)
    BOTTLENECK  minimise max of ET_g(k) over stages       (= maximise the plan's throughput)
    PER_SAMPLE  minimise sum of price_j * k * ET_g(k)      (B x a lower bound on cost/sample;
                default model: k * (ET_g(k) + W), W the startup's seconds per batch)
Unit rules (`k_rule`): K_LEAST the fewest units reaching the level B/binv (the cost model's
`least_units`); K_MAX every stage at its unit bound; K_BUDGET the most units a stage may have
while its own cost per sample stays within `budget` (see `option`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from heterps_sim.cost import amdahl_numba as amdahl
from heterps_sim.cost import dominant_numba as dominant
from heterps_sim.cost.amdahl import CEIL_TOLERANCE

INF = np.inf
SUM, BOTTLENECK, PER_SAMPLE = 0, 1, 2
K_LEAST, K_MAX, K_BUDGET = 0, 1, 2
OK, INVALID, FILTERED = 0, 1, 2
"""Option status. INVALID is monotone: a stage with more transfer time (a slower boundary
link) is INVALID too. FILTERED (throughput floor, TL guard) is not monotone."""


PAPER_DM = (0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0)
"""The `dm` of a stage under the paper model (its first entry, 0, says: paper)."""


@njit(cache=True)
def stage_dm(mt, j, first, last, kmax_j):
    """dm of layers first..last on type j: (1, F, R, Q, k_lo, k_hi, W) under the default
    model (cost/dominant.py: stage_extras; k_hi also within kmax_j; W the sweep's startup
    seconds per batch, see _option_default), PAPER_DM under the paper's.
    mt = _Tables.mt: (flag, step_oh, layer_oh, net, capacity, cum_param, cum_state, cum_act,
    lat2, batch, k_batch, W). Loops unpack mt once and call dm_of: taking an array out of a
    tuple costs a reference count each time (~30 ns, ~100 ns per call here)."""
    flag, step_oh, layer_oh, net, cap, cum_p, cum_s, cum_a, lat2, batch, k_batch, w = mt
    return dm_of(flag, step_oh, layer_oh, net, cap, cum_p, cum_s, cum_a, lat2, batch, k_batch,
                 w, j, first, last, kmax_j)


@njit(cache=True, inline="always")
def dm_of(flag, step_oh, layer_oh, net, cap, cum_p, cum_s, cum_a, lat2, batch, k_batch, w, j,
          first, last, kmax_j):
    """stage_dm with mt unpacked."""
    if flag == 0:
        return 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0
    fixed_s, bw_s, lat_s, k_lo, k_hi = dominant.stage_extras(
        step_oh[j], layer_oh[j], net[j], cap[j], cum_p, cum_s, cum_a, first, last, lat2, batch,
        k_batch)
    return 1.0, fixed_s, bw_s, lat_s, float(k_lo), float(min(k_hi, kmax_j)), w


@njit(cache=True)
def _option_default(alpha, p_s, s_s, pj, bj, batch, binv, k_rule, thr_floor, guard_binv,
                    guard_floor, objective, dm):
    """option() under the default model (cost/dominant.py): same statuses and values.

    Every unit is billed from the plan's start, W = startup_s x B / N seconds per batch on
    top of its step time, so a plan costs at least N / (3600 B) x sum_g price_g k_g (ET_g + W)
    (Thr <= B / ET_g, billed hours >= seconds / 3600): the budget and PER_SAMPLE bounds use
    k (ET(k) + W), the step time with F + W as its fixed part (it grows with k as k ET does).
    """
    f, r, q, w = dm[1], dm[2], dm[3], dm[6]
    k_lo, k_hi = int(dm[4]), int(dm[5])
    if k_lo > k_hi:
        return INVALID, 0, INF, INF
    if k_rule == K_LEAST:
        k = dominant.least_units(p_s, s_s, alpha, f, r, q, binv, k_lo, k_hi)
        if k < 0:
            return INVALID, 0, INF, INF
        if k * dominant.step_time(p_s, s_s, alpha, f + w, r, q, k) > bj:
            return INVALID, 0, INF, INF
    elif k_rule == K_MAX:
        k = dominant.fastest_units(p_s, s_s, alpha, f, r, q, k_lo, k_hi)
    else:
        kb = dominant.most_units_within(p_s, s_s, alpha, f + w, r, q, bj, k_lo, k_hi)
        if kb < 0:
            return INVALID, 0, INF, INF
        k = dominant.fastest_units(p_s, s_s, alpha, f, r, q, k_lo, kb)
    et = dominant.step_time(p_s, s_s, alpha, f, r, q, k)
    if objective == SUM:
        value = pj * k
    elif objective == PER_SAMPLE:
        value = pj * (k * (et + w))
    else:
        value = et
    if thr_floor > 0.0 and batch / et < thr_floor:
        return FILTERED, k, value, et
    if guard_binv > 0.0:
        k_tl = dominant.least_units(p_s, s_s, alpha, f, r, q, guard_binv, k_lo, k_hi)
        if k_tl < 0:
            return FILTERED, k, value, et
        if batch / dominant.step_time(p_s, s_s, alpha, f, r, q, k_tl) < guard_floor:
            return FILTERED, k, value, et
    return OK, k, value, et


@njit(cache=True)
def option(alpha, so, odt, pj, bj, kmax_j, batch, par, binv, k_rule, thr_floor, guard_binv,
           guard_floor, objective, need_et, dm):
    """Status, units, value, ET of one stage option.

    alpha = sum(alpha*oct)/OCT (0 when OCT = 0), so = OCT, odt = ODT with the boundary term
    (boundary_bytes / bandwidth + latency; none for the last stage). Mirrors `stage_terms` +
    `StageTerms.least_units` operation for operation: slack = B/theta - (1-alpha)P - S,
    k = max(1, ceil(alpha P / slack - 1e-9)). INVALID when no k <= kmax_j reaches the level,
    or when the stage alone costs more per sample than the budget: k ET(k) = k c + alpha P >
    bj = budget / price (c = the Amdahl time), which bounds the cost of any plan holding it
    (Thr <= this stage's B/ET). The value is pj * k (SUM; pj: the price the objective uses,
    the type's price plus any Lagrange multiplier), pj * k * ET(k) (PER_SAMPLE) or ET
    (BOTTLENECK). FILTERED when B/ET(k) <
    thr_floor, or (guard_binv > 0) when the stage provisioned at the throughput limit misses
    it (B/ET(k_TL) < guard_floor): the reference's feasibility test. ET is computed (else
    NaN) only when a filter, the BOTTLENECK objective or need_et asks for it.
    """
    if par:
        p_s = so + odt
        s_s = 0.0
    else:
        p_s = so
        s_s = odt
    if dm[0] != 0.0:
        return _option_default(alpha, p_s, s_s, pj, bj, batch, binv, k_rule, thr_floor,
                               guard_binv, guard_floor, objective, dm)
    if k_rule == K_LEAST:
        slack = amdahl.slack(binv, p_s, s_s, alpha)
        if slack <= 0.0:
            return INVALID, 0, INF, INF
        units = amdahl.units_for(p_s, alpha, slack)
        if units > kmax_j:  # kmax_j is whole: the same as testing before the ceiling
            return INVALID, 0, INF, INF
        k = int(units)
        if k < 1:
            k = 1
        if k * amdahl.serial_time(p_s, s_s, alpha) + alpha * p_s > bj:
            return INVALID, 0, INF, INF
    elif k_rule == K_MAX:
        k = kmax_j
    else:
        c = amdahl.serial_time(p_s, s_s, alpha)
        top = bj - alpha * p_s  # k units fit the budget while k c <= top
        if top < c:
            return INVALID, 0, INF, INF
        if c <= 0.0 or top >= c * kmax_j:
            k = kmax_j
        else:
            k = int(math.floor(top / c))
    et = np.nan
    if need_et or thr_floor > 0.0 or objective == BOTTLENECK:
        et = amdahl.step_time(p_s, s_s, alpha, k)
    if objective == SUM:
        value = pj * k
    elif objective == PER_SAMPLE:  # price * k * ET(k): the stage's own cost per batch
        value = pj * (k * amdahl.serial_time(p_s, s_s, alpha) + alpha * p_s)
    else:
        value = et
    if thr_floor > 0.0 and batch / et < thr_floor:
        return FILTERED, k, value, et
    if guard_binv > 0.0:
        slack = amdahl.slack(guard_binv, p_s, s_s, alpha)
        if slack <= 0.0:
            return FILTERED, k, value, et
        k_tl = max(1, int(amdahl.units_for(p_s, alpha, slack)))
        if batch / amdahl.step_time(p_s, s_s, alpha, k_tl) < guard_floor:
            return FILTERED, k, value, et
    return OK, k, value, et


@njit(cache=True)
def dp_pass(oct_t, odt_t, aoct_t, run_t, ext, lvl, order, price, kmax, batch, par, mt, obj_price,
            binv, k_rule, budget, thr_floor, guard_binv, guard_floor, objective, allow_cuts,
            two_stages=False):
    """One backward DP pass; H[a, j] = best value of layers a.. with a stage of type j at a.
    two_stages: leave out the one stage over the whole model (plans of two stages or more).

    ext[b, v] = boundary_bytes[b] / lev[v] + latency. Returns H, the choices (end layer;
    group: -1 last stage, v < V a level, V the levels >= the type's own) and the group tables
    needed to rebuild the plan. Options are skipped only on bounds that cannot cut the best.
    """
    m, n_l = oct_t.shape
    n_v = ext.shape[1]
    h = np.full((n_l + 1, m), INF)
    ch_b = np.full((n_l, m), -1, np.int64)
    ch_g = np.full((n_l, m), -2, np.int64)
    lv_best = np.full((n_l + 1, n_v), INF)
    lv_arg = np.full((n_l + 1, n_v), -1, np.int64)
    s1_val = np.full((n_l + 1, n_v), INF)
    s1_arg = np.full((n_l + 1, n_v), -1, np.int64)
    s2_val = np.full((n_l + 1, n_v), INF)
    s2_arg = np.full((n_l + 1, n_v), -1, np.int64)
    flag, step_oh, layer_oh, net, cap, cum_p, cum_s, cum_a, lat2, m_batch, k_batch, w = mt
    k_low = 1.0
    use_break = k_rule == K_LEAST
    skip_ok = not (objective == BOTTLENECK and k_rule == K_LEAST)
    units_break = objective == SUM and k_rule == K_LEAST
    additive = objective != BOTTLENECK
    theta_b = (1.0 - 1e-12) / binv
    for a in range(n_l - 1, -1, -1):
        for j in range(m):
            if not run_t[j, a]:
                continue
            best, best_b, best_g = INF, -1, -2
            pj, bj, kj, lj = obj_price[j], budget / price[j], kmax[j], lvl[j]
            so = sd = sa = s1 = 0.0
            for b in range(a, n_l):
                if not run_t[j, b]:
                    break
                so += oct_t[j, b]
                sd += odt_t[j, b]
                sa += aoct_t[j, b]
                if use_break:
                    # (1-alpha_g) OCT_g (+ ODT_g when serial) only grows with b and bounds the
                    # Amdahl time from below: past B/theta no longer stage can reach theta.
                    s1 += oct_t[j, b] - aoct_t[j, b]
                    lower = s1 + (0.0 if par else sd)
                    if lower > binv * (1.0 + 1e-12) + 1e-14 * (so + sd):
                        break
                if units_break:
                    # alpha P >= sum alpha*oct and slack <= B/theta, so k >= sa * theta / B:
                    # this bound only grows with b, and every option value is >= price * k.
                    k_low = max(1.0, math.ceil(sa * theta_b - CEIL_TOLERANCE))
                    if pj * k_low >= best:
                        break
                alpha = sa / so if so > 0.0 else 0.0
                dm = dm_of(flag, step_oh, layer_oh, net, cap, cum_p, cum_s, cum_a, lat2, m_batch,
                           k_batch, w, j, a, b, kj)
                if b == n_l - 1:
                    if two_stages and a == 0:
                        break  # the whole model in one stage: left out
                    st, k, val, et = option(alpha, so, sd, pj, bj, kj, batch, par, binv, k_rule,
                                            thr_floor, guard_binv, guard_floor,
                                            objective, False, dm)
                    if st == OK and val < best:
                        best, best_b, best_g = val, b, -1
                    break
                p = b + 1
                if allow_cuts or s1_arg[p, lj] != j:
                    g_same = s1_val[p, lj]
                else:
                    g_same = s2_val[p, lj]
                g_any = s1_val[p, 0]  # the best of all types at p
                if g_any == INF:
                    continue  # nothing can follow this stage
                if skip_ok and (pj * k_low + g_any if units_break else g_any) >= best:
                    continue  # no option ending at b can win
                st, k, v0, et = option(alpha, so, sd + ext[b, lj], pj, bj, kj, batch, par, binv,
                                       k_rule, thr_floor, guard_binv, guard_floor,
                                       objective, False, dm)
                if st == INVALID:
                    continue
                if st == OK and g_same < INF:
                    cand = v0 + g_same if additive else max(v0, g_same)
                    if cand < best:
                        best, best_b, best_g = cand, b, n_v
                for v in range(lj - 1, -1, -1):
                    gv = lv_best[p, v]
                    if gv == INF:
                        continue
                    if skip_ok:
                        # a slower link never needs fewer units (nor less time per unit),
                        # so v0 bounds this option's value
                        low = v0 + gv if additive else max(v0, gv)
                        if low >= best:
                            continue
                    st, k, val, et = option(alpha, so, sd + ext[b, v], pj, bj, kj, batch, par, binv,
                                            k_rule, thr_floor, guard_binv, guard_floor,
                                            objective, False, dm)
                    if st == INVALID:
                        break
                    if st == FILTERED:
                        continue
                    cand = val + gv if additive else max(val, gv)
                    if cand < best:
                        best, best_b, best_g = cand, b, v
            h[a, j] = best
            ch_b[a, j] = best_b
            ch_g[a, j] = best_g
        _group_tables(h, a, lvl, order, lv_best, lv_arg, s1_val, s1_arg, s2_val, s2_arg)
    return h, ch_b, ch_g, lv_arg, s1_arg, s2_arg


@njit(cache=True)
def _group_tables(h, a, lvl, order, lv_best, lv_arg, s1_val, s1_arg, s2_val, s2_arg):
    """Per level: best H[a] of the level; over levels >= v: best and second best (distinct j)."""
    m = h.shape[1]
    for j in range(m):
        v = lvl[j]
        if h[a, j] < lv_best[a, v]:
            lv_best[a, v] = h[a, j]
            lv_arg[a, v] = j
    b1, a1, b2, a2 = INF, -1, INF, -1
    for idx in range(m):  # types by level, highest level first
        j = order[idx]
        x = h[a, j]
        if x < b1:
            b2, a2, b1, a1 = b1, a1, x, j
        elif x < b2:
            b2, a2 = x, j
        if idx == m - 1 or lvl[order[idx + 1]] != lvl[j]:
            v = lvl[j]
            s1_val[a, v], s1_arg[a, v], s2_val[a, v], s2_arg[a, v] = b1, a1, b2, a2


@njit(cache=True)
def reconstruct(h, ch_b, ch_g, lv_arg, s1_arg, s2_arg, lvl, allow_cuts):
    """Stages (first, last, type, next type or -1) of the best plan; n = 0 when none."""
    n_l, m = ch_b.shape
    n_v = lv_arg.shape[1]
    first = np.zeros(n_l, np.int64)
    last = np.zeros(n_l, np.int64)
    typ = np.zeros(n_l, np.int64)
    nxt = np.zeros(n_l, np.int64)
    j = 0
    for jj in range(m):
        if h[0, jj] < h[0, j]:
            j = jj
    if h[0, j] == INF:
        return 0, first, last, typ, nxt
    a, n = 0, 0
    while True:
        b, g = ch_b[a, j], ch_g[a, j]
        first[n], last[n], typ[n] = a, b, j
        if g == -1:
            nxt[n] = -1
            return n + 1, first, last, typ, nxt
        p = b + 1
        if g < n_v:
            nj = lv_arg[p, g]
        elif allow_cuts or s1_arg[p, lvl[j]] != j:
            nj = s1_arg[p, lvl[j]]
        else:
            nj = s2_arg[p, lvl[j]]
        nxt[n] = nj
        n += 1
        a, j = p, nj


@njit(cache=True)
def stage_sums(j, first, last, oct_t, odt_t, aoct_t):
    """OCT, ODT (no boundary term) and alpha of layers first..last on type j, summed in order."""
    so = sd = sa = 0.0
    for i in range(first, last + 1):
        so += oct_t[j, i]
        sd += odt_t[j, i]
        sa += aoct_t[j, i]
    return so, sd, sa / so if so > 0.0 else 0.0


@njit(cache=True)
def stage_values(n, first, last, typ, nxt, oct_t, odt_t, aoct_t, ext, lvl, price, kmax, batch,
                 par, mt, binv):
    """Units, ET and terms (OCT, ODT with boundary, alpha) of each stage, as the DP costs them."""
    ks = np.zeros(n, np.int64)
    ets = np.zeros(n)
    terms = np.zeros((n, 10))
    for g in range(n):
        j = typ[g]
        so, sd, alpha = stage_sums(j, first[g], last[g], oct_t, odt_t, aoct_t)
        odt = sd + ext[last[g], min(lvl[j], lvl[nxt[g]])] if nxt[g] >= 0 else sd
        dm = stage_dm(mt, j, first[g], last[g], kmax[j])
        st, k, val, et = option(alpha, so, odt, price[j], INF, kmax[j], batch, par, binv,
                                K_LEAST, -1.0, -1.0, -1.0, SUM, True, dm)
        ks[g], ets[g] = k, et
        terms[g, 0], terms[g, 1], terms[g, 2] = so, odt, alpha
        for x in range(7):
            terms[g, 3 + x] = dm[x]
    return ks, ets, terms


@njit(cache=True)
def next_theta(terms, ks, kmax_of_stage, batch, par):
    """Smallest level above which some stage of the plan needs more units (or cannot reach).

    For a stage with K units, least_units(theta) <= K exactly while alpha P / slack <= K + 1e-9,
    i.e. theta <= B / ((1-alpha)P + S + alpha P / (K + 1e-9)). Step a relative 1e-12 above that
    bound and confirm, with the same arithmetic as the DP, that the stage's units really grow
    there (else step again), so the sweep always progresses; the level range skipped is a
    relative ~1e-12, far inside the cost model's own 1e-9 ceil tolerance.
    """
    best = INF
    for g in range(ks.shape[0]):
        so, odt, alpha = terms[g, 0], terms[g, 1], terms[g, 2]
        dm = (terms[g, 3], terms[g, 4], terms[g, 5], terms[g, 6], terms[g, 7], terms[g, 8],
              terms[g, 9])
        p_s, s_s = (so + odt, 0.0) if par else (so, odt)
        k = ks[g]
        if dm[0] != 0.0:  # default: k serves while ET(k) <= (B / theta) (1 + 1e-12)
            denom = dominant.step_time(p_s, s_s, alpha, dm[1], dm[2], dm[3], k)
        else:
            denom = amdahl.serial_time(p_s, s_s, alpha) + alpha * p_s / (k + CEIL_TOLERANCE)
        if denom <= 0.0:
            continue
        theta = batch / denom * (1.0 + 1e-12)
        for _ in range(64):
            st, k2, val, et = option(alpha, so, odt, 1.0, INF, kmax_of_stage[g], batch, par,
                                     batch / theta, K_LEAST, -1.0, -1.0, -1.0, SUM, False, dm)
            if st != OK or k2 > k:
                break
            theta *= 1.0 + 1e-12
        if theta < best:
            best = theta
    return best
