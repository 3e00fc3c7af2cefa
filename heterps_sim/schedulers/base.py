"""The scheduler protocol: `schedule(problem, evaluate) -> Plan`.

A scheduler only searches type assignments; provisioning (how many units per stage) is the
cost model's, shared by all, so schedulers differ only in their search. `evaluate` is an
`Evaluator`: the analytic model (or, later, the simulator) behind one callable that counts
how often it is used. Each scheduler owns a small pydantic `Config` (extra fields forbidden).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, Field

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.core.result import RunResult
from heterps_sim.cost.reference import evaluate_plan


class SchedulerConfig(BaseModel):
    """Base of every scheduler's Config: unknown options are errors."""

    model_config = ConfigDict(extra="forbid")
    seed: int = 0
    """Seed of any randomness; same seed, same plan."""


class BudgetedConfig(SchedulerConfig):
    """Config of the budgeted searches (random, greedy, genetic)."""

    budget: int = Field(default=20_000, ge=1)
    """Plan evaluations to spend (one more re-checks the winner; see search_space)."""
    max_stages: int = Field(default=16, ge=1)
    """Most stages of the random plans the search draws."""


class Evaluator:
    """evaluate(plan) -> RunResult, counting calls; `mode` is the provisioning mode."""

    def __init__(self, problem: Problem, mode: str = "least",
                 fn: Callable[[Problem, Plan, str], RunResult] = evaluate_plan):
        self.problem, self.mode, self._fn = problem, mode, fn
        self.count = 0

    def __call__(self, plan: Plan) -> RunResult:
        self.count += 1
        return self._fn(self.problem, plan, self.mode)


class Scheduler(Protocol):
    name: ClassVar[str]
    Config: ClassVar[type[SchedulerConfig]]

    def __init__(self, config: SchedulerConfig | None = None) -> None: ...

    def schedule(self, problem: Problem, evaluate: Evaluator) -> Plan: ...


class NoFeasiblePlan(Exception):
    """The scheduler found no plan meeting the limit; the message says why."""


@dataclass(slots=True)
class ScheduleOutcome:
    """What one scheduler run produced, with the bookkeeping every run records."""

    scheduler: str
    plan: Plan | None
    result: RunResult | None
    evaluations: int
    wall_s: float
    notes: dict = field(default_factory=dict)

    def to_json_dict(self) -> dict:
        return {"scheduler": self.scheduler, "evaluations": self.evaluations,
                "wall_s": self.wall_s, "notes": self.notes,
                "plan": self.plan.to_json_dict() if self.plan else None,
                "result": self.result.to_json_dict() if self.result else None}


def run_scheduler(scheduler, problem: Problem, mode: str = "least") -> ScheduleOutcome:
    """Run one scheduler and evaluate its plan with the same evaluator."""
    evaluate = Evaluator(problem, mode)
    start = time.perf_counter()
    notes: dict = {}
    try:
        plan = scheduler.schedule(problem, evaluate)
    except NoFeasiblePlan as exc:
        return ScheduleOutcome(scheduler.name, None, None, evaluate.count,
                               time.perf_counter() - start, {"reason": str(exc)})
    wall = time.perf_counter() - start
    notes.update(getattr(scheduler, "notes", {}) or {})
    result = evaluate(plan)
    return ScheduleOutcome(scheduler.name, plan, result, evaluate.count - 1, wall, notes)
