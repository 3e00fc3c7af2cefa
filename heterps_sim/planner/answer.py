"""What the planner answers: the plan, its price under the one pricing, whether it is proven
optimal (or the certified gap), the simulator's check, and the bookkeeping every run records.

`Answer` keeps the field names of a scheduler run (`scheduler`, `plan`, `result`,
`evaluations`, `wall_s`, `notes`, `to_json_dict`), so run folders and tables read either.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.core.result import RunResult
from heterps_sim.planner.pricing import Pricing


@dataclass(slots=True, kw_only=True)
class Answer:
    scheduler: str
    """The search that chose the plan ("exact" or a registered scheduler's name)."""
    plan: Plan | None
    """The plan to run, every stage's units and m set (None: no plan meets the limit)."""
    result: RunResult | None
    """Its price under `pricing` (None when the search found no plan)."""
    pricing: Pricing
    problem: Problem
    """The problem as priced: the input's, or with the parameter-server hosts the planner
    chose (cost/ps_hosts.py)."""
    proven: bool = False
    """The plan is the optimum under `pricing` (or, with no plan, none exists), proven by the
    exact search. Heuristics never prove."""
    lower_bound_usd: float | None = None
    """A certified lower bound on every plan's cost under `pricing` (None: none known)."""
    evaluations: int = 0
    wall_s: float = 0.0
    notes: dict = field(default_factory=dict)
    check: object | None = None
    """The simulator's check (planner/check.Verification), when one ran."""

    @property
    def feasible(self) -> bool:
        return self.result is not None and self.result.feasible

    @property
    def cost_usd(self) -> float:
        return self.result.cost_usd if self.feasible else math.inf

    @property
    def gap(self) -> float | None:
        """cost / lower bound - 1 (0 when proven; None when no bound is known)."""
        if self.proven:
            return 0.0
        if not self.feasible or not self.lower_bound_usd or self.lower_bound_usd <= 0:
            return None
        return max(self.cost_usd / self.lower_bound_usd - 1.0, 0.0)

    @property
    def staleness(self) -> int | None:
        """An async plan's staleness in steps (heterps_sim.core.asynchrony): step t's
        gradient is taken at the weights step t - D started from. None for gpipe and 1f1b."""
        if self.plan is None or self.plan.schedule != "async":
            return None
        from heterps_sim.core.asynchrony import staleness
        return staleness([s.num_replicas for s in self.plan.stages],
                         self.plan.num_microbatches)

    def schedule_line(self) -> str:
        """What an async plan trains like, and (schedule auto) what the other schedules cost;
        "" for a gpipe or 1f1b plan the user asked for (nothing to say)."""
        if self.plan is None or (self.plan.schedule != "async"
                                 and "schedule_auto" not in self.notes):
            return ""
        d = self.staleness
        line = (f"schedule {self.plan.schedule}: " + (
            "synchronous (flushes every step)" if d is None else
            "synchronous (one stage: no step overlaps another)" if d == 0 else
            f"gradients {d} step{'s' if d > 1 else ''} stale (step t's gradient is taken "
            f"at the weights step t - {d} started from)"))
        others = self.notes.get("schedule_auto")
        if others:
            simulated = self.notes.get("schedule_auto_simulated") or {}
            checked = any(v["cost_usd"] is not None for v in simulated.values())
            shown = ", ".join(f"{s} " + ("no plan" if c is None else f"{c:,.6g} USD" + (
                f" ({_after(simulated[s])})" if checked else "")) for s, c in others.items())
            line += ("; auto chose it, the cheapest the simulator stands behind: " if checked
                     else "; auto chose it: ") + shown
        return line

    def optimality(self) -> str:
        """'proven optimal', 'gap <= 3.2% (certified)' or 'not proven (a heuristic)'."""
        # a priced parameter server is chosen among a ladder of host counts (cost/ps_hosts.py:
        # a heuristic set, not every count), so a proof or a bound holds over those choices
        hosts = self.notes.get("ps_choices_searched", 0)
        over = (f" over the {hosts} parameter-server host choices offered" if hosts > 1
                else "")
        if self.proven:
            return ("proven optimal" + over) if self.feasible else \
                ("proven: no plan meets the limit" + over)
        gap = self.gap
        if gap is not None:
            return (f"gap <= {100 * gap:.2f}% (certified lower bound "
                    f"{self.lower_bound_usd:,.6g} USD{over})")
        return "optimality not proven" if self.scheduler == "exact" else \
            f"optimality not proven ({self.scheduler} is a heuristic)"

    def to_json_dict(self) -> dict:
        return {"scheduler": self.scheduler, "pricing": self.pricing.to_json_dict(),
                "proven_optimal": self.proven, "staleness_steps": self.staleness,
                "lower_bound_usd": self.lower_bound_usd, "gap": self.gap,
                "evaluations": self.evaluations, "wall_s": self.wall_s, "notes": self.notes,
                "plan": self.plan.to_json_dict() if self.plan else None,
                "result": self.result.to_json_dict() if self.result else None}


def _after(simulated: dict) -> str:
    """What the simulator's check made of one schedule's answer (Planner._auto)."""
    cost, status = simulated["cost_usd"], simulated["status"]
    if cost is None:
        return "short in the simulator" if status == "missed" else f"simulator: {status}"
    return f"{status}, {cost:,.6g} USD"
