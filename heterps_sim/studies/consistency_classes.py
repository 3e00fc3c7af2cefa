"""The flushed closed form against its simulator where the optima's benchmark does not go.

studies/self_consistency.py checks the exact optimum of each problem, and the optima are
mostly single-type, lightly loaded plans on which the closed form and the simulator agree by
construction. This module draws seeded problems and plans of four classes that stress what the
closed form (cost/flush.py) approximates, and checks each as the planner's check runs it (the
deterministic effects on, the plan's schedule and m, seed 0):

    mixed       one stage of two types (plan.Stage.replicas): units of different speeds
                sharing a stage, routed as the engine routes them (core/lanes.py)
    ps-bound    a slower parameter server (its shards' bandwidth chosen so the step's pulls
                and pushes take 0.8x to 4x the step without them), its side in the embedding
                layers' odt as every scenario has it (core/ps_odt.py)
    contention  boundary bytes scaled so that a step's messages take 0.5x to 3x the
                stage's work, 2 to 4 microbatches per unit: the network interfaces queue
    integer-m   single-type stages, small m (2-7) that some stage's unit count does not
                divide: the simulator routes whole microbatches, unevenly

    cases = class_cases("mixed", 30)        seeded (problem, plan) pairs of that class
    row = check_case(case)                  flushed, simulated, error, tags, ceiling
    summary(rows)                           per class and per tag: cases, MAPE, worst, sign,
                                            and the MAPE any closed form could reach

Every case is a random_default_problem (heterps_sim.testing) with a random plan: nothing is
tuned to agree. Tags: multi-stage (2+ stages), mixed-type (2+ types in the plan), ps-bound
(the shards are busy 80%+ of the simulated step).

The ceiling: the exact search's Lagrangian bound rests on T >= A + PF' + C_g + pb_g + r_g for
every stage g (cost/flush.relaxation_step_time), so no closed form the search can keep exact
under that bound may read more than B / that (PS-capped); where the simulator runs faster, the
closed form must stay pessimistic. `reachable_error` is the error of the best such closed form:
0 where the simulated throughput lies at or below the ceiling, ceiling / simulated - 1 where it
lies above. Plans with a mixed stage have none (the search does not plan them: the closed form
is free there).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from heterps_sim.core import ps_odt
from heterps_sim.core.plan import Plan, Stage, plan_from_assignment
from heterps_sim.core.problem import Problem
from heterps_sim.core.ps_spec import DEFAULT_PS
from heterps_sim.cost import ps_traffic
from heterps_sim.cost.flush import flushed_throughput, relaxation_step_time
from heterps_sim.cost.reference import MixedTerms, plan_stages
from heterps_sim.des import DesOptions, simulate
from heterps_sim.des.options import EFFECTS, VARIABILITY
from heterps_sim.testing import random_default_problem

CLASSES = ("mixed", "ps-bound", "contention", "integer-m")
DETERMINISTIC = tuple(e for e in EFFECTS if e not in VARIABILITY)
"""The effects the planner's check switches on (every cluster effect that draws nothing)."""
NUM_STEPS = 4
"""Simulated steps, as the check (the first is warm-up; a flush makes every step alike)."""
PS_BOUND_SHARE = 0.8
"""Tag ps-bound: the shards serve pulls and pushes for at least this share of the step."""


@dataclass(frozen=True, slots=True)
class ClassCase:
    kind: str
    seed: int
    problem: Problem
    plan: Plan


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassRow:
    kind: str
    seed: int
    stages: int
    units: int
    microbatches: int
    schedule: str
    tags: tuple[str, ...]
    flushed: float
    simulated: float
    ceiling: float | None = None
    """The most throughput a closed form may read under the search's bound (module
    docstring); None for a plan with a mixed stage."""

    @property
    def error(self) -> float:
        """flushed / simulated - 1 (positive: the closed form promises more than runs)."""
        return self.flushed / self.simulated - 1.0

    @property
    def reachable_error(self) -> float:
        """The best closed form's error under the search's bound (0 where none binds)."""
        if self.ceiling is None or self.simulated <= self.ceiling:
            return 0.0
        return self.ceiling / self.simulated - 1.0


def _plan(rng: np.random.Generator, problem: Problem, *, max_k: int = 3) -> Plan:
    asg = [int(rng.choice(np.flatnonzero(problem.runnable[i]))) for i in range(problem.num_layers)]
    plan = plan_from_assignment(problem.layer_names, problem.type_names, asg)
    stages = tuple(replace(s, num_replicas=int(rng.integers(1, max_k + 1))) for s in plan.stages)
    return Plan(stages=stages, num_microbatches=int(rng.integers(2, 9)),
                schedule=str(rng.choice(["gpipe", "1f1b"])))


def runs(problem: Problem, plan: Plan) -> bool:
    """Every type of every stage holds its units in memory and gets the minimum batch."""
    for t, s in zip(plan_stages(problem, plan), plan.stages):
        for part in (t.parts if isinstance(t, MixedTerms) else (t,)):
            if not part.k_lo <= s.num_replicas <= part.k_hi:
                return False
    return True


def _mixed(rng, problem: Problem) -> tuple[Problem, Plan] | None:
    plan = _plan(rng, problem)
    g = int(rng.integers(0, len(plan.stages)))
    s = plan.stages[g]
    idx = [problem.layer_names.index(name) for name in s.layers]
    other = [problem.type_names[j] for j in np.flatnonzero(problem.runnable[idx].all(axis=0))
             if problem.type_names[j] != s.resource]
    if not other:
        return None
    mixed = Stage(layers=s.layers, replicas=((s.resource, int(rng.integers(1, 3))),
                                             (str(rng.choice(other)), int(rng.integers(1, 3)))))
    return problem, replace(plan, stages=plan.stages[:g] + (mixed,) + plan.stages[g + 1:])


def _ps_bound(rng, problem: Problem) -> tuple[Problem, Plan] | None:
    sparse = np.array(problem.sparse_bytes, dtype=float)
    if sparse.sum() <= 0:
        sparse[0] = float(rng.lognormal(8, 1))
    problem = replace(problem, sparse_bytes=sparse)
    plan = _plan(rng, problem)
    if not runs(problem, plan):
        return None
    step = problem.batch_size / flushed_throughput(problem, plan)  # without the PS side
    target = float(np.exp(rng.uniform(np.log(0.8), np.log(4.0)))) * step
    tiers = DEFAULT_PS.seconds_per_byte - 1.0 / DEFAULT_PS.shard_bytes_per_s
    per_byte = target * DEFAULT_PS.num_shards / (2.0 * problem.batch_size * sparse.sum())
    if per_byte <= 2.0 * tiers:
        return None
    ps = DEFAULT_PS.model_copy(update={"shard_bytes_per_s": 1.0 / (per_byte - tiers)})
    side = ps_odt.ps_side_s(sparse, problem.batch_size, ps, problem.latency_s)
    return replace(problem, ps=ps, odt_s=ps_odt.with_ps_side(problem.odt_s, side)), plan


def _contention(rng, problem: Problem) -> tuple[Problem, Plan] | None:
    if problem.num_layers < 2:
        return None
    plan = _plan(rng, problem)
    if len(plan.stages) < 2 or not runs(problem, plan):
        return None
    step = problem.batch_size / flushed_throughput(problem, plan)
    net = float(np.min(problem.network_bytes_per_s))
    bb = np.array(problem.boundary_bytes, dtype=float)
    want = float(np.exp(rng.uniform(np.log(0.5), np.log(3.0)))) * step * net
    scaled = np.where(np.arange(len(bb)) < problem.num_layers - 1, np.maximum(bb, 1.0), 0.0)
    scaled *= want / max(float(scaled.max()), 1.0)
    k = max(s.num_replicas for s in plan.stages)
    plan = replace(plan, num_microbatches=int(k * rng.integers(2, 5)))
    return replace(problem, boundary_bytes=scaled), plan


def _integer_m(rng, problem: Problem) -> tuple[Problem, Plan] | None:
    plan = _plan(rng, problem, max_k=4)
    m = int(rng.integers(2, 8))
    if all(m % s.num_replicas == 0 for s in plan.stages):
        return None
    return problem, replace(plan, num_microbatches=m)


_MAKE = {"mixed": _mixed, "ps-bound": _ps_bound, "contention": _contention,
         "integer-m": _integer_m}


def class_cases(kind: str, count: int, *, first_seed: int = 0) -> list[ClassCase]:
    """`count` cases of one class, from seeds first_seed, first_seed + 1, ... (a seed whose
    draw does not fit the class, or whose units do not fit memory, is skipped)."""
    if kind not in _MAKE:
        raise ValueError(f"kind must be one of {CLASSES}, got {kind!r}")
    out, seed = [], first_seed
    while len(out) < count and seed < first_seed + 50 * count:
        rng = np.random.default_rng([seed, CLASSES.index(kind)])
        problem = random_default_problem(rng, int(rng.integers(2, 6)), int(rng.integers(2, 4)))
        made = _MAKE[kind](rng, problem)
        if made is not None and runs(*made):
            out.append(ClassCase(kind, seed, *made))
        seed += 1
    return out


def tags(problem: Problem, plan: Plan, simulated: float) -> tuple[str, ...]:
    """multi-stage, mixed-type, ps-bound (module docstring) where they apply."""
    out = []
    if len(plan.stages) > 1:
        out.append("multi-stage")
    if len({t for s in plan.stages for t, _ in s.groups}) > 1:
        out.append("mixed-type")
    cap = ps_traffic.max_throughput(problem)
    if simulated > 0 and simulated / cap >= PS_BOUND_SHARE:
        out.append("ps-bound")
    return tuple(out)


def check_case(case: ClassCase, *, effects: tuple[str, ...] = DETERMINISTIC,
               share: str = "equal") -> ClassRow:
    """The case's closed form and simulated throughput, the effects on, seed 0."""
    opts = DesOptions.with_effects(effects, num_steps=NUM_STEPS, share=share)
    sim = simulate(case.problem, case.plan, seed=0, options=opts, record_spans=False).result
    m = int(sim.extra["num_microbatches"])
    on = dict(allreduce="allreduce" in effects, transfers="transfers" in effects,
              contention="contention" in effects, ps="ps" in effects, share=share)
    flushed = flushed_throughput(case.problem, case.plan, m, **on)
    single = not any(isinstance(t, MixedTerms) for t in plan_stages(case.problem, case.plan))
    ceiling = (flushed_throughput(case.problem, case.plan, m, step_time=relaxation_step_time,
                                  **on) if single else None)
    return ClassRow(kind=case.kind, seed=case.seed, stages=len(case.plan.stages),
                    units=sum(s.num_replicas for s in case.plan.stages), microbatches=m,
                    schedule=case.plan.schedule, tags=tags(case.problem, case.plan,
                                                           sim.throughput),
                    flushed=flushed, simulated=sim.throughput, ceiling=ceiling)


def deterministic_error(case: ClassCase) -> float:
    """check_case(case).error: the closed form against the simulator, as the check runs."""
    return check_case(case).error


def group_summary(rows: list[ClassRow]) -> dict:
    """Cases, MAPE (%), median and worst error (signed, %), how many over / under, and
    the MAPE of the best closed form under the search's bound (module docstring)."""
    errors = np.array([r.error for r in rows])
    worst = rows[int(np.argmax(np.abs(errors)))]
    reachable = np.array([r.reachable_error for r in rows])
    return {"cases": len(rows), "mape_pct": 100.0 * float(np.abs(errors).mean()),
            "reachable_mape_pct": 100.0 * float(np.abs(reachable).mean()),
            "median_pct": 100.0 * float(np.median(np.abs(errors))),
            "worst_pct": 100.0 * worst.error, "worst_seed": worst.seed,
            "over": int((errors > 1e-9).sum()), "under": int((errors < -1e-9).sum()),
            "mean_signed_pct": 100.0 * float(errors.mean())}


def summary(rows: list[ClassRow]) -> dict[str, dict]:
    """group_summary per class, then per tag over every row, then over all rows."""
    groups: dict[str, list[ClassRow]] = {}
    for r in rows:
        groups.setdefault(r.kind, []).append(r)
    for tag in ("multi-stage", "mixed-type", "ps-bound"):
        groups[f"tag {tag}"] = [r for r in rows if tag in r.tags]
        groups[f"not {tag}"] = [r for r in rows if tag not in r.tags]
    groups["all"] = list(rows)
    return {name: group_summary(g) for name, g in groups.items() if g}


__all__ = ["CLASSES", "ClassCase", "ClassRow", "check_case", "class_cases",
           "deterministic_error", "summary"]
