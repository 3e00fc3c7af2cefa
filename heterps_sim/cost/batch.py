"""The analytic cost model over many plans at once, for schedulers that sample or search.

A plan here is a type index per layer (stages = maximal runs of one type, the paper's
definition); `evaluate_assignments(problem, A)` costs every row of the (N, L) integer array A.
Same arithmetic as cost/reference.py, the reference it is tested against, compiled with numba and run in
parallel over plans (a plain numpy version did ~1e5 plans/s at 64 x 64 here).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from heterps_sim.core.problem import Problem
from heterps_sim.cost import amdahl_numba as amdahl
from heterps_sim.cost import dominant_numba as dominant
from heterps_sim.cost.reference import MAX_REPLICAS, MODES, ps_cap
from heterps_sim.cost.terms import boundary_latency_s, model_arrays


@dataclass(frozen=True, slots=True)
class BatchResult:
    cost_usd: np.ndarray
    """USD per plan; inf where infeasible."""
    throughput: np.ndarray
    """Samples/s per plan at its provisioning; 0 where some stage cannot reach the limit."""
    cost_per_hour: np.ndarray
    feasible: np.ndarray


@numba.njit(cache=True, inline="always")
def _least_units(theta, batch, alpha, par, ser):
    slack = amdahl.slack(batch / theta, par, ser, alpha)
    if slack <= 0.0:
        return -1
    return max(1, int(amdahl.units_for(par, alpha, slack)))


@numba.njit(cache=True)
def _provision_cost(theta, batch, num_samples, num_stages, st_type, st_alpha, st_par, st_ser,
                    price, caps, used, fixed_stage, fixed_k):
    """Cost of provisioning every stage for level theta (stage fixed_stage gets fixed_k).

    Returns (cost, throughput, per_hour); cost = inf when some stage or a cap fails.
    """
    thr = np.inf
    per_hour = 0.0
    used[:] = 0
    for g in range(num_stages):
        if g == fixed_stage:
            k = fixed_k
        else:
            k = _least_units(theta, batch, st_alpha[g], st_par[g], st_ser[g])
        if k < 0 or k > MAX_REPLICAS:
            return np.inf, 0.0, 0.0
        j = st_type[g]
        used[j] += k
        if caps[j] >= 0 and used[j] > caps[j]:
            return np.inf, 0.0, 0.0
        et = st_par[g] * ((1.0 - st_alpha[g]) + st_alpha[g] / k) + st_ser[g]
        thr = min(thr, batch / et)
        per_hour += price[j] * k
    return num_samples / thr / 3600.0 * per_hour, thr, per_hour


@numba.njit(cache=True, parallel=True)
def _evaluate_kernel(assign, oct_s, odt_s, alpha, boundary, net, latency, price, caps,
                     batch, limit, num_samples, odt_parallel, exact):
    num_plans, num_layers = assign.shape
    num_types = oct_s.shape[1]
    cost = np.full(num_plans, np.inf)
    thr_out = np.zeros(num_plans)
    per_hour_out = np.zeros(num_plans)
    for n in numba.prange(num_plans):
        st_type = np.empty(num_layers, np.int64)
        st_alpha = np.empty(num_layers)
        st_par = np.empty(num_layers)
        st_ser = np.empty(num_layers)
        used = np.zeros(num_types, np.int64)
        num_stages, ok = 0, True
        s_oct = s_odt = s_aoct = 0.0
        for i in range(num_layers):
            j = assign[n, i]
            o = oct_s[i, j]
            if math.isnan(o):
                ok = False
                break
            s_oct += o
            s_odt += odt_s[i, j]
            s_aoct += alpha[i, j] * o
            last = i == num_layers - 1
            if last or assign[n, i + 1] != j:
                if not last:
                    s_odt += boundary[i] / min(net[j], net[assign[n, i + 1]]) + latency
                st_type[num_stages] = j
                st_alpha[num_stages] = s_aoct / s_oct if s_oct > 0 else 0.0
                if odt_parallel:
                    st_par[num_stages], st_ser[num_stages] = s_oct + s_odt, 0.0
                else:
                    st_par[num_stages], st_ser[num_stages] = s_oct, s_odt
                num_stages += 1
                s_oct = s_odt = s_aoct = 0.0
        if not ok:
            continue
        c, thr, ph = _provision_cost(limit, batch, num_samples, num_stages, st_type, st_alpha,
                                     st_par, st_ser, price, caps, used, -1, 0)
        if thr > 0.0:
            thr_out[n], per_hour_out[n] = thr, ph
        if c == np.inf or thr < limit * (1 - 1e-12):
            continue
        if exact:
            c, thr, ph = _exact_sweep(c, thr, ph, batch, limit, num_samples, num_stages, st_type,
                                      st_alpha, st_par, st_ser, price, caps, used)
        cost[n], thr_out[n], per_hour_out[n] = c, thr, ph
    return cost, thr_out, per_hour_out


@numba.njit(cache=True)
def _exact_sweep(c, thr, ph, batch, limit, num_samples, num_stages, st_type, st_alpha, st_par,
                 st_ser, price, caps, used):
    """Exact provisioning: try every stage throughput B/ET_g(k) >= TL as the bottleneck level."""
    ceiling = np.inf
    for g in range(num_stages):
        ceiling = min(ceiling, batch / amdahl.serial_time(st_par[g], st_ser[g], st_alpha[g]))
    hours_floor = num_samples / 3600.0 / ceiling
    best_c, best_thr, best_ph = c, thr, ph
    for g in range(num_stages):
        k0 = _least_units(limit, batch, st_alpha[g], st_par[g], st_ser[g])
        k_max = MAX_REPLICAS if caps[st_type[g]] < 0 else min(MAX_REPLICAS, caps[st_type[g]])
        for k in range(k0, k_max + 1):
            if price[st_type[g]] * k * hours_floor > best_c * (1 + 1e-12):
                break  # any plan giving stage g k units costs at least this much
            et = st_par[g] * ((1.0 - st_alpha[g]) + st_alpha[g] / k) + st_ser[g]
            theta = batch / et
            if theta > ceiling * (1 + 1e-12):
                break
            c2, thr2, ph2 = _provision_cost(theta, batch, num_samples, num_stages, st_type,
                                            st_alpha, st_par, st_ser, price, caps, used, -1, 0)
            if c2 < best_c * (1 - 1e-12):
                best_c, best_thr, best_ph = c2, thr2, ph2
    return best_c, best_thr, best_ph


@numba.njit(cache=True)
def _default_cost(theta, batch, num_samples, num_stages, st, price, caps, used, ps_limit,
                  startup, granularity):
    """Default model: (cost, throughput, per_hour) of provisioning every stage for level theta;
    st[g] = (type, alpha, P, S, F, R, Q, k_lo, k_hi); cost = inf when a stage or cap fails."""
    thr = ps_limit
    per_hour = 0.0
    used[:] = 0
    for g in range(num_stages):
        j = int(st[g, 0])
        k = dominant.least_units(st[g, 2], st[g, 3], st[g, 1], st[g, 4], st[g, 5], st[g, 6],
                                 batch / theta, int(st[g, 7]), int(st[g, 8]))
        if k < 0:
            return np.inf, 0.0, 0.0
        used[j] += k
        if caps[j] >= 0 and used[j] > caps[j]:
            return np.inf, 0.0, 0.0
        et = dominant.step_time(st[g, 2], st[g, 3], st[g, 1], st[g, 4], st[g, 5], st[g, 6], k)
        thr = min(thr, batch / et)
        per_hour += price[j] * k
    cost = per_hour * dominant.billed_hours(startup + num_samples / thr, granularity)
    return cost, thr, per_hour


BLOCK = 512
"""Plans per parallel work item of the default kernel (its buffers are allocated per block)."""


@numba.njit(cache=True, parallel=True)
def _default_kernel(assign, oct_s, odt_s, alpha, boundary, net, lat_term, price, caps, batch,
                    limit, num_samples, odt_parallel, exact, step_oh, layer_oh, capacity,
                    cum_param, cum_state, cum_act, lat2, k_batch, startup_j, granularity,
                    ps_limit):
    """The default model over many plans: stages as in _evaluate_kernel, each costed with
    cost/dominant.py (the reference's StageTerms, operation for operation).

    Each stage is provisioned at the limit as soon as it ends (what _default_cost does for a
    whole plan, in the same order, so the same floats), and a plan stops at its first stage
    that cannot be (most random plans): every failure gives cost inf, throughput 0."""
    num_plans, num_layers = assign.shape
    num_types = oct_s.shape[1]
    cost = np.full(num_plans, np.inf)
    thr_out = np.zeros(num_plans)
    per_hour_out = np.zeros(num_plans)
    if limit > ps_limit * (1 + 1e-12):
        return cost, thr_out, per_hour_out
    binv = batch / limit
    for block in numba.prange((num_plans + BLOCK - 1) // BLOCK):
        st = np.empty((num_layers, 9))
        used = np.zeros(num_types, np.int64)
        for n in range(block * BLOCK, min(num_plans, (block + 1) * BLOCK)):
            used[:] = 0
            num_stages, ok, start, startup = 0, True, 0, 0.0
            thr, per_hour = ps_limit, 0.0
            s_oct = s_odt = s_aoct = 0.0
            for i in range(num_layers):
                j = assign[n, i]
                o = oct_s[i, j]
                if math.isnan(o):
                    ok = False
                    break
                s_oct += o
                s_odt += odt_s[i, j]
                s_aoct += alpha[i, j] * o
                last = i == num_layers - 1
                if last or assign[n, i + 1] != j:
                    if not last:
                        s_odt += boundary[i] / min(net[j], net[assign[n, i + 1]]) + lat_term
                    fixed_s, bw_s, lat_s, k_lo, k_hi = dominant.stage_extras(
                        step_oh[j], layer_oh[j], net[j], capacity[j], cum_param, cum_state,
                        cum_act, start, i, lat2, batch, k_batch)
                    if k_lo > k_hi:
                        ok = False
                        break
                    a = s_aoct / s_oct if s_oct > 0 else 0.0
                    if odt_parallel:
                        par, ser = s_oct + s_odt, 0.0
                    else:
                        par, ser = s_oct, s_odt
                    k = dominant.least_units(par, ser, a, fixed_s, bw_s, lat_s, binv, k_lo, k_hi)
                    if k < 0:
                        ok = False
                        break
                    used[j] += k
                    if caps[j] >= 0 and used[j] > caps[j]:
                        ok = False
                        break
                    et = dominant.step_time(par, ser, a, fixed_s, bw_s, lat_s, k)
                    thr = min(thr, batch / et)
                    per_hour += price[j] * k
                    if exact:
                        st[num_stages, 0], st[num_stages, 1] = j, a
                        st[num_stages, 2], st[num_stages, 3] = par, ser
                        st[num_stages, 4], st[num_stages, 5] = fixed_s, bw_s
                        st[num_stages, 6], st[num_stages, 7] = lat_s, k_lo
                        st[num_stages, 8] = k_hi
                    startup = max(startup, startup_j[j])
                    num_stages += 1
                    start = i + 1
                    s_oct = s_odt = s_aoct = 0.0
            if not ok:
                continue
            thr_out[n], per_hour_out[n] = thr, per_hour
            if thr < limit * (1 - 1e-12):
                continue
            c = per_hour * dominant.billed_hours(startup + num_samples / thr, granularity)
            if exact:
                c, thr, per_hour = _default_sweep(c, thr, per_hour, batch, limit, num_samples,
                                                  num_stages, st, price, caps, used, ps_limit,
                                                  startup, granularity)
            cost[n], thr_out[n], per_hour_out[n] = c, thr, per_hour
    return cost, thr_out, per_hour_out


@numba.njit(cache=True)
def _default_sweep(c, thr, ph, batch, limit, num_samples, num_stages, st, price, caps, used,
                   ps_limit, startup, granularity):
    """Exact provisioning, default model: every stage throughput B/ET_g(k) >= TL (k from the
    units at TL up) as the bottleneck level, as the reference's _candidate_thetas."""
    ceiling = ps_limit
    for g in range(num_stages):
        k = dominant.fastest_units(st[g, 2], st[g, 3], st[g, 1], st[g, 4], st[g, 5], st[g, 6],
                                   int(st[g, 7]), int(st[g, 8]))
        ceiling = min(ceiling, batch / dominant.step_time(st[g, 2], st[g, 3], st[g, 1], st[g, 4],
                                                          st[g, 5], st[g, 6], k))
    hours_floor = num_samples / 3600.0 / ceiling
    best_c, best_thr, best_ph = c, thr, ph
    if ps_limit < np.inf and ps_limit <= ceiling * (1 + 1e-12):
        c2, thr2, ph2 = _default_cost(ps_limit, batch, num_samples, num_stages, st, price, caps,
                                      used, ps_limit, startup, granularity)
        if c2 < best_c * (1 - 1e-12):
            best_c, best_thr, best_ph = c2, thr2, ph2
    for g in range(num_stages):
        j = int(st[g, 0])
        k0 = dominant.least_units(st[g, 2], st[g, 3], st[g, 1], st[g, 4], st[g, 5], st[g, 6],
                                  batch / limit, int(st[g, 7]), int(st[g, 8]))
        k_max = int(st[g, 8]) if caps[j] < 0 else min(int(st[g, 8]), caps[j])
        for k in range(k0, k_max + 1):
            if price[j] * k * hours_floor > best_c * (1 + 1e-12):
                break  # any plan giving stage g k units costs at least this much
            theta = batch / dominant.step_time(st[g, 2], st[g, 3], st[g, 1], st[g, 4], st[g, 5],
                                               st[g, 6], k)
            if theta > ceiling * (1 + 1e-12) or theta < limit:
                continue
            c2, thr2, ph2 = _default_cost(theta, batch, num_samples, num_stages, st, price, caps,
                                          used, ps_limit, startup, granularity)
            if c2 < best_c * (1 - 1e-12):
                best_c, best_thr, best_ph = c2, thr2, ph2
    return best_c, best_thr, best_ph


def evaluate_assignments(problem: Problem, assignments: np.ndarray, mode: str = "least") -> BatchResult:
    """Cost N plans given as an (N, L) array of type indices (stages = maximal runs)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    a = np.ascontiguousarray(assignments, dtype=np.int64)
    if a.ndim != 2 or a.shape[1] != problem.num_layers:
        raise ValueError(f"assignments must have shape (N, {problem.num_layers})")
    if a.size and (a.min() < 0 or a.max() >= problem.num_types):
        raise ValueError(f"type indices must lie in [0, {problem.num_types})")
    if problem.cost_model == "default":
        m, c = model_arrays(problem), problem.unit_costs
        cost, thr, per_hour = _default_kernel(
            a, problem.oct_s, problem.odt_s, problem.alpha, problem.boundary_bytes,
            problem.network_bytes_per_s, boundary_latency_s(problem), problem.price_per_hour,
            problem.available_array, float(problem.batch_size), float(problem.throughput_limit),
            float(problem.num_samples), bool(problem.odt_parallel), mode == "exact", m.step_oh,
            m.layer_oh, m.capacity, m.cum_param, m.cum_state, m.cum_act, m.lat2_s, m.k_batch,
            np.asarray(c.startup_s, np.float64), float(c.billing_granularity_s),
            float(ps_cap(problem)))
        return BatchResult(cost_usd=cost, throughput=thr, cost_per_hour=per_hour,
                           feasible=np.isfinite(cost))
    cost, thr, per_hour = _evaluate_kernel(
        a, problem.oct_s, problem.odt_s, problem.alpha, problem.boundary_bytes,
        problem.network_bytes_per_s, float(problem.latency_s), problem.price_per_hour,
        problem.available_array, int(problem.batch_size), float(problem.throughput_limit),
        float(problem.num_samples), bool(problem.odt_parallel), mode == "exact")
    return BatchResult(cost_usd=cost, throughput=thr, cost_per_hour=per_hour,
                       feasible=np.isfinite(cost))
