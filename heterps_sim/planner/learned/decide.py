"""What the learned spot policy decides, and what a decision costs in simulated jobs.

    case = Case(problem, market, seeds=10)
    d = Decision(spot=frozenset({"t1"}), headroom=0.1, checkpoint_scale=1.0, extra=(0, 1))
    base = case.base(d.spot, d.headroom)      # the exact optimum on those prices at that floor
    scored = case.score(d)                    # its jobs: plan, outcome (cost, meet), reward

A decision is four things the exact solver on mean times does not know how to choose:
- which of the market's spot types are rented on spot (the rest on demand): the planner then
  plans on those prices (planner/spot.py), so the types and stages follow from the choice;
- the headroom: the floor the planner plans at, limit x (1 + headroom);
- units added to each stage of the plan it answers (stragglers and jitter hit stages apart);
- the checkpoint interval, as a multiple of Young's for the plan's reclaim rate.
Its cost is the mean cost of the plan's jobs under the market (only the chosen types on spot),
the same seeds for every decision of a case (common random numbers), and its reward is what
training maximises: -ln(cost / the on-demand answer's cost), less a penalty that grows with
how far the share of jobs meeting the floor falls below the market's probability.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.inputs.market import Market
from heterps_sim.planner.episodes import RentalOutcome, rentable, rental_episodes
from heterps_sim.planner.planner import Planner

HEADROOMS = (0.0, 0.1, 0.2, 0.35, 0.5, 0.7)
"""Floors the planner plans at, limit x (1 + h): a slow unit makes its stage about 1.5x
slower in the simulator, so holding the floor in 9 jobs of 10 can take +50%."""
CHECKPOINT_SCALES = (0.5, 1.0, 2.0)
EXTRA_UNITS = (0, 1, 2)
MISS_PENALTY = 1.0
"""Reward lost by a decision whose jobs miss the floor more often than the market allows, on
top of 5 x the missing share (so a near miss still ranks above a far one)."""
FAILED_REWARD = -6.0
"""Reward of a decision with no plan, or whose plan does not run or finish."""


@dataclass(frozen=True, slots=True)
class Decision:
    spot: frozenset
    """Types rented on spot (a subset of the market's)."""
    headroom: float
    checkpoint_scale: float
    extra: tuple = ()
    """Units added to each stage of the planned plan (missing stages: 0)."""

    def text(self) -> str:
        spot = ", ".join(sorted(self.spot)) or "none"
        return (f"spot: {spot}; headroom {100 * self.headroom:.0f}%; units added "
                f"{list(self.extra)}; checkpoints x{self.checkpoint_scale:g}")


@dataclass(frozen=True, slots=True)
class Base:
    """The planner's answer for a choice of spot types and a headroom."""

    plan: Plan | None
    stage_share: tuple = ()
    """Each stage's share of the sum of the stages' times per batch (the pricing's)."""


@dataclass(frozen=True, slots=True)
class Scored:
    decision: Decision
    plan: Plan | None
    outcome: RentalOutcome | None
    reward: float
    failure: str = ""

    @property
    def holds(self) -> bool:
        return self.outcome is not None and self.outcome.meets_probability

    @property
    def cost(self) -> float:
        return self.outcome.cost.mean if self.outcome is not None else math.inf


def sub_market(market: Market, spot) -> Market:
    """The market with only the types in `spot` rented on spot."""
    return replace(market, spot={n: t for n, t in market.spot.items() if n in spot})


def grown(plan: Plan, extra, problem: Problem) -> Plan:
    """`plan` with extra[g] units added to stage g, each within the types' available units."""
    from heterps_sim.planner.robust import with_unit_added, within_caps
    for g, n in enumerate(extra[:len(plan.stages)]):
        for _ in range(int(n)):
            trial = with_unit_added(plan, g)
            if not within_caps(trial, problem):
                break
            plan = trial
    return plan


class Case:
    """One problem and market, with the planner's answers and the jobs' step times cached:
    decisions that share spot types and headroom share a solve, and plans that share units
    share the step-level simulations."""

    def __init__(self, problem: Problem, market: Market, *, seeds: int = 10,
                 first_seed: int = 0, planner: Planner | None = None) -> None:
        self.problem, self.market = problem, market
        self.known = market.known()
        self.seeds, self.first_seed = seeds, first_seed
        self.planner = planner or Planner()
        self._bases: dict = {}
        self._steps: dict = {}
        self._scores: dict = {}
        self.jobs = 0
        """Jobs simulated so far (each a whole training run, num_samples samples)."""
        self._reference: float | None = None

    @property
    def reference(self) -> float:
        """The on-demand answer's mean job cost (on demand, no headroom): rewards' scale (its
        jobs are simulated on first use)."""
        if self._reference is None:
            s = self.score(Decision(frozenset(), 0.0, 1.0), reward=False)
            self._reference = s.cost if s.outcome is not None else math.nan
        return self._reference

    @property
    def feasible(self) -> bool:
        """Some plan meets the floor on demand on mean times (the planner's answer exists)."""
        return self.base(frozenset(), 0.0).plan is not None

    def base(self, spot, headroom: float) -> Base:
        key = (frozenset(spot), headroom)
        if key not in self._bases:
            from heterps_sim.planner.spot import spot_priced
            seen = spot_priced(self.problem, sub_market(self.market, spot))
            raised = replace(seen, throughput_limit=seen.throughput_limit * (1.0 + headroom))
            answer = self.planner.plan(raised)
            if not answer.feasible:
                self._bases[key] = Base(None)
            else:
                times = [st.exec_time_s for st in answer.result.stages]
                total = sum(times) or 1.0
                self._bases[key] = Base(rentable(answer.plan, answer.result),
                                        tuple(t / total for t in times))
        return self._bases[key]

    def score(self, d: Decision, *, reward: bool = True) -> Scored:
        """The decision's plan and its jobs (cached by decision)."""
        if d in self._scores:
            return self._scores[d]
        from heterps_sim.des.job import JobTooLong
        base = self.base(d.spot, d.headroom)
        if base.plan is None:
            out = Scored(d, None, None, FAILED_REWARD, "no plan meets the raised floor")
        else:
            plan = grown(base.plan, d.extra, self.problem)
            key = repr(plan.to_json_dict())
            try:
                outcome = rental_episodes(
                    self.problem, plan, sub_market(self.known, d.spot), seeds=self.seeds,
                    reference=False, step_s=self._steps.get(key),
                    checkpoint_scale=d.checkpoint_scale, first_seed=self.first_seed)
                self._steps[key] = outcome.step_s
                self.jobs += self.seeds
                out = Scored(d, plan, outcome,
                             self.reward(outcome) if reward else math.nan)
            except (ValueError, JobTooLong) as exc:  # JobTooLong is a ValueError: say which
                out = Scored(d, plan, None, FAILED_REWARD, str(exc))
        self._scores[d] = out
        return out

    def reward(self, outcome: RentalOutcome) -> float:
        r = -math.log(outcome.cost.mean / self.reference)
        missing = self.market.probability - outcome.meet.mean
        if missing > 1e-12:
            r -= MISS_PENALTY + 5.0 * missing
        return r


__all__ = ["CHECKPOINT_SCALES", "Case", "Decision", "EXTRA_UNITS", "HEADROOMS", "Scored",
           "grown", "sub_market"]
