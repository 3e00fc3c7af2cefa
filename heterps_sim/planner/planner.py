"""The one path from a problem to the answer every command prints.

    planner = Planner(search="exact", pricing=Pricing.of(problem))
    answer = planner.plan(problem)                  # search -> pricing
    answer = planner.plan(problem, check=True)      # ... -> the simulator's check
    answer = planner.plan(problem, repair=True)     # ... -> repair where the simulator is short
    plan, result = planner.price(problem, plan)     # any plan, priced the same way

Roles passed in, as TorchRec's planner takes them: the search (the exact optimum under the
pricing's own objective, or a registered scheduler), the pricing (planner/pricing.py), the
check (planner/check.py, the SimPy simulator with the deterministic effects) and the repair
(planner/replan.py, then planner/repair.py). `schedule`, `simulate`, `evaluate`, `compare`,
`tradeoff`, `report`, the headline, the Python API, the RL schedulers' reference and
`heterps-exec run`'s prediction all call it, so one plan has one price everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.core.result import RunResult
from heterps_sim.planner import searches
from heterps_sim.planner.answer import Answer
from heterps_sim.planner.pricing import SCHEDULES, Pricing

AUTO = "auto"
"""Planner.schedule: plan under each of SCHEDULES and keep the cheapest."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Planner:
    search: str = "exact"
    """"exact" (the optimum under the pricing, proven or with a certified gap) or a
    registered scheduler's name (its cuts and types, priced as they run)."""
    pricing: Pricing | None = None
    """How plans are priced; None: Pricing.of(problem) (its model, gpipe, m searched)."""
    provisioning: str = "least"
    """The stage model's unit rule when `pricing` is None (least | exact)."""
    schedule: str = "gpipe"
    """The pipeline schedule when `pricing` is None: gpipe | 1f1b | async, or auto (each
    one planned, the cheapest answer kept; a tie goes to the synchronous one)."""
    options: dict = field(default_factory=dict)
    """The scheduler's Config fields."""
    seed: int = 0
    max_work: int | None = None
    """The exact flushed search's deterministic budget (None: its default); past it the
    answer carries a certified gap instead of a proof."""

    def pricing_for(self, problem: Problem, schedule: str | None = None) -> Pricing:
        if self.pricing is not None:
            return self.pricing
        schedule = schedule or (self.schedule if self.schedule != AUTO else "gpipe")
        return Pricing.of(problem, provisioning=self.provisioning, schedule=schedule)

    def price(self, problem: Problem, plan: Plan) -> tuple[Plan, RunResult]:
        """`plan` as it runs under this planner's pricing (units and m filled in)."""
        return self.pricing_for(problem).price(problem, plan)

    def plan(self, problem: Problem, *, check: bool = False, repair: bool = False,
             settings=None) -> Answer:
        """The answer for `problem`: searched and priced; with `check` (or `repair`) run in
        the simulator; with `repair`, re-planned or re-provisioned where it is short."""
        if self.schedule == AUTO and self.pricing is None:
            return self._auto(problem, check=check or repair, repair=repair,
                              settings=settings)
        answer = self._search(problem, self.pricing_for(problem))
        if (check or repair) and answer.feasible:
            answer.check = self.check(answer, repair=repair, settings=settings)
        return answer

    def _auto(self, problem: Problem, *, check: bool = False, repair: bool = False,
              settings=None) -> Answer:
        """Plan under every schedule; keep the cheapest answer, saying what the others cost.
        With the simulator's check, each answer is checked (and repaired, with `repair`) and
        the cheapest the simulator stands behind is kept (the cost of the plan it confirms,
        re-plans or re-provisions): the stage model prices async plans, the closed form
        gpipe's and 1f1b's, and the simulator is the one judge of both. When the simulator
        confirms none, the cheapest by the pricing is kept, its check saying so."""
        answers = [self._search(problem, self.pricing_for(problem, s)) for s in SCHEDULES]
        priced = {a.pricing.schedule: (a.cost_usd if a.feasible else None) for a in answers}
        best = min(answers, key=lambda a: a.cost_usd)  # min keeps the first of a tie
        if check:
            for a in answers:
                if a.feasible:
                    a.check = self.check(a, repair=repair, settings=settings)
            held = {a.pricing.schedule: a.check.extra["final_simulated_cost_usd"]
                    for a in answers if a.check is not None and a.check.meets_limit}
            if held:
                best = min((a for a in answers if a.pricing.schedule in held),
                           key=lambda a: held[a.pricing.schedule])
            best.notes["schedule_auto_simulated"] = {
                a.pricing.schedule: {"status": a.check.status if a.check else None,
                                     "cost_usd": held.get(a.pricing.schedule)}
                for a in answers}
        best.notes["schedule_auto"] = priced
        return best

    def _search(self, problem: Problem, pricing: Pricing) -> Answer:
        if self.search in searches.EXACT_NAMES:
            options = {k: v for k, v in self.options.items() if k != "seed"}
            if self.search == "exact-flushed" and not pricing.flushed:
                raise ValueError("exact-flushed prices the default model's flushed schedule; "
                                 "this problem uses the " + pricing.describe())
            answer = searches.exact(problem, pricing, options=options, max_work=self.max_work)
            answer.scheduler = self.search  # the name asked for (exact-flushed: by name)
            return answer
        return searches.scheduler(problem, pricing, self.search, self.options, self.seed)

    def check(self, answer: Answer, *, repair: bool = False, settings=None, replan=None):
        """The simulator's check of `answer` (planner/check.py); with `repair`, re-planned at
        raised floors (by `replan(problem) -> Answer`, default this planner's search), then
        re-provisioned."""
        from heterps_sim.planner.check import verify_plan
        problem, pricing = answer.problem, answer.pricing

        def evaluate(plan: Plan) -> RunResult:
            return pricing.price(problem, plan)[1]

        def search_again(raised: Problem) -> Answer:
            return self._search(raised, pricing)

        return verify_plan(problem, answer.plan, answer.result, evaluate, settings,
                           reprovision=repair,
                           replan=(replan or search_again) if repair else None)

    def with_search(self, search: str, **options) -> Planner:
        return replace(self, search=search, options=options)
