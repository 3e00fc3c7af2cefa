"""Exact search under shared availability caps: Lagrange bounds + best-first label setting.

Stages on the same type share its cap (sum of their units <= available[j]), which couples
stages that the DP of schedulers/exact/kernels.py costs independently. For one provisioning level, given
that DP's table H (the cheapest completion of layers a.. when a stage of type j starts at a,
each stage within its own unit bound, caps not shared), CapSolver finds the cheapest plan that
respects the shared caps of the `tracked` types (the caps some plan broke):

    bound  = max over a few subgradient steps of f_lam - sum lam_j cap_j, f_lam the DP with
             price_j + lam_j on the tracked types (a Lagrange relaxation of the caps); a DP
             plan that fits every cap is an incumbent, optimal when it meets the bound
    label  = (a, j, cost of the stages before a, units used so far per tracked type)
    extend = choose the stage a..b on type j and the next type j' (fixes its boundary link)
    order  = the larger of cost + H[a][j] and the Lagrange bound of the label (A*)
    prune  = a label dominated at (a, j) by one no dearer using no more of any tracked cap;
             a label whose key reaches the incumbent (or the caller's bound `ub`)

The first time the smallest open key reaches the incumbent, the incumbent is optimal. After
`max_labels` labels the search stops with the best complete plan found so far, unproven.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from heterps_sim.schedulers.exact.kernels import INF, INVALID, K_LEAST, OK, SUM, dm_of, option

PROVEN, NONE_BELOW_UB, LIMIT, LIMIT_NO_PLAN = 0, 1, 2, 3


@njit(cache=True)
def _less(key, pos, i, j):
    return key[i] < key[j] or (key[i] == key[j] and pos[i] > pos[j])


@njit(cache=True)
def _heap_push(key, pos, ids, n, k, p, lid):
    key[n], pos[n], ids[n] = k, p, lid
    i = n
    while i > 0:
        up = (i - 1) // 2
        if not _less(key, pos, i, up):
            break
        key[i], key[up] = key[up], key[i]
        pos[i], pos[up] = pos[up], pos[i]
        ids[i], ids[up] = ids[up], ids[i]
        i = up
    return n + 1


@njit(cache=True)
def _heap_pop(key, pos, ids, n):
    k, lid = key[0], ids[0]
    n -= 1
    key[0], pos[0], ids[0] = key[n], pos[n], ids[n]
    i = 0
    while True:
        left, right, small = 2 * i + 1, 2 * i + 2, i
        if left < n and _less(key, pos, left, small):
            small = left
        if right < n and _less(key, pos, right, small):
            small = right
        if small == i:
            break
        key[i], key[small] = key[small], key[i]
        pos[i], pos[small] = pos[small], pos[i]
        ids[i], ids[small] = ids[small], ids[i]
        i = small
    return k, lid, n


@njit(cache=True)
def _grow(cost, lpos, ltyp, parent, alive, link, used, hkey, hpos, hid):
    size = cost.shape[0] * 2
    c2, p2, t2, pa2 = np.empty(size), np.empty(size, np.int64), np.empty(size, np.int64), \
        np.empty(size, np.int64)
    al2, li2 = np.empty(size, np.bool_), np.empty(size, np.int64)
    u2 = np.zeros((size, used.shape[1]), np.int64)
    hk2, hp2, hi2 = np.empty(size), np.empty(size, np.int64), np.empty(size, np.int64)
    n = cost.shape[0]
    c2[:n], p2[:n], t2[:n], pa2[:n], al2[:n], li2[:n] = cost, lpos, ltyp, parent, alive, link
    u2[:n], hk2[:n], hp2[:n], hi2[:n] = used, hkey, hpos, hid
    return c2, p2, t2, pa2, al2, li2, u2, hk2, hp2, hi2


@njit(cache=True)
def capped_search(oct_t, odt_t, aoct_t, run_t, ext, lvl, price, kmax, batch, par, mt, binv, budget,
                  thr_floor, guard_binv, guard_floor, allow_cuts, h, h_lag, lam, lam_cap, cidx,
                  capv, ub, max_labels):
    """Best plan below `ub` under the tracked caps.

    h: the DP's cost-to-go (no sharing); h_lag: the same DP with each tracked type's price
    raised by its multiplier lam[c], and lam_cap = sum lam[c] * cap[c]. A label's key is the
    larger of cost + h and (cost + sum lam * used) + h_lag - lam_cap, both lower bounds on any
    completion (the second because the completion uses at most cap - used more units).
    Returns status, (n, first, last, type, next type) of the plan, its cost, labels made.
    """
    m, n_l = oct_t.shape
    n_c = capv.shape[0]
    flag, step_oh, layer_oh, net, mcap, cum_p, cum_s, cum_a, lat2, m_batch, k_batch, w = mt
    size = 1024
    cost, lpos, ltyp = np.empty(size), np.empty(size, np.int64), np.empty(size, np.int64)
    parent, alive, link = np.empty(size, np.int64), np.empty(size, np.bool_), \
        np.empty(size, np.int64)
    used = np.zeros((size, n_c), np.int64)
    hkey, hpos, hid = np.empty(size), np.empty(size, np.int64), np.empty(size, np.int64)
    head = np.full((n_l + 1) * m, -1, np.int64)
    new_used = np.zeros(n_c, np.int64)
    n_v = ext.shape[1]
    lst, lk, lval = np.zeros(n_v, np.int64), np.zeros(n_v, np.int64), np.zeros(n_v)
    ldone = np.zeros(n_v, np.bool_)
    n = hn = 0
    inc, inc_cost = -1, ub
    for j in range(m):
        key = max(h[0, j], h_lag[0, j] - lam_cap)
        if key < inc_cost:
            cost[n], lpos[n], ltyp[n], parent[n], alive[n], link[n] = 0.0, 0, j, -1, True, -1
            head[j] = n
            hn = _heap_push(hkey, hpos, hid, hn, key, 0, n)
            n += 1
    limit_hit = False
    while hn > 0 and not limit_hit:
        key, lid, hn = _heap_pop(hkey, hpos, hid, hn)
        if key >= inc_cost:
            break
        if not alive[lid]:
            continue
        a, j, c0 = lpos[lid], ltyp[lid], cost[lid]
        cj, kcap, lj, pj, bj = -1, kmax[j], lvl[j], price[j], budget / price[j]
        lag0 = c0
        for c in range(n_c):
            lag0 += lam[c] * used[lid, c]
        if cidx[j] >= 0:
            cj = cidx[j]
            kcap = min(kcap, capv[cj] - used[lid, cj])
        if kcap < 1:
            continue
        so = sd = sa = s1 = 0.0
        for b in range(a, n_l):
            if not run_t[j, b]:
                break
            so += oct_t[j, b]
            sd += odt_t[j, b]
            sa += aoct_t[j, b]
            s1 += oct_t[j, b] - aoct_t[j, b]
            if s1 + (0.0 if par else sd) > binv * (1.0 + 1e-12) + 1e-14 * (so + sd):
                break
            alpha = sa / so if so > 0.0 else 0.0
            dm = dm_of(flag, step_oh, layer_oh, net, mcap, cum_p, cum_s, cum_a, lat2, m_batch,
                       k_batch, w, j, a, b, kcap)
            if b == n_l - 1:
                st, k, val, et = option(alpha, so, sd, pj, bj, kcap, batch, par, binv, K_LEAST,
                                        thr_floor, guard_binv, guard_floor, SUM, False, dm)
                if st == OK and c0 + val < inc_cost:
                    if n + 1 >= cost.shape[0]:
                        cost, lpos, ltyp, parent, alive, link, used, hkey, hpos, hid = _grow(
                            cost, lpos, ltyp, parent, alive, link, used, hkey, hpos, hid)
                    cost[n], lpos[n], ltyp[n], parent[n], alive[n], link[n] = \
                        c0 + val, n_l, -1, lid, True, -1
                    inc, inc_cost = n, c0 + val
                    n += 1
                break
            p = b + 1
            ldone[:] = False
            st, k, val, et = option(alpha, so, sd + ext[b, lj], pj, bj, kcap, batch, par, binv,
                                    K_LEAST, thr_floor, guard_binv, guard_floor, SUM, False, dm)
            if st == INVALID:  # the fastest link already fails: every slower one does too
                continue
            lst[lj], lk[lj], lval[lj], ldone[lj] = st, k, val, True
            for j2 in range(m):
                if (j2 == j and not allow_cuts) or h[p, j2] == INF:
                    continue
                v = min(lvl[j2], lj)
                if not ldone[v]:
                    st, k, val, et = option(alpha, so, sd + ext[b, v], pj, bj, kcap, batch, par,
                                            binv, K_LEAST, thr_floor, guard_binv, guard_floor,
                                            SUM, False, dm)
                    lst[v], lk[v], lval[v], ldone[v] = st, k, val, True
                if lst[v] != OK:
                    continue
                nc = c0 + lval[v]
                lag = lag0 + lval[v]
                if cj >= 0:
                    lag += lam[cj] * lk[v]
                key = max(nc + h[p, j2], lag + h_lag[p, j2] - lam_cap)
                if key >= inc_cost:
                    continue
                for c in range(n_c):
                    new_used[c] = used[lid, c]
                if cj >= 0:
                    new_used[cj] += lk[v]
                s = p * m + j2
                if _dominated(s, nc, new_used, head, link, alive, cost, used):
                    continue
                if n + 1 >= cost.shape[0]:
                    cost, lpos, ltyp, parent, alive, link, used, hkey, hpos, hid = _grow(
                        cost, lpos, ltyp, parent, alive, link, used, hkey, hpos, hid)
                cost[n], lpos[n], ltyp[n], parent[n], alive[n], link[n] = nc, p, j2, lid, True, \
                    head[s]
                used[n, :] = new_used
                head[s] = n
                hn = _heap_push(hkey, hpos, hid, hn, key, p, n)
                n += 1
                if n >= max_labels:
                    limit_hit = True
                    break
            if limit_hit:
                break
    if limit_hit:
        status = LIMIT if inc >= 0 else LIMIT_NO_PLAN
    else:
        status = PROVEN if inc >= 0 else NONE_BELOW_UB
    cnt, first, last, typ, nxt = _plan_of(inc, lpos, ltyp, parent, n_l)
    return status, cnt, first, last, typ, nxt, inc_cost, n


@njit(cache=True)
def _dominated(s, nc, new_used, head, link, alive, cost, used):
    """Is (nc, new_used) dominated at state s? Labels it dominates are retired on the way."""
    n_c = new_used.shape[0]
    prev, lab = -1, head[s]
    while lab != -1:
        nxt = link[lab]
        if alive[lab] and cost[lab] <= nc:
            worse = True
            for c in range(n_c):
                if used[lab, c] > new_used[c]:
                    worse = False
                    break
            if worse:
                return True
        if alive[lab] and nc <= cost[lab]:
            better = True
            for c in range(n_c):
                if new_used[c] > used[lab, c]:
                    better = False
                    break
            if better:
                alive[lab] = False
        if not alive[lab]:
            if prev == -1:
                head[s] = nxt
            else:
                link[prev] = nxt
        else:
            prev = lab
        lab = nxt
    return False


@njit(cache=True)
def _plan_of(inc, lpos, ltyp, parent, n_l):
    first = np.zeros(n_l, np.int64)
    last = np.zeros(n_l, np.int64)
    typ = np.zeros(n_l, np.int64)
    nxt = np.zeros(n_l, np.int64)
    if inc < 0:
        return 0, first, last, typ, nxt
    cnt, lab = 0, inc
    while parent[lab] != -1:
        pr = parent[lab]
        first[cnt], last[cnt], typ[cnt] = lpos[pr], lpos[lab] - 1, ltyp[pr]
        nxt[cnt] = ltyp[lab]  # -1 for the completed plan's end
        cnt += 1
        lab = pr
    return cnt, first[:cnt][::-1].copy(), last[:cnt][::-1].copy(), typ[:cnt][::-1].copy(), \
        nxt[:cnt][::-1].copy()


class CapSolver:
    """Solves one level of the sweep exactly when the DP's plan breaks a shared cap.

    1. Lagrange: raise the price of each tracked type j by a multiplier lam_j >= 0 and rerun
       the DP; f_lam - sum lam_j cap_j is a lower bound on the capped optimum (a few
       subgradient steps, warm-started from the previous level). A DP plan that fits every
       cap is an incumbent; one whose cost meets the bound is optimal.
    2. If the bound already shows the level cannot beat the best plan, skip the level.
    3. Otherwise A* (capped_search) with the larger of the two lower bounds as its heuristic.
    Only caps some plan broke are tracked (a cap the answer breaks joins and the level is
    solved again); tracked caps stay tracked for the rest of the sweep.
    """

    ITERATIONS = 8
    """Subgradient steps per level (each one DP pass)."""

    def __init__(self, sweep) -> None:
        self.sweep = sweep
        self.tracked: set[int] = set()
        self.lam = np.zeros(sweep.t.m)
        self.labels = self.searches = 0

    def solve(self, h, relaxed, binv: float, thr_floor: float, level: float):
        """(plan or None, lower bound on f at this level); see _Sweep._solve."""
        sw = self.sweep
        self.tracked |= sw.broken_caps(relaxed)
        while True:
            tracked = np.array(sorted(self.tracked), np.int64)
            caps = np.array([sw.problem.available[j] for j in tracked], np.int64)
            bound, h_lag, lam, incumbent = self._lagrange(tracked, caps, h, relaxed, binv,
                                                          thr_floor, level)
            lower = max(relaxed.per_hour, bound)
            if incumbent is not None and incumbent.per_hour <= lower * (1 + 1e-12):
                return incumbent, incumbent.per_hour  # meets the bound: optimal
            if sw.beyond(lower, level):
                return None, lower
            ub = sw.per_hour_bound()
            if incumbent is not None:
                ub = min(ub, incumbent.per_hour)
            cidx = np.full(sw.t.m, -1, np.int64)
            cidx[tracked] = np.arange(len(tracked))
            t = sw.t
            status, n, *stages, cost, labels = capped_search(
                t.oct_t, t.odt_t, t.aoct_t, t.run_t, t.ext, t.lvl, t.price, t.kmax, t.batch,
                t.par, t.mt, binv, sw.budget, thr_floor, sw.guard_binv, sw.floor, sw.allow_cuts, h,
                h_lag, lam, float(lam @ caps), cidx, caps, ub, sw.config.max_labels)
            self.labels += int(labels)
            self.searches += 1
            if status in (LIMIT, LIMIT_NO_PLAN):
                sw.proven = False
            if n > 0:
                found = sw.found(n, stages, binv)
                if sw.misses_limit(found):
                    sw.guard = True
                    return sw._solve(binv, thr_floor, level)
                more = sw.broken_caps(found) - self.tracked
                if more:
                    self.tracked |= more
                    continue
                return found, (found.per_hour if status == PROVEN else lower)
            if status == NONE_BELOW_UB:
                if incumbent is not None and ub == incumbent.per_hour:
                    return incumbent, incumbent.per_hour  # nothing cheaper exists
                if sw.best is None:
                    sw.stop_reason = self._why_none()
                return None, ub  # nothing below the stop bound (inf: nothing at all)
            if incumbent is not None:
                return incumbent, lower
            sw.stop_reason = sw.stop_reason or (
                f"the capped search stopped at max_labels={sw.config.max_labels} without "
                "finding a plan that fits the availability caps; the problem may still be "
                "feasible (raise max_labels)")
            return None, INF

    def _lagrange(self, tracked, caps, h0, relaxed, binv: float, thr_floor: float,
                  level: float):
        """Subgradient ascent on the multipliers: (bound, its H, its lam, incumbent or None)."""
        sw = self.sweep
        lam = self.lam[tracked].copy()
        best = (relaxed.per_hour, h0, np.zeros(len(tracked)))
        incumbent, scale, stalled = None, 1.0, 0
        for it in range(self.ITERATIONS):
            if it == 0 and not lam.any():
                h, plan = h0, relaxed
            else:
                price = sw.t.price.copy()
                price[tracked] += lam
                h, plan = sw.dp(price, binv, thr_floor)
                if plan is None:
                    break
            bound = float(h[0].min()) - float(lam @ caps)
            if bound > best[0] * (1 + 1e-12):
                best, stalled = (bound, h, lam.copy()), 0
            else:
                stalled += 1
                if stalled >= 2:
                    scale, stalled = scale / 2, 0
            if not sw.broken_caps(plan) and (incumbent is None
                                             or plan.per_hour < incumbent.per_hour):
                incumbent = plan
            if incumbent is not None and incumbent.per_hour <= best[0] * (1 + 1e-12):
                break
            if sw.beyond(best[0], level):
                break  # the level will be skipped
            grad = sw.units(plan)[tracked] - caps
            norm = float(grad @ grad)
            if norm == 0:
                break
            target = incumbent.per_hour if incumbent is not None else best[0] * 1.05
            lam = np.maximum(0.0, lam + scale * max(target - bound, 1e-12 * target) / norm * grad)
        self.lam[tracked] = best[2]
        return best[0], best[1], best[2], incumbent

    def _why_none(self) -> str:
        sw = self.sweep
        caps = ", ".join(f"{n}={a}" for n, a in zip(sw.problem.type_names, sw.problem.available)
                         if a is not None)
        return (f"no plan reaches {sw.limit:.6g} samples/s within the availability caps "
                f"({caps}): stages on one type share its units")
