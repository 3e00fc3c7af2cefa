"""Planning for spot capacity: the same problem with its spot types at their spot prices.

    spot = spot_priced(problem, market)     # price_per_hour of each spot type: its spot price
    spot_priced(problem, market, within_trace=True)   # and no more units of a traced type
                                                      # than its known trace always held
    planner.plan(spot)                      # the exact optimum when spot units never vanish

On mean times a spot unit is the same unit at a lower price, so the planner answers with the
types that are cheapest on spot (a GPU whose spot discount is deep, parameter-server hosts on
spot when the market lists their type) instead of the on-demand optimum rented on spot. What
reclaims cost (lost work, restarts, checkpoints) the planner does not see; the jobs that score
every plan do (planner/episodes.py), and robust.headroom_sweep(plan_on=spot) plans at raised
floors on these prices so that the cheapest plan holding the floor under reclaims and noise is
chosen by simulation, not by the mean.
"""

from __future__ import annotations

from dataclasses import replace

from heterps_sim.core.problem import Problem
from heterps_sim.inputs.market import Market


def spot_priced(problem: Problem, market: Market, *, within_trace: bool = False) -> Problem:
    """`problem` with each spot type's price_per_hour its spot price (a priced parameter server
    whose hosts are of a spot type repriced too). `within_trace`: each type whose reclaims
    come from a recorded trace is also capped at the fewest units the part of the trace the
    planner knows ever held (Market.lowest_units), so that the plan never needs capacity the
    recording did not keep (a plan above that level waits for units while it is short)."""
    if within_trace:
        names = list(problem.type_names)
        available = list(problem.available)
        for name in market.spot:
            low = market.lowest_units(name)
            if low is not None and name in names:
                k = names.index(name)
                available[k] = low if available[k] is None else min(available[k], low)
        problem = replace(problem, available=tuple(available))
    prices = problem.price_per_hour.copy()
    names = list(problem.type_names)
    for name, terms in market.spot.items():
        if name in names:
            prices[names.index(name)] = terms.price_per_hour
    out = replace(problem, price_per_hour=prices)
    ps = getattr(problem, "ps", None)
    if ps is not None and ps.host_type and ps.host_type in market.spot:
        from heterps_sim.cost.ps_hosts import problem_for_plan
        out = problem_for_plan(out, ps.host_type, int(ps.num_shards))
    return out


__all__ = ["spot_priced"]
