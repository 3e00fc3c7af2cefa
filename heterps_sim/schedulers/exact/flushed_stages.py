"""The stages a flushed plan may hold, once per problem, for the compiled search
(flushed_kernel.py).

stage_table       for each first layer i and type j the run of last layers e that fit
                  (runnable, memory within the unit range, and non-splitting work
                  F + sum (1 - alpha) OCT within the limit's step time: each only gets worse
                  as e grows, so the run ends at the first that fails), with the sums
                  cost.stage_terms makes (sequential, as kernels.stage_sums).
dominated_stages  a stage on type j is left out when another type j2 runs the same layers at
                  least as well in every term the closed form and the bill read: price,
                  splitting work alpha P and step-end work (1 - alpha) P + S + F with any
                  boundary the stage may carry, network (its boundaries and all-reduce), unit
                  range, startup, and j2 has no availability cap. cost/flush.py's step time
                  never falls when one stage's work, step-end phase, all-reduce or messages
                  grow (gpipe; 1F1B without interface queues), so swapping j for j2 never
                  costs more and the optimum is kept. Under 1F1B with contention a stage's
                  interface queue is its messages less its own compute, not monotone in the
                  work: nothing is left out there.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from heterps_sim.cost import dominant_numba as dominant


@njit(cache=True)
def stage_table(oct_t, odt_t, aoct_t, run_t, kmax, par, step_oh, layer_oh, net, capm, cum_p,
                cum_s, cum_a, lat2, batch, k_batch, sparse, ends, types, fixed_cuts, t_max):
    """(first, count, E, F, K): stages first[i, j] .. first[i, j] + count[i, j] - 1 are
    layers i..E[s] on type j with F[s] = (OCT, ODT without the boundary, alpha (summed as
    kernels.stage_sums sums them), the default model's fixed seconds, all-reduce bandwidth
    and latency seconds, embedding bytes per sample) and K[s] = its unit range.
    `ends`: the layers a stage may end at (the last always); fixed_cuts: only the first of
    them at or after i."""
    M, L = oct_t.shape
    first = np.zeros((L, M), np.int64)
    count = np.zeros((L, M), np.int64)
    cap = 1024
    E = np.zeros(cap, np.int64)
    F = np.zeros((cap, 7))
    K = np.zeros((cap, 2), np.int64)
    n = 0
    for i in range(L):
        for j in range(M):
            first[i, j] = n
            if not types[i, j]:
                continue
            so = sd = sa = serial = sb = 0.0
            for e in range(i, L):
                if not run_t[j, e]:
                    break
                so += oct_t[j, e]
                sd += odt_t[j, e]
                sa += aoct_t[j, e]
                serial += oct_t[j, e] - aoct_t[j, e]
                sb += sparse[e]
                fixed_s, bw_s, lat_s, k_lo, k_hi = dominant.stage_extras(
                    step_oh[j], layer_oh[j], net[j], capm[j], cum_p, cum_s, cum_a, i, e, lat2,
                    batch, k_batch)
                k_hi = min(k_hi, kmax[j])
                k_lo = max(1, k_lo)
                # (1 - alpha) P >= sum (1 - alpha_i) oct_i, and S = ODT when odt is serial:
                # a lower bound on the stage's step-end phase that only grows with e
                if fixed_s + serial + (0.0 if par else sd) > t_max or k_lo > k_hi:
                    break
                if not (ends[e] or e == L - 1):
                    continue
                if n >= cap:
                    cap *= 2
                    E2 = np.zeros(cap, np.int64)
                    F2 = np.zeros((cap, 7))
                    K2 = np.zeros((cap, 2), np.int64)
                    E2[:n] = E[:n]
                    F2[:n] = F[:n]
                    K2[:n] = K[:n]
                    E, F, K = E2, F2, K2
                E[n] = e
                F[n, 0] = so
                F[n, 1] = sd
                F[n, 2] = sa / so if so > 0.0 else 0.0
                F[n, 3] = fixed_s
                F[n, 4] = bw_s
                F[n, 5] = lat_s
                F[n, 6] = sb
                K[n, 0] = k_lo
                K[n, 1] = k_hi
                n += 1
                count[i, j] += 1
                if fixed_cuts:
                    break
    return first, count, E[:n].copy(), F[:n].copy(), K[:n].copy()


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
def dominated_stages(first, count, E, F, K, L, M, par, price, net, startup, capped, types,
                     bnd_max):
    """A mask over the stages: True where another allowed type's stage on the same layers
    dominates it (module docstring; ties keep the lower type index). bnd_max[e]: the most
    boundary seconds a stage ending at e may carry (its slowest possible link; 0 at the last
    layer)."""
    out = np.zeros(E.shape[0], np.bool_)
    at = np.full((L, M), -1, np.int64)  # at[e, j]: the stage i..e on type j, for one i
    for i in range(L):
        at[:, :] = -1
        for j in range(M):
            for s in range(first[i, j], first[i, j] + count[i, j]):
                at[E[s], j] = s
        for e in range(i, L):
            b = bnd_max[e]
            for j in range(M):
                s = at[e, j]
                if s < 0:
                    continue
                for j2 in range(M):
                    t = at[e, j2]
                    if t < 0 or j2 == j or capped[j2] or not types[i, j2]:
                        continue
                    if _better(F, K, s, t, j, j2, par, price, net, startup, b):
                        out[s] = True
                        break
    return out


@njit(cache=True, inline="always")
def _better(F, K, s, t, j, j2, par, price, net, startup, b):
    """Does stage t (type j2) dominate stage s (type j) on the same layers? Ties: the lower
    type index wins."""
    if price[j2] > price[j] or net[j2] < net[j] or startup[j2] > startup[j]:
        return False
    if K[t, 0] > K[s, 0] or K[t, 1] < K[s, 1] or F[t, 3] > F[s, 3]:
        return False
    for x in (0.0, b):  # the splitting and step-end work, linear in the boundary seconds
        ws, us = _work(F[s, 0], F[s, 1] + x, F[s, 2], par, F[s, 3], 1)
        wt, ut = _work(F[t, 0], F[t, 1] + x, F[t, 2], par, F[t, 3], 1)
        if wt > ws or ut > us:
            return False
    if (price[j2] == price[j] and net[j2] == net[j] and startup[j2] == startup[j]
            and K[t, 0] == K[s, 0] and K[t, 1] == K[s, 1] and F[t, 3] == F[s, 3]):
        same = True
        for x in (0.0, b):
            ws, us = _work(F[s, 0], F[s, 1] + x, F[s, 2], par, F[s, 3], 1)
            wt, ut = _work(F[t, 0], F[t, 1] + x, F[t, 2], par, F[t, 3], 1)
            same = same and wt == ws and ut == us
        if same:
            return j2 < j
    return True


@njit(cache=True)
def compact(first, count, E, F, K, keep, L, M):
    """The table without the stages keep[s] is False."""
    first2 = np.zeros((L, M), np.int64)
    count2 = np.zeros((L, M), np.int64)
    n = int(keep.sum())
    E2 = np.zeros(n, np.int64)
    F2 = np.zeros((n, F.shape[1]))
    K2 = np.zeros((n, 2), np.int64)
    x = 0
    for i in range(L):
        for j in range(M):
            first2[i, j] = x
            for s in range(first[i, j], first[i, j] + count[i, j]):
                if keep[s]:
                    E2[x] = E[s]
                    F2[x] = F[s]
                    K2[x] = K[s]
                    x += 1
                    count2[i, j] += 1
    return first2, count2, E2, F2, K2
