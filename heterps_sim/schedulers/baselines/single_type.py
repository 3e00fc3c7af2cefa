"""Single-type baselines: every layer on one resource type (one stage), best type kept.

`homogeneous` tries every type, `cpu-only` / `gpu-only` only the CPU / GPU types: the
"best single-type plan" that heterogeneous plans are compared against.
"""

from __future__ import annotations

from heterps_sim.core.plan import Plan, Stage
from heterps_sim.core.problem import Problem
from heterps_sim.schedulers.base import Evaluator, NoFeasiblePlan, SchedulerConfig


class HomogeneousScheduler:
    name = "homogeneous"
    kinds: tuple[str, ...] = ("cpu", "gpu")

    class Config(SchedulerConfig):
        pass

    def __init__(self, config: SchedulerConfig | None = None):
        self.config = config or self.Config()
        self.notes: dict = {}

    def candidate_types(self, problem: Problem) -> list[int]:
        if not problem.type_kinds:
            return list(range(problem.num_types))
        return [j for j, k in enumerate(problem.type_kinds) if k in self.kinds]

    def schedule(self, problem: Problem, evaluate: Evaluator) -> Plan:
        best_plan, best_cost, reasons = None, float("inf"), []
        for j in self.candidate_types(problem):
            plan = Plan(stages=(Stage(layers=problem.layer_names, resource=problem.type_names[j]),))
            result = evaluate(plan)
            if result.feasible and result.cost_usd < best_cost:
                best_plan, best_cost = plan, result.cost_usd
            elif not result.feasible:
                reasons.append(result.reason)
        if best_plan is None:
            what = "/".join(self.kinds)
            detail = f"; e.g. {reasons[0]}" if reasons else " (no such type in the cluster)"
            raise NoFeasiblePlan(f"no single {what} type meets the limit{detail}")
        return best_plan


class CpuOnlyScheduler(HomogeneousScheduler):
    name = "cpu-only"
    kinds = ("cpu",)


class GpuOnlyScheduler(HomogeneousScheduler):
    name = "gpu-only"
    kinds = ("gpu",)
