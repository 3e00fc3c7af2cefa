"""Honest baselines: the best plans of ONE type under the same pricing, so that what mixing
types saves and what pipelining saves are measured apart.

    one_type    the exact optimum restricted to one type, pipelines of that type allowed
                (cuts between stages of one type included), over every type
    one_stage   the cheapest plan of one stage on one type (every layer together), its units
                and m priced as they run

    mixing types saves   1 - answer / one_type      (0 when the answer uses one type)
    pipelining saves     1 - one_type / one_stage   (one type either way)

Both baselines are priced by the answer's own Pricing (the same model, schedule and
microbatch policy), so neither effect is credited to the other: a pipeline of two units of the
same GPU is pipelining, not heterogeneity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from heterps_sim.core.plan import Plan, Stage
from heterps_sim.core.problem import Problem
from heterps_sim.planner import searches
from heterps_sim.planner.answer import Answer
from heterps_sim.planner.pricing import Pricing


@dataclass(frozen=True, slots=True)
class Baselines:
    one_type: Answer | None
    """The cheapest one-type plan (None: no single type meets the limit)."""
    one_stage: Answer | None
    """The cheapest one-stage plan (None: none meets the limit, or not asked for)."""
    types_tried: int = 0

    def to_json_dict(self) -> dict:
        def one(a: Answer | None):
            if a is None:
                return None
            return {"plan": a.plan.to_json_dict(), "cost_usd": a.cost_usd,
                    "proven_optimal": a.proven, "gap": a.gap}
        return {"one_type": one(self.one_type), "one_stage": one(self.one_stage),
                "types_tried": self.types_tried}


def fixed_ps(problem: Problem) -> Problem:
    """`problem` with its parameter-server hosts as they are (no candidates left to choose)."""
    ps = problem.ps
    if ps is None or not getattr(ps, "hosts", ()) or not getattr(ps, "host_type", None):
        return problem
    from dataclasses import replace
    return replace(problem, ps=ps.model_copy(update={"hosts": ()}))


def whole_model_types(problem: Problem) -> list[int]:
    """Types that can run every layer (the only ones a one-type plan can use)."""
    runnable = problem.runnable
    return [j for j in range(problem.num_types) if runnable[:, j].all()]


def one_type_baselines(problem: Problem, pricing: Pricing, *, max_work: int | None = None,
                       one_stage: bool = True) -> Baselines:
    """The best one-type and one-stage plans of `problem` under `pricing`. When the problem
    prices parameter-server hosts, the baselines keep the hosts `problem` has (the answer's
    choice: pass answer.problem): the comparison is between the stages' types, and it stays
    one search per type rather than one per type and host choice."""
    problem = fixed_ps(problem)
    best_type: Answer | None = None
    best_stage: Answer | None = None
    proven, lower = True, math.inf
    types = whole_model_types(problem)
    for j in types:
        got = searches.exact(problem, pricing, types=(j,), max_work=max_work,
                             options={"allow_same_type_cuts": True}
                             if not pricing.flushed else None)
        proven = proven and got.proven
        if got.feasible:
            lower = min(lower, got.lower_bound_usd or 0.0)
            if best_type is None or got.cost_usd < best_type.cost_usd:
                best_type = got
        elif not got.proven:
            lower = 0.0  # a type the search could not settle: no bound from it
        if not one_stage:
            continue
        one = Plan(stages=(Stage(layers=problem.layer_names, resource=problem.type_names[j]),),
                   schedule=pricing.schedule)
        plan, result = pricing.price(problem, one)
        if result.feasible and (best_stage is None or result.cost_usd < best_stage.cost_usd):
            best_stage = Answer(scheduler="one-stage", plan=plan, result=result,
                                pricing=pricing, problem=problem, proven=False)
    if best_type is not None:
        # proven over every type only when every type's search was
        lower = min(lower, best_type.cost_usd)
        best_type.proven = proven and best_type.cost_usd <= lower * (1 + 1e-9)
        best_type.lower_bound_usd = lower if lower > 0 else None
    if best_stage is not None and best_type is not None \
            and best_stage.cost_usd < best_type.cost_usd * (1 - 1e-9):
        # a one-stage plan is a one-type plan: the search's budget missed it
        best_type = Answer(scheduler="exact", plan=best_stage.plan, result=best_stage.result,
                           pricing=pricing, problem=problem, proven=False,
                           lower_bound_usd=best_type.lower_bound_usd)
    return Baselines(best_type, best_stage, len(types))


def _plan_text(answer: Answer) -> str:
    stages = answer.result.stages
    parts = [f"{s.resource} x{s.num_replicas}" for s in stages]
    return " + ".join(parts) + f" ({len(stages)} stage{'s' if len(stages) != 1 else ''})"


def _saves(cheaper: float, dearer: float) -> float:
    return 100.0 * (1.0 - cheaper / dearer)


def effects_lines(answer: Answer, base: Baselines) -> list[str]:
    """The two effects as the commands print them."""
    if not answer.feasible:
        return []
    lines = []
    one_type, one_stage = base.one_type, base.one_stage
    types = {s.resource for s in answer.result.stages}
    if one_type is None:
        lines.append("best one-type plan: none meets the limit (mixing types is what makes "
                     "the limit reachable)")
    else:
        proof = "proven" if one_type.proven else one_type.optimality()
        lines.append(f"best one-type plan: {_plan_text(one_type)}, "
                     f"{one_type.cost_usd:,.6g} USD ({proof})")
        if len(types) == 1:
            lines.append("mixing types: the answer uses one type; mixing does not pay here")
        else:
            lines.append(f"mixing types: {_saves(answer.cost_usd, one_type.cost_usd):.1f}% "
                         "cheaper than the best one-type plan")
    if one_stage is None:
        lines.append("best one-stage plan: none meets the limit")
    else:
        lines.append(f"best one-stage plan: {_plan_text(one_stage)}, "
                     f"{one_stage.cost_usd:,.6g} USD")
        if one_type is not None:
            lines.append(f"pipelining alone: {_saves(one_type.cost_usd, one_stage.cost_usd):.1f}%"
                         " cheaper (the best one-type plan against the best one-stage plan)")
    return lines
