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

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from heterps_sim.core.plan import Plan, plan_from_assignment
from heterps_sim.core.problem import Problem
from heterps_sim.core.result import RunResult
from heterps_sim.cost.reference import evaluate_plan

SERIAL_BELOW = 512
"""evaluate_many costs smaller batches on one numba thread: waking the pool costs more (and,
on a busy machine, can stall for milliseconds)."""


class SchedulerConfig(BaseModel):
    """Base of every scheduler's Config: unknown options are errors; the docstring under a
    field is its description (`heterps-sim schedule --scheduler NAME --set help` lists them)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)
    seed: int = 0
    """Seed of any randomness; same seed, same plan."""


class BudgetedConfig(SchedulerConfig):
    """Config of the budgeted searches (random, greedy, genetic)."""

    budget: int = Field(default=20_000, ge=1)
    """Plan evaluations to spend (one more re-checks the winner; see search_space)."""
    max_stages: int = Field(default=16, ge=1)
    """Most stages of the random plans the search draws."""


class Evaluator:
    """Costs plans and counts every plan costed, in this one place; `mode` is the
    provisioning mode.

    evaluate(plan) -> RunResult; evaluate.evaluate_many(assignments) -> USD per assignment
    (inf when infeasible): batched through the analytic model when `fn` is that model (the
    same numbers as one call each), one call per plan otherwise. Schedulers read `count`;
    plans they cost by other means (an RL trainer's sampled batches) they add with `counted`.
    """

    def __init__(self, problem: Problem, mode: str = "least",
                 fn: Callable[[Problem, Plan, str], RunResult] = evaluate_plan):
        self.problem, self.mode, self._fn = problem, mode, fn
        self.count = 0

    def __call__(self, plan: Plan) -> RunResult:
        self.count += 1
        return self._fn(self.problem, plan, self.mode)

    def evaluate_many(self, assignments: np.ndarray) -> np.ndarray:
        """USD per assignment (one type index per layer per row), inf when infeasible."""
        rows = np.asarray(assignments, np.int64)
        if self._fn is not evaluate_plan:  # e.g. the simulator: one counted call per plan
            names = self.problem.layer_names, self.problem.type_names
            return np.array([self(plan_from_assignment(*names, row)).cost_usd for row in rows],
                            np.float64)
        import numba  # the batched model compiles with numba: loaded only when used

        from heterps_sim.cost.batch import evaluate_assignments
        self.count += len(rows)
        threads = numba.get_num_threads()
        if len(rows) < SERIAL_BELOW:  # thread start-up costs more than it saves
            numba.set_num_threads(1)
        try:
            return evaluate_assignments(self.problem, rows, self.mode).cost_usd
        finally:
            numba.set_num_threads(threads)

    def counted(self, plans: int) -> None:
        """Count plans a scheduler costed with the analytic model outside this evaluator."""
        self.count += plans


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
    """Run one scheduler and evaluate its plan with the same evaluator (the stage model).
    What the commands answer (a plan priced as it runs) is the planner's:
    heterps_sim.planner.Planner."""
    evaluate = Evaluator(problem, mode)
    start = time.perf_counter()
    notes: dict = {}
    try:
        plan = scheduler.schedule(problem, evaluate)
    except NoFeasiblePlan as exc:
        return ScheduleOutcome(scheduler.name, None, None, evaluate.count,
                               time.perf_counter() - start, {"reason": str(exc)})
    notes.update(getattr(scheduler, "notes", {}) or {})
    result = evaluate(plan)
    wall = time.perf_counter() - start
    return ScheduleOutcome(scheduler.name, plan, result, evaluate.count - 1, wall, notes)
