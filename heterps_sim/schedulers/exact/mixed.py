"""The exact scheduler's `mixed` option: its stages, topped up with units of other types.

Where availability caps bind, a stage's best type runs out; mixed stages (plan.Stage.replicas)
let it take the leftovers of other types. For a FIXED layer split this module provisions
every stage with a composition {type: units} so that each stage reaches the throughput limit
(cost/reference.py's finish-together step time) at the least USD per hour, caps shared across stages:

    per stage   enumerate compositions of at most `max_types` distinct types among its
                candidates (its type in the split + the `candidates` runnable types of least
                price x ET(1 unit)), n_j <= min(cap_j, least units of j alone at the limit)
                (more units of j than j alone needs is dominated: j alone meets the limit for
                less), n_j <= `max_units` for uncapped types that never reach it alone (the
                Config's mixed_max_types, mixed_candidates, mixed_max_units); keep,
                per use of the capped types, the cheapest composition meeting the limit;
    all stages  a DP over stages whose state is the units taken from each capped type.

It is exact for that objective (tests/sim/schedulers/test_mixed_stages.py checks it against brute force),
with one knowing approximation: a stage's outgoing boundary transfer is costed with the
network of its own composition and the NEXT stage's type in the split (cost/reference.py uses the
slowest network of both sides' final compositions). The plan returned is re-costed by
cost.evaluate_plan, so the reported numbers are the model's; with equal networks, or when
the top-up types are no slower on the network, the two agree. Provisioning is at the limit
(like mode `least`); `top_up` returns whichever is cheaper of the exact scheduler's
single-type plan and the mixed plans built on two splits: the capped optimum's and the
uncapped optimum's (the one caps would break). Deterministic: ties go to fewer units, then
to the lower type indices.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

from heterps_sim.core.plan import Plan, Stage
from heterps_sim.core.problem import Problem
from heterps_sim.core.sharing import finish_together
from heterps_sim.cost.reference import evaluate_plan, stage_terms
from heterps_sim.schedulers.base import NoFeasiblePlan

Composition = tuple[tuple[int, int], ...]
"""((type index, units), ...), primary type first."""


def _parts(problem: Problem, first: int, last: int, types, next_j: int) -> list[tuple[float, float]]:
    """(c_j, a_j) of each type on layers first..last, the boundary on the slowest network."""
    net = problem.network_bytes_per_s
    bw = float(min(net[j] for j in [*types, next_j])) if next_j >= 0 else None
    out = []
    for j in types:
        t = stage_terms(problem, first, last, j, next_j, bw)
        out.append(((1.0 - t.alpha) * t.parallel_s + t.serial_s, t.alpha * t.parallel_s))
    return out


def step_time(problem: Problem, first: int, last: int, comp: Composition, next_j: int) -> float:
    """Seconds per batch of layers first..last on the composition (as the search costs it)."""
    if len(comp) == 1:
        j, n = comp[0]
        return stage_terms(problem, first, last, j, next_j).exec_time(n)
    parts = _parts(problem, first, last, [j for j, _ in comp], next_j)
    return finish_together([c for c, _ in parts], [a for _, a in parts], [n for _, n in comp])[0]


def _runnable_types(problem: Problem, first: int, last: int) -> list[int]:
    ok = problem.runnable[first:last + 1].all(axis=0)
    return [j for j in range(problem.num_types) if ok[j]]


def stage_options(problem: Problem, first: int, last: int, primary: int, next_j: int,
                  candidates: int, max_types: int, max_units: int) -> dict[tuple, tuple]:
    """Per use of the capped types, the cheapest composition meeting the limit:
    {usage: (per_hour, units, comp)} with usage = units per capped type (in type order)."""
    need = problem.batch_size / problem.throughput_limit
    capped = [j for j in range(problem.num_types) if problem.available[j] is not None]
    runnable = _runnable_types(problem, first, last)
    if primary not in runnable:
        return {}
    one_unit = {j: problem.price_per_hour[j] * step_time(problem, first, last, ((j, 1),), next_j)
                for j in runnable}
    others = sorted((j for j in runnable if j != primary), key=lambda j: (one_unit[j], j))
    pool = [primary, *others[:candidates]]
    bound = {}
    for j in pool:
        least = stage_terms(problem, first, last, j, next_j).least_units(
            problem.batch_size, problem.throughput_limit)
        cap = problem.available[j]
        bound[j] = min(x for x in (least, cap, None if cap is not None else max_units)
                       if x is not None)
    best: dict[tuple, tuple] = {}
    for size in range(1, max_types + 1):
        for types in itertools.combinations(pool, size):
            for counts in itertools.product(*(range(1, bound[j] + 1) for j in types)):
                comp = tuple(zip(types, counts))
                if step_time(problem, first, last, comp, next_j) > need * (1 + 1e-12):
                    continue
                per_hour = float(sum(problem.price_per_hour[j] * n for j, n in comp))
                usage = tuple(dict(comp).get(j, 0) for j in capped)
                key = (per_hour, sum(counts), comp)
                if usage not in best or key < best[usage]:
                    best[usage] = key
    return best


def provision_split(problem: Problem, spans: list[tuple[int, int, int]], candidates: int = 4,
                    max_types: int = 2, max_units: int = 64) -> list[Composition] | None:
    """Cheapest compositions (USD/h) for stages (first, last, primary type) meeting the limit
    under the shared caps; None when no combination does."""
    capped = [j for j in range(problem.num_types) if problem.available[j] is not None]
    caps = [problem.available[j] for j in capped]
    states: dict[tuple, tuple] = {tuple(0 for _ in capped): (0.0, 0, ())}
    for g, (first, last, primary) in enumerate(spans):
        next_j = spans[g + 1][2] if g + 1 < len(spans) else -1
        options = stage_options(problem, first, last, primary, next_j, candidates, max_types,
                                max_units)
        nxt: dict[tuple, tuple] = {}
        for used, (cost, units, comps) in states.items():
            for usage, (per_hour, n, comp) in options.items():
                total = tuple(u + v for u, v in zip(used, usage))
                if any(t > c for t, c in zip(total, caps)):
                    continue
                key = (cost + per_hour, units + n, comps + (comp,))
                if total not in nxt or key < nxt[total]:
                    nxt[total] = key
        states = nxt
        if not states:
            return None
    return list(min(states.values())[2])


def mixed_plan(problem: Problem, split: Plan, **knobs) -> Plan | None:
    """`split` (its layers and types) with every stage provisioned by provision_split."""
    spans, first = [], 0
    for s in split.stages:
        spans.append((first, first + len(s.layers) - 1, problem.type_index(s.resource)))
        first += len(s.layers)
    comps = provision_split(problem, spans, **knobs)
    if comps is None:
        return None
    names = problem.type_names
    stages = tuple(Stage(layers=s.layers, replicas=tuple((names[j], n) for j, n in comp))
                   for s, comp in zip(split.stages, comps))
    return replace(split, stages=stages)


def top_up(problem: Problem, mode: str, splits: list[tuple[str, Plan]], reason: str,
           config) -> tuple[Plan, dict]:
    """The cheapest of the exact sweep's single-type plan and mixed plans on its splits.

    `splits`: ("capped", the single-type optimum under the caps) when one exists, then
    ("uncapped", the optimum with the caps lifted) when one exists; `reason`: why the sweep
    found none. `config`: the exact scheduler's Config (its mixed_* knobs). Ties go to the
    single-type plan. notes: single_type_cost_usd (inf when no single-type plan is feasible),
    mixed_cost_usd, split ("single" | "capped" | "uncapped": where the returned plan comes
    from), mixed_stages.
    """
    found: list[tuple[float, int, str, Plan]] = [
        (evaluate_plan(problem, plan, mode).cost_usd, 0, "single", plan)
        for label, plan in splits if label == "capped"]
    knobs = {"candidates": config.mixed_candidates, "max_types": config.mixed_max_types,
             "max_units": config.mixed_max_units}
    for label, split in splits:
        plan = mixed_plan(problem, split, **knobs)
        if plan is not None:
            result = evaluate_plan(problem, plan, mode)
            if result.feasible:
                found.append((result.cost_usd, 1, label, plan))
    notes = {
        "single_type_cost_usd": min((c for c, _, lb, _ in found if lb == "single"), default=math.inf),
        "mixed_cost_usd": min((c for c, _, lb, _ in found if lb != "single"), default=math.inf)}
    if not found:
        raise NoFeasiblePlan("no plan meets the limit, with or without mixed stages"
                             + (f" ({reason})" if reason else ""))
    _, _, label, plan = min(found, key=lambda f: (f[0], f[1]))
    notes.update(split=label, mixed_stages=sum(s.is_mixed for s in plan.stages))
    return plan, notes
