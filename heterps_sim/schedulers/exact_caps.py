"""Exact search under shared availability caps: best-first label setting (numba).

Stages on the same type share its cap (sum of their units <= available[j]), which couples
stages that the DP of exact_kernels.py costs independently. Given that DP's table H (the
cheapest completion of layers a.. when a stage of type j starts at a, each stage within its own
unit bound but no sharing) this search finds the cheapest plan that respects the shared caps
of the `tracked` types, for one provisioning level:

    label  = (a, j, cost of the stages before a, units used so far per tracked type)
    extend = choose the stage a..b on type j and the next type j' (fixes its boundary link)
    order  = cost + H[a][j] (A*; H is exact without sharing, hence admissible and consistent)
    prune  = a label dominated at (a, j) by one no dearer using no more of any tracked cap;
             a label whose cost + H reaches the incumbent (or the caller's bound `ub`)

The first time the smallest open key reaches the incumbent, the incumbent is optimal. After
`max_labels` labels the search stops with the best complete plan found so far, unproven.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .exact_kernels import INF, INVALID, K_LEAST, OK, SUM, option

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
def capped_search(oct_t, odt_t, aoct_t, run_t, ext, lvl, price, kmax, batch, par, binv, budget,
                  thr_floor, guard_binv, guard_floor, allow_cuts, h, cidx, capv, ub,
                  max_labels):
    """Returns status, (n, first, last, type, next type) of the plan, its cost, labels made."""
    m, n_l = oct_t.shape
    n_c = capv.shape[0]
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
        if h[0, j] < inc_cost:
            cost[n], lpos[n], ltyp[n], parent[n], alive[n], link[n] = 0.0, 0, j, -1, True, -1
            head[j] = n
            hn = _heap_push(hkey, hpos, hid, hn, h[0, j], 0, n)
            n += 1
    limit_hit = False
    while hn > 0 and not limit_hit:
        key, lid, hn = _heap_pop(hkey, hpos, hid, hn)
        if key >= inc_cost:
            break
        if not alive[lid]:
            continue
        a, j, c0 = lpos[lid], ltyp[lid], cost[lid]
        cj, kcap, lj, pj = -1, kmax[j], lvl[j], price[j]
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
            if b == n_l - 1:
                st, k, val, et = option(alpha, so, sd, pj, kcap, batch, par, binv, K_LEAST,
                                        budget, thr_floor, guard_binv, guard_floor, SUM, False)
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
            st, k, val, et = option(alpha, so, sd + ext[b, lj], pj, kcap, batch, par, binv,
                                    K_LEAST, budget, thr_floor, guard_binv, guard_floor, SUM,
                                    False)
            if st == INVALID:  # the fastest link already fails: every slower one does too
                continue
            lst[lj], lk[lj], lval[lj], ldone[lj] = st, k, val, True
            for j2 in range(m):
                if (j2 == j and not allow_cuts) or h[p, j2] == INF:
                    continue
                v = min(lvl[j2], lj)
                if not ldone[v]:
                    st, k, val, et = option(alpha, so, sd + ext[b, v], pj, kcap, batch, par,
                                            binv, K_LEAST, budget, thr_floor, guard_binv,
                                            guard_floor, SUM, False)
                    lst[v], lk[v], lval[v], ldone[v] = st, k, val, True
                if lst[v] != OK:
                    continue
                nc = c0 + lval[v]
                pri = nc + h[p, j2]
                if pri >= inc_cost:
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
                hn = _heap_push(hkey, hpos, hid, hn, pri, p, n)
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
