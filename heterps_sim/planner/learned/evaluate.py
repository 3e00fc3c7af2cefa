"""The learned spot policy against the exact solver's baselines, on cases it never trained on.

    row = evaluate_case(policy, index, seeds=20, fresh=30)

For held-out case `index` (family.case(HELD_OUT_SEEDS + index)):
- the baselines: robust.market_sweep, every plan the exact solver on mean times gives (its
  answer repaired in the simulator (a); its answers at raised floors on demand and on spot
  prices, and those grown unit by unit (b)), the cheapest holding the floor chosen by `seeds`
  jobs;
- the policy alone: its most likely decision, the headroom by answer.ALONE_QUANTILE (no
  search, no simulation);
- the policy with a small search: that decision, the most likely one and `samples` sampled
  ones, the cheapest holding the floor chosen by the same `seeds` jobs.
Each chosen plan is then scored by `fresh` jobs on other seeds (from FRESH_SEED): a choice made
on some jobs is not scored on them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from heterps_sim.planner.episodes import RentalOutcome, rental_episodes
from heterps_sim.planner.learned.answer import learned_answer
from heterps_sim.planner.learned.decide import Case, Decision, sub_market
from heterps_sim.planner.learned.family import HELD_OUT_SEEDS, VALIDATION_SEEDS, case
from heterps_sim.planner.learned.policy import SpotPolicy, act
from heterps_sim.planner.planner import Planner

FRESH_SEED = 10_000


@dataclass(frozen=True, slots=True)
class Pick:
    """One method's chosen plan, its decision (None for the baselines) and its fresh jobs."""

    label: str
    decision: Decision | None
    plan: object
    fresh: RentalOutcome | None
    wall_s: float
    """Wall time to choose it (the planner's solves and the jobs it simulated)."""

    @property
    def cost(self) -> float:
        return self.fresh.cost.mean if self.fresh is not None else math.inf

    @property
    def holds(self) -> bool:
        return self.fresh is not None and self.fresh.meets_probability


@dataclass(frozen=True, slots=True)
class CaseRow:
    index: int
    layers: int
    types: int
    probability: float
    baseline: Pick
    alone: Pick
    searched: Pick


def _fresh(problem, plan, market, d: Decision | None, fresh: int) -> RentalOutcome | None:
    from heterps_sim.des.job import JobTooLong
    if plan is None:
        return None
    m = market if d is None else sub_market(market, d.spot)
    try:
        return rental_episodes(problem, plan, m, seeds=fresh, reference=False,
                               first_seed=FRESH_SEED,
                               checkpoint_scale=1.0 if d is None else d.checkpoint_scale)
    except (ValueError, JobTooLong):
        return None


def baseline_pick(index: int, *, seeds: int = 20, fresh: int = 30) -> Pick | None:
    """The best of the exact solver's baselines for held-out case `index` (robust.market_sweep,
    chosen by `seeds` jobs), scored by `fresh` other jobs; None when no plan meets the floor
    even on demand on mean times."""
    import time

    from heterps_sim.planner.robust import market_sweep
    problem, market = case(HELD_OUT_SEEDS + index)
    if not Planner().plan(problem).feasible:
        return None
    start = time.perf_counter()
    sweep, _ = market_sweep(problem, market, Planner(), seeds=seeds)
    best = sweep.best
    wall = time.perf_counter() - start
    plan = best.plan if best is not None else None
    return Pick(best.label if best is not None else "none holds", None, plan,
                _fresh(problem, plan, market, None, fresh), wall)


def hindsight_pick(index: int, *, seeds: int = 20, fresh: int = 30) -> Pick | None:
    """The sweep's cheapest plan that holds the floor on the `fresh` jobs themselves: every
    plan of robust.market_sweep for held-out case `index` scored by the fresh jobs, the
    cheapest of those that hold kept ("none holds" when none does). No rule that chooses among
    the sweep's plans (on any number of other jobs) can do better on these jobs, so a method
    cheaper than this at the same probability of meeting the floor is cheaper than every such
    rule. None when no plan meets the floor even on demand on mean times."""
    import time

    from heterps_sim.planner.robust import market_sweep
    problem, market = case(HELD_OUT_SEEDS + index)
    if not Planner().plan(problem).feasible:
        return None
    start = time.perf_counter()
    sweep, _ = market_sweep(problem, market, Planner(), seeds=seeds)
    seen, best = set(), None
    for cand in sweep.candidates:
        if cand.plan is None:
            continue
        key = repr(cand.plan.to_json_dict())
        if key in seen:
            continue
        seen.add(key)
        pick = Pick(cand.label, None, cand.plan, _fresh(problem, cand.plan, market, None, fresh),
                    0.0)
        if pick.holds and (best is None or pick.cost < best.cost):
            best = pick
    wall = time.perf_counter() - start
    if best is None:
        return Pick("none holds", None, None, None, wall)
    return Pick(best.label, None, best.plan, best.fresh, wall)


def grid_pick(index: int, *, seeds: int = 20, fresh: int = 30) -> Pick | None:
    """The search in the simulator over the policy's own choices (imitation.grid_search: what
    the policy was trained to imitate, run in full) for held-out case `index`, chosen by the
    same `seeds` jobs as the other methods, scored by `fresh` other jobs: what the best policy
    over these choices could reach with these jobs. None when no plan meets the floor even on
    demand on mean times."""
    import time

    from heterps_sim.planner.learned.imitation import grid_search
    problem, market = case(HELD_OUT_SEEDS + index)
    start = time.perf_counter()
    c = Case(problem, market, seeds=seeds)
    if not c.feasible or not math.isfinite(c.reference):
        return None
    best = grid_search(c)
    wall = time.perf_counter() - start
    d = best.decision
    return Pick("grid search", d, best.plan, _fresh(problem, best.plan, market, d, fresh), wall)


def policy_picks(policy: SpotPolicy, index: int, *, seeds: int = 20, fresh: int = 30,
                 samples: int = 16, search_seed: int = 0) -> tuple[Pick, Pick] | None:
    """(the policy alone, the policy + search) for held-out case `index`, each scored by
    `fresh` jobs other than the `seeds` the search chose on."""
    problem, market = case(HELD_OUT_SEEDS + index)
    ans = learned_answer(problem, market, policy, seeds=seeds, samples=samples,
                         search_seed=search_seed)
    if ans is None:
        return None
    greedy, pick = ans.alone, ans.searched
    return (Pick("policy alone", greedy.decision, greedy.plan,
                 _fresh(problem, greedy.plan, market, greedy.decision, fresh), ans.alone_s),
            Pick("policy + search", pick.decision, pick.plan,
                 _fresh(problem, pick.plan, market, pick.decision, fresh), ans.searched_s))


def evaluate_case(policy: SpotPolicy, index: int, *, seeds: int = 20, fresh: int = 30,
                  samples: int = 16, search_seed: int = 0,
                  baseline: Pick | None = None) -> CaseRow | None:
    """One held-out case (None when no plan meets its floor even on demand on mean times);
    `baseline`: baseline_pick's, when already computed (it does not depend on the policy)."""
    picks = policy_picks(policy, index, seeds=seeds, fresh=fresh, samples=samples,
                         search_seed=search_seed)
    if picks is None:
        return None
    if baseline is None:
        baseline = baseline_pick(index, seeds=seeds, fresh=fresh)
    problem, market = case(HELD_OUT_SEEDS + index)
    return CaseRow(index=index, layers=len(problem.layer_names),
                   types=len(problem.type_names), probability=market.probability,
                   baseline=baseline, alone=picks[0], searched=picks[1])


def alone_by_rule(policy: SpotPolicy, index: int, rules: tuple, *,
                      seeds: int = 20) -> dict | None:
    """Validation case `index` (family.case(VALIDATION_SEEDS + index): the training family,
    never trained on nor held out): the policy alone's decision under each headroom rule
    (None: the most likely headroom; a float q: the least whose cumulative probability
    reaches q; ("fixed", h): headroom h whatever the policy says, its spot types and checkpoint
    interval kept, no unit added: the ablation), each scored by the same `seeds` jobs
    (decide.Case.score: the training reward). None when no plan meets the floor even on
    demand on mean times."""
    from dataclasses import replace

    import torch
    problem, market = case(VALIDATION_SEEDS + index)
    c = Case(problem, market, seeds=seeds)
    if not c.feasible:
        return None
    out = {}
    with torch.no_grad():
        for rule in rules:
            if isinstance(rule, tuple):  # (no unit added: the policy alone rarely adds one)
                d = replace(act(policy, c, greedy=True).decision, headroom=rule[1], extra=())
            else:
                d = act(policy, c, greedy=True, headroom_quantile=rule).decision
            out[rule] = c.score(d)
    return out


__all__ = ["CaseRow", "FRESH_SEED", "Pick", "alone_by_rule", "baseline_pick",
           "evaluate_case", "grid_pick", "hindsight_pick", "policy_picks"]
