"""The RL reward: cost relative to a reference plan, a penalty when infeasible. numpy only.

    ratio = cost / reference,  capped at RATIO_CAP[scale] (dearer plans all score the same:
                               1e6 on the log scale, 100 on the linear one)
    feasible plan     r = -ln(ratio)        (scale "log", default: every halving of the cost is
                                             worth the same, whatever its order of magnitude)
                      r = -ratio            (scale "linear": the paper's -(cost / reference))
    infeasible plan   r = r(RATIO_CAP) - 1 - shortfall,   in [worst_reward(), r(cap) - 1]
                      shortfall = min(ln(TL / reach), SHORTFALL_CAP) if reach < TL else 0,
                      reach = the plan's throughput with every stage at its fastest,
                      B / max_g ((1 - alpha_g) P_g + S_g) under the paper model (under
                      the default model ET at the fastest unit count, and the PS cap):
                      how far the stages are from meeting TL at any unit count (0 when
                      the plan fails only on availability caps or the unit bound)

Every feasible plan scores above every infeasible one, and an infeasible plan scores higher the
closer it comes to the limit (cost_batch reports throughput 0 for most infeasible plans, which
gave REINFORCE nothing to climb where feasible plans are rare: on dlrm-64types no random plan
of 2000 is feasible; a linear shortfall 1 - reach/TL spread their rewards over only 0.05).
The reference is the cheapest homogeneous plan (every layer on one type: what a single-type
cluster pays); when no homogeneous plan is feasible it is a lower bound on any plan's cost,
N/3600/B * sum over layers of min_j price_j * (oct + odt) (Amdahl: k * ET(k) >= ET(1)).
Measured here: random plans over 64 types often cost 5-100x the best homogeneous plan, so a
small cap (e.g. -2) flattened every reward to the same value and REINFORCE learnt nothing.
"""

from __future__ import annotations

import numpy as np

from heterps_sim.core.problem import Problem
from heterps_sim.cost import amdahl
from heterps_sim.cost.batch import BatchResult, evaluate_assignments
from heterps_sim.cost.provision import provision
from heterps_sim.cost.reference import ps_cap
from heterps_sim.cost.terms import boundary_latency_s
from heterps_sim.schedulers.rl.paper.features import action_mask

SCALES = ("log", "linear")
RATIO_CAP = {"log": 1e6, "linear": 100.0}
SHORTFALL_CAP = 10.0


def reference_cost(problem: Problem, mode: str = "least") -> tuple[float, str]:
    """(reference cost in USD, "homogeneous" or "lower-bound")."""
    mask = action_mask(problem)
    ok = np.flatnonzero(mask.all(axis=0))
    if ok.size:
        plans = np.repeat(ok[:, None], problem.num_layers, axis=1)
        costs = evaluate_assignments(problem, plans, mode).cost_usd
        if np.isfinite(costs).any():
            return float(costs.min()), "homogeneous"
    per_sample = np.where(mask, problem.price_per_hour[None, :] *
                          (np.nan_to_num(problem.oct_s) + np.nan_to_num(problem.odt_s)), np.inf)
    best = per_sample.min(axis=1)
    best = np.where(np.isfinite(best), best, 0.0).sum()
    bound = problem.num_samples / 3600.0 / problem.batch_size * best
    return (float(bound) if bound > 0 else 1.0), "lower-bound"


def reach(problem: Problem, plans: np.ndarray) -> np.ndarray:
    """(N,) throughput of each plan (type index per layer) with every stage at its fastest:
    the Amdahl limit, k -> infinity (paper model), the fastest unit count within memory and
    the minimum batch, and at most the parameter server's capacity (default model); 0 where a
    layer is on a type it cannot run on."""
    a = np.asarray(plans, np.int64)
    num_n, num_l = a.shape
    rows = np.arange(num_l)[None, :]
    oct_s, odt_s = problem.oct_s[rows, a], problem.odt_s[rows, a]
    aoct = problem.alpha[rows, a] * oct_s
    bad = np.isnan(oct_s) | np.isnan(odt_s) | np.isnan(aoct)
    ends = np.ones_like(a, bool)
    ends[:, :-1] = a[:, 1:] != a[:, :-1]
    net = np.asarray(problem.network_bytes_per_s, np.float64)
    bnd = np.zeros_like(oct_s)
    if num_l > 1:
        bw = np.minimum(net[a[:, :-1]], net[a[:, 1:]])
        bnd[:, :-1] = np.where(ends[:, :-1], problem.boundary_bytes[:-1] / bw
                               + boundary_latency_s(problem), 0.0)
    starts = np.ones_like(a, bool)
    starts[:, 1:] = ends[:, :-1]
    stage = (np.cumsum(starts, axis=1) - 1 + np.arange(num_n)[:, None] * num_l).ravel()

    def per_stage(x):
        return np.bincount(stage, np.nan_to_num(x).ravel(), minlength=num_n * num_l)

    s_oct, s_odt, s_aoct = per_stage(oct_s), per_stage(odt_s + bnd), per_stage(aoct)
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = np.where(s_oct > 0, s_aoct / s_oct, 0.0)
    par, ser = (s_oct + s_odt, 0.0) if problem.odt_parallel else (s_oct, s_odt)
    if problem.cost_model != "default":
        slowest = amdahl.serial_time(par, ser, alpha).reshape(num_n, num_l).max(axis=1)
    else:  # the default model's fastest unit count per stage (cost/provision.py)
        first, last, typ = (np.zeros(num_n * num_l, np.int64) for _ in range(3))
        rows = np.broadcast_to(np.arange(num_l), a.shape)
        first[stage[starts.ravel()]] = rows[starts]
        last[stage[ends.ravel()]] = rows[ends]
        typ[stage[starts.ravel()]] = a[starts]
        used = np.zeros(num_n * num_l, bool)
        used[stage] = True
        fastest = provision(problem, np.nan_to_num(par), np.nan_to_num(ser), alpha, first, last,
                            typ, problem.batch_size / problem.throughput_limit).fastest_s
        slowest = np.where(used, fastest, 0.0).reshape(num_n, num_l).max(axis=1)
    with np.errstate(divide="ignore"):
        out = np.where(slowest > 0, problem.batch_size / slowest, np.inf)
    return np.where(bad.any(axis=1), 0.0, np.minimum(out, ps_cap(problem)))


def _score(ratio, scale: str):
    if scale not in SCALES:
        raise ValueError(f"reward scale must be one of {SCALES}, got {scale!r}")
    return -np.log(ratio) if scale == "log" else -ratio


def worst_reward(scale: str = "log") -> float:
    """The least reward a complete plan can get (infeasible, the largest shortfall)."""
    return float(_score(RATIO_CAP[scale], scale)) - 1.0 - SHORTFALL_CAP


def rewards(problem: Problem, plans: np.ndarray, result: BatchResult, reference: float,
            scale: str = "log") -> np.ndarray:
    """Reward per plan, given `result = evaluate_assignments(problem, plans)`."""
    feasible = result.feasible
    cap = RATIO_CAP.get(scale, 1.0)
    ratio = np.minimum(np.where(feasible, result.cost_usd / reference, 1.0), cap)
    with np.errstate(divide="ignore"):
        short = np.log(problem.throughput_limit / reach(problem, plans))
    shortfall = np.clip(short, 0.0, SHORTFALL_CAP)
    return np.where(feasible, _score(ratio, scale), _score(cap, scale) - 1.0 - shortfall)
