"""What the analytic model misses: one plan simulated with each cluster effect alone.

`heterps-sim effects` prints these rows: the analytic model, the simulator with every effect
off (it reproduces the analytic model), each effect of des.EFFECTS on its own, then all of them
together. Every simulation shares the other options (schedule, microbatches, steps, the PS
model, the H-PS features) and the seed, so a row differs from "des: all off" by its effect only:

    configuration      feasible  throughput  vs analytic %  step ms  cost USD  bubble
    analytic           ...
    des: all off       ...
    des: bubbles only  ...
    des: allreduce only ... (one row per effect of des.EFFECTS)
    des: all on        ...
"""

from __future__ import annotations

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.core.result import RunResult
from heterps_sim.des.options import EFFECTS, DesOptions


def effect_configurations() -> list[tuple[str, frozenset[str]]]:
    """(label, effects) of every simulated row, in the table's order."""
    return ([("des: all off", frozenset())] +
            [(f"des: {e} only", frozenset([e])) for e in EFFECTS] +
            [("des: all on", frozenset(EFFECTS))])


def effects_rows(problem: Problem, plan: Plan, options: DesOptions | None = None,
                 mode: str = "least", *, seed: int = 0, progress: bool | None = None) -> list[dict]:
    """One row per configuration: analytic, DES with all off, each effect alone, all on.
    `options` sets everything but the effects (replaced per row); raises cost.PlanError when
    the plan does not fit the problem. `progress`: a tqdm bar (None: only on a terminal)."""
    from tqdm import tqdm

    from heterps_sim.cost.reference import evaluate_plan
    from heterps_sim.des import simulate
    from heterps_sim.planner.check import job_cost_usd
    options = options or DesOptions()
    analytic = evaluate_plan(problem, plan, mode)
    rows = [_row("analytic", analytic, analytic)]
    for label, effects in tqdm(effect_configurations(), desc="effects", unit="run", leave=False,
                               disable=None if progress is None else not progress):
        run = simulate(problem, plan, seed=seed, options=options.with_effects(effects),
                       record_spans=False)
        # billed as the cost model bills the analytic row (startup, whole billing periods)
        rows.append(_row(label, run.result, analytic, job_cost_usd(problem, plan, run.result)))
    return rows


def _row(label: str, result: RunResult, analytic: RunResult,
         cost_usd: float | None = None) -> dict:
    ref = analytic.throughput
    return {"configuration": label, "feasible": result.feasible, "throughput": result.throughput,
            "vs analytic %": 100.0 * (result.throughput / ref - 1.0) if ref > 0 else float("nan"),
            "step ms": result.step_time_s * 1e3,
            "cost USD": result.cost_usd if cost_usd is None else cost_usd,
            "bubble": result.extra.get("bubble_fraction", 0.0)}
