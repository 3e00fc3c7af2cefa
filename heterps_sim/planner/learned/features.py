"""What the learned spot policy reads: a few numbers per type, per stage and per case, each
scale-free (ratios and logs), so one policy reads problems of any size, price level or length.

Per type (TYPE_FEATURES): whether the market offers it on spot, its spot discount, the reclaims
one unit expects over the job, what a restart costs per unit over the job, its on-demand price
and its time per batch (all layers on one unit) against the cheapest and fastest types, and how
many of its units the exact solver's answers on mean times rent, on demand and all on spot.
Per case (CASE_FEATURES): the probability the floor must hold with, the job's length, zone
outages, the checkpoint's write time, the number of types. Per stage of a planned plan
(STAGE_FEATURES): its type's features, whether it was put on spot, its units and its share of
the plan's time per batch, and the headroom the plan was planned at.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from heterps_sim.core.problem import Problem
from heterps_sim.inputs.market import Market

TYPE_FEATURES = 10
CASE_FEATURES = 6
STAGE_FEATURES = TYPE_FEATURES + 4


def _log10(x: float, floor: float = 1e-4) -> float:
    return math.log10(max(x, floor))


def job_hours(problem: Problem) -> float:
    """The job's length at the floor (hours)."""
    return problem.num_samples / max(problem.throughput_limit, 1e-12) / 3600.0


def restart_s(problem: Problem, market: Market, j: int) -> float:
    if market.restart_s is not None:
        return market.restart_s
    return float(problem.unit_costs.startup_s[j])


def type_order(problem: Problem) -> list[int]:
    """Types by on-demand price (then name): the order the type LSTM reads them in."""
    names = problem.type_names
    return sorted(range(len(names)), key=lambda j: (float(problem.price_per_hour[j]), names[j]))


def type_features(problem: Problem, market: Market, on_demand_units: dict,
                  spot_units: dict) -> np.ndarray:
    """(M, TYPE_FEATURES) in type_order."""
    hours = job_hours(problem)
    price = np.asarray(problem.price_per_hour, float)
    per_batch = np.nansum(np.asarray(problem.oct_s, float) + np.asarray(problem.odt_s, float),
                          axis=0)
    runnable = np.isfinite(np.asarray(problem.oct_s, float)).mean(axis=0)
    per_batch = np.where(runnable > 0, per_batch / np.maximum(runnable, 1e-9), np.inf)
    fastest = float(np.min(per_batch[np.isfinite(per_batch)])) if np.isfinite(per_batch).any() \
        else 1.0
    rows = []
    for j in type_order(problem):
        name = problem.type_names[j]
        terms = market.spot.get(name)
        rate = 0.0
        if terms is not None:
            known = terms.known()
            rate = terms.reclaims_per_hour if known is None else min(known.fit(1)[0], 1e6)
        rows.append([
            1.0 if terms is not None else 0.0,
            math.log(terms.price_per_hour / price[j]) if terms is not None else 0.0,
            _log10(rate * hours) / 4.0,
            _log10(rate * restart_s(problem, market, j) / 3600.0 * hours) / 4.0,
            math.log(price[j] / price.min()) / 3.0,
            min(math.log(per_batch[j] / fastest), 5.0) / 3.0 if math.isfinite(per_batch[j])
            else 2.0,
            float(runnable[j]),
            math.log1p(on_demand_units.get(name, 0)) / 2.0,
            math.log1p(spot_units.get(name, 0)) / 2.0,
            _log10(rate * market.checkpoint_write_s / 3600.0 * hours) / 4.0,
        ])
    return np.array(rows, np.float32).reshape(-1, TYPE_FEATURES)


def case_features(problem: Problem, market: Market) -> np.ndarray:
    hours = job_hours(problem)
    return np.array([
        market.probability,
        math.log(hours) / 3.0,
        _log10(market.zone_outages_per_hour * hours) / 4.0,
        math.log10(max(market.checkpoint_write_s, 1.0)) / 2.0,
        math.log(len(problem.type_names)) / 2.0,
        market.notice_s / 600.0,
    ], np.float32)


def stage_features(problem: Problem, types: np.ndarray, plan, stage_share, spot,
                   headroom: float) -> np.ndarray:
    """(stages, STAGE_FEATURES): `types` is type_features' output (rows in type_order)."""
    order = type_order(problem)
    row_of = {problem.type_names[j]: i for i, j in enumerate(order)}
    out = []
    for g, st in enumerate(plan.stages):
        share = stage_share[g] if g < len(stage_share) else 0.0
        out.append(np.concatenate([types[row_of[st.resource]], np.array([
            1.0 if st.resource in spot else 0.0, math.log1p(st.num_replicas) / 2.0, share,
            headroom], np.float32)]))
    return np.array(out, np.float32).reshape(-1, STAGE_FEATURES)


def tensor(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x, np.float32))


__all__ = ["CASE_FEATURES", "STAGE_FEATURES", "TYPE_FEATURES", "case_features", "job_hours",
           "stage_features", "tensor", "type_features", "type_order"]
