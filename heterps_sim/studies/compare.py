"""Compare schedulers on one problem: cost, throughput, gap to the exact optimum, effort.

Every scheduler runs through the one planner (planner/planner.py) and its plan is priced by the
same pricing as the exact answer, so only the search differs.
`budget` (evaluations) goes to every scheduler whose Config has a `budget` field, so searches
are compared at equal effort; the exact optimum is always run as the yardstick.
"""

from __future__ import annotations

import math

import pandas as pd

from heterps_sim.core.problem import Problem
from heterps_sim.planner import Planner
from heterps_sim.schedulers.registry import scheduler_class, scheduler_names

COLUMNS = ["scheduler", "feasible", "cost_usd", "gap_pct", "proven", "throughput",
           "num_stages", "units", "evaluations", "wall_s", "reason"]


def scheduler_options(name: str, budget: int | None, seed: int) -> dict:
    options: dict = {"seed": seed}
    if budget is not None and "budget" in scheduler_class(name).Config.model_fields:
        options["budget"] = budget
    return options


def compare(problem: Problem, names: list[str] | None = None, *, mode: str = "least",
            budget: int | None = None, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """One row per scheduler; `gap_pct` = cost / exact optimum - 1, in percent: infinite for
    a scheduler that found no feasible plan where one exists, NaN when none does (no optimum
    to compare with)."""
    from tqdm import tqdm
    names = list(names or scheduler_names())
    for name in names:
        scheduler_class(name)  # unknown names fail before anything runs
    exact = Planner(search="exact", seed=seed, provisioning=mode).plan(problem)
    best = exact.cost_usd
    rows = []
    for name in tqdm(names, desc="schedulers", unit="scheduler", disable=not progress or None,
                     leave=False):
        outcome = exact if name == "exact" else Planner(
            search=name, options=scheduler_options(name, budget, seed), seed=seed,
            provisioning=mode).plan(problem)
        r = outcome.result
        feasible = bool(r is not None and r.feasible)
        cost = r.cost_usd if feasible else math.inf
        rows.append({
            "scheduler": name, "feasible": feasible, "cost_usd": cost,
            "gap_pct": 100.0 * (cost / best - 1.0) if math.isfinite(best) else math.nan,
            "proven": outcome.proven,
            "throughput": r.throughput if r is not None else 0.0,
            "num_stages": len(r.stages) if r is not None else 0,
            "units": ", ".join(f"{k} x{v}" for k, v in r.units_per_type.items()) if r else "",
            "evaluations": outcome.evaluations, "wall_s": outcome.wall_s,
            "reason": (r.reason if r is not None else outcome.notes.get("reason", "")),
        })
    return pd.DataFrame(rows, columns=COLUMNS)
