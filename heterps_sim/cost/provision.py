"""Many stages provisioned at once under the problem's own cost model, for the schedulers that
estimate before they cost (search moves and scores, the RL features and reward shaping).

For arrays of stages (layers first..last on type j, with their P, S, alpha as
cost/terms.py sums them, boundary included) `provision` gives the fewest units whose step time
meets a step budget (B / theta), the step time those units give, the least step time any unit
count gives, and the least unit-seconds one batch can take (price x that is the stage's least
cost per batch). Under the paper model these are cost/amdahl.py's closed forms, computed as
the callers always did; under the default model cost/dominant.py's (all-reduce, fixed costs,
memory and minimum batch per unit bounding the units), compiled once through
cost/dominant_numba.py, so a default-model problem is searched with the terms the reference
prices it by. Availability caps are the callers' to check (units are not bounded by them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from heterps_sim.core.problem import Problem
from heterps_sim.cost import amdahl
from heterps_sim.cost import dominant_numba as dominant
from heterps_sim.cost.terms import model_arrays


@dataclass(frozen=True, slots=True)
class Provisioned:
    ok: np.ndarray
    """some unit count the model allows meets the step budget"""
    units: np.ndarray
    """the fewest such units (float; meaningless where not ok)"""
    step_s: np.ndarray
    """ET at `units` (meaningless where not ok)"""
    fastest_s: np.ndarray
    """the least ET over the unit counts the model allows (inf: none fits memory and the
    minimum batch); the paper's Amdahl limit (1 - alpha) P + S"""
    slack_s: np.ndarray
    """step budget - fastest_s (paper: amdahl.slack); > 0 where some unit count meets it"""
    unit_s: np.ndarray
    """the least unit-seconds a batch takes: min over k of k x ET(k) (paper: P + S, one unit)"""


def provision(problem: Problem, par, ser, alpha, first, last, types,
              step_budget_s: float) -> Provisioned:
    """Provision stages given as broadcastable arrays (P, S, alpha, first and last layer, type
    index) for a step budget B / theta."""
    par, ser, alpha, first, last, types = np.broadcast_arrays(
        np.asarray(par, np.float64), np.asarray(ser, np.float64), np.asarray(alpha, np.float64),
        np.asarray(first, np.int64), np.asarray(last, np.int64), np.asarray(types, np.int64))
    if problem.cost_model != "default":
        with np.errstate(divide="ignore", invalid="ignore"):
            slack = amdahl.slack(step_budget_s, par, ser, alpha)
            ok = slack > 0
            units = np.maximum(1.0, amdahl.units_for(par, alpha, np.where(ok, slack, 1.0)))
            step = amdahl.step_time(par, ser, alpha, units)
        return Provisioned(ok=ok, units=units, step_s=step,
                           fastest_s=amdahl.serial_time(par, ser, alpha), slack_s=slack,
                           unit_s=par + ser)
    m = model_arrays(problem)
    shape = par.shape
    flat = [np.ascontiguousarray(x).ravel() for x in (par, ser, alpha, first, last, types)]
    out = _default_kernel(*flat, float(step_budget_s), m.step_oh, m.layer_oh, m.net, m.capacity,
                          m.cum_param, m.cum_state, m.cum_act, m.lat2_s,
                          float(problem.batch_size), int(m.k_batch))
    ok, units, step, fastest, unit_s = (x.reshape(shape) for x in out)
    return Provisioned(ok=ok, units=units, step_s=step, fastest_s=fastest,
                       slack_s=step_budget_s - fastest, unit_s=unit_s)


@njit(cache=True)
def _default_kernel(par, ser, alpha, first, last, types, budget, step_oh, layer_oh, net,
                    capacity, cum_param, cum_state, cum_act, lat2, batch, k_batch):
    n = par.shape[0]
    ok = np.zeros(n, np.bool_)
    units = np.ones(n)
    step = np.full(n, np.inf)
    fastest = np.full(n, np.inf)
    unit_s = np.full(n, np.inf)
    for i in range(n):
        if math.isnan(par[i]) or math.isnan(ser[i]) or math.isnan(alpha[i]):
            continue
        j = types[i]
        f, r, q, k_lo, k_hi = dominant.stage_extras(
            step_oh[j], layer_oh[j], net[j], capacity[j], cum_param, cum_state, cum_act,
            first[i], last[i], lat2, batch, k_batch)
        if k_lo > k_hi:
            continue
        p, s, a = par[i], ser[i], alpha[i]
        kf = dominant.fastest_units(p, s, a, f, r, q, k_lo, k_hi)
        fastest[i] = dominant.step_time(p, s, a, f, r, q, kf)
        unit_s[i] = k_lo * dominant.step_time(p, s, a, f, r, q, k_lo)  # k ET(k) grows with k
        k = dominant.least_units(p, s, a, f, r, q, budget, k_lo, k_hi)
        if k >= 0:
            ok[i] = True
            units[i] = k
            step[i] = dominant.step_time(p, s, a, f, r, q, k)
    return ok, units, step, fastest, unit_s
