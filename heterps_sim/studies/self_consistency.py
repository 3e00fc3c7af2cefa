"""Does the analytic model agree with its own simulator? One exact optimum at a time.

    case = consistency_case(name, problem)     the exact optimum (least provisioning), its
                                               analytic throughput, the simulated throughput
                                               with the deterministic effects on (the check
                                               `schedule` and `simulate` run, studies/verify.py)
                                               and the same plan with no effect, then with the
                                               effects switched on one after another; and the
                                               closed form of its flushed schedule
                                               (cost/flush.py) at the simulator's m
    summary(cases)                             MAPE, median and worst error of the stage model
                                               and of the flushed closed form, and the mean
                                               attribution per effect

Attribution, cumulative in the order of DETERMINISTIC_EFFECTS (bubbles, allreduce,
transfers, contention, ps): `none` is simulated(no effect) / analytic - 1 (what the model
charges that the simulator's stage work does not: the all-reduce and the PS cap are not stage
work, so none >= 0); effect e is simulated(effects up to e) / simulated(effects before e) - 1,
what e adds on top of the ones before it. The flush comes first because the check always runs
it (without it the pipeline is continuous, and message delays act differently). The parts
multiply to the total: 1 + error = (1 + none) x prod_e (1 + e).

Each case is tagged multi-stage, mixed-type (two or more types in the plan) and ps-bound (the
shards busy 80%+ of the simulated step), so the benchmark reports those plans apart from the
rest; studies/consistency_classes.py draws the plans the optima rarely are (mixed stages, a
slow PS, heavy messages, uneven m) and checks them the same way.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from heterps_sim.core.problem import Problem
from heterps_sim.cost.flush import FLUSHED, flushed_throughput
from heterps_sim.des import simulate
from heterps_sim.des.options import DesOptions
from heterps_sim.planner.check import DETERMINISTIC_EFFECTS, VerifySettings
from heterps_sim.schedulers.base import run_scheduler
from heterps_sim.schedulers.registry import make_scheduler
from heterps_sim.studies import consistency_classes


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsistencyCase:
    name: str
    layers: int
    types: int
    stages: int
    units: int
    microbatches: int
    analytic: float
    """Analytic throughput of the exact optimum (samples/s)."""
    simulated: float
    """Simulated throughput, deterministic effects on (samples/s)."""
    flushed: float = 0.0
    """The closed form of the plan's flushed schedule (cost/flush.py; samples/s)."""
    parts: dict[str, float] = field(default_factory=dict)
    """Attribution (module docstring): 'none' and each effect; relative changes."""
    wall_s: float = 0.0
    tags: tuple[str, ...] = ()
    """multi-stage, mixed-type, ps-bound where they apply (studies/consistency_classes.tags):
    the benchmark reports these plans apart from the rest."""

    @property
    def error(self) -> float:
        """analytic / simulated - 1: the stage model's error against the simulator."""
        return self.analytic / self.simulated - 1.0

    @property
    def flushed_error(self) -> float:
        """flushed / simulated - 1: the closed form's error against the simulator."""
        return self.flushed / self.simulated - 1.0


def consistency_case(name: str, problem: Problem, *, attribute: bool = True,
                     settings: VerifySettings | None = None,
                     objective: str = "stage") -> ConsistencyCase | None:
    """The exact optimum of `problem` checked as `schedule` checks it; None when the problem
    has no feasible plan. `objective`: "stage" (the stage model's optimum and units), "flushed"
    (its cuts provisioned as the plan runs) or "answer": the plan and prediction the commands
    print (the planner's)."""
    start = time.perf_counter()
    if objective == "answer":  # the plan and prediction the commands print: the planner's
        from heterps_sim.planner import Planner
        outcome = Planner().plan(problem)
    else:
        outcome = run_scheduler(make_scheduler("exact"), problem, "least")
        if objective == "flushed" and outcome.plan is not None:  # exact's cuts as they run
            from heterps_sim.planner import Pricing
            plan, result = Pricing.of(problem).price(problem, outcome.plan.with_replicas(None))
            outcome = type(outcome)(outcome.scheduler, plan, result, 0, 0.0)
    if outcome.plan is None or outcome.result is None or not outcome.result.feasible:
        return None
    settings = settings or VerifySettings()
    plan = outcome.plan.with_replicas([s.num_replicas for s in outcome.result.stages])

    def run(effects) -> tuple[float, int]:
        opts = DesOptions.with_effects(tuple(effects), num_steps=settings.num_steps)
        r = simulate(problem, plan, seed=settings.seed, options=opts, record_spans=False).result
        return r.throughput, int(r.extra.get("num_microbatches", 0))

    sim, m = run(settings.effects)
    flushed = (flushed_throughput(problem, plan, m, allreduce="allreduce" in settings.effects,
                                  transfers="transfers" in settings.effects,
                                  contention="contention" in settings.effects,
                                  ps="ps" in settings.effects)
               if plan.schedule in FLUSHED and "bubbles" in settings.effects else math.nan)
    parts: dict[str, float] = {}
    if attribute:
        before, _ = run(())
        parts["none"] = before / outcome.result.throughput - 1.0
        for i, e in enumerate(settings.effects):
            now = sim if i == len(settings.effects) - 1 else run(settings.effects[:i + 1])[0]
            parts[e] = now / before - 1.0
            before = now
    return ConsistencyCase(
        name=name, layers=problem.num_layers, types=problem.num_types, stages=len(plan.stages),
        units=sum(s.num_replicas for s in plan.stages), microbatches=m,
        analytic=outcome.result.throughput, simulated=sim, flushed=flushed, parts=parts,
        wall_s=time.perf_counter() - start, tags=consistency_classes.tags(problem, plan, sim))


def summary(cases: list[ConsistencyCase]) -> dict:
    """MAPE (%), median absolute error (%), cases within 5%, the worst case, for the stage model
    (`analytic`) and the flushed closed form (`flushed`), and the mean attribution per part (%).
    Errors are relative to the simulator: model / simulated - 1."""
    out: dict = {"cases": len(cases)}
    for key, err in (("analytic", lambda c: c.error), ("flushed", lambda c: c.flushed_error)):
        errors = sorted(abs(err(c)) for c in cases)
        worst = max(cases, key=lambda c: abs(err(c)))
        out[key] = {"mape_pct": 100.0 * sum(errors) / len(errors),
                    "median_pct": 100.0 * errors[len(errors) // 2],
                    "within_5pct": sum(e <= 0.05 for e in errors),
                    "worst": worst, "worst_pct": 100.0 * err(worst)}
    keys = list(cases[0].parts) if cases else []
    out["attribution_pct"] = {k: 100.0 * sum(c.parts[k] for c in cases) / len(cases)
                              for k in keys}
    return out


__all__ = ["ConsistencyCase", "DETERMINISTIC_EFFECTS", "consistency_case", "summary"]
