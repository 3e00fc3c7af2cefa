"""The report's simulator check: the plans the headline compares, run in the simulator.

The headline compares analytic costs; a plan the simulator cannot run at the limit does not
deliver them. So our plan and the best single-type plan are each checked as `heterps-sim
simulate` checks a plan (planner/check.py: the deterministic effects on, seed 0, the plan's
own schedule and microbatches; a plan that misses the limit is re-planned by the same
scheduler and re-provisioned, within the same bounds), and the report prints the model's and
the simulator's numbers side by side, and the cost ratio of the two plans the simulator
finds meeting the limit.
"""

from __future__ import annotations

import math

CHECKED = (("exact", "ours"), ("homogeneous", "best single type"))
"""Scheduler -> its name in the report: the two plans the headline's ratios compare."""

ACTED = ("replanned", "reprovisioned")
"""Check statuses in which `simulate` ends with another plan, one that meets the limit."""


def _changes(check) -> str:
    """What `simulate` did to the plan: 're-planned', 're-provisioned' or both."""
    done = [w for w, did in (("re-planned", check.replanned),
                             ("re-provisioned", check.reprovisioned)) if did]
    return " and ".join(done) or "changed"


def check_plans(problem, outcomes) -> dict:
    """Scheduler name -> Verification (re-planned and re-provisioned as `simulate` does),
    for each CHECKED plan that meets the limit: ours re-planned by the planner's exact
    search, the best one-type plan by the one-type search (never by another type's plan)."""
    from heterps_sim.planner import Planner
    from heterps_sim.planner.baseline import one_type_baselines
    planner = Planner()
    checks = {}
    for name, _ in CHECKED:
        o = outcomes[name]
        if o.plan is None or o.result is None or not o.result.feasible:
            continue
        replan = None
        if name != "exact":
            def replan(raised, pricing=o.pricing):
                return one_type_baselines(raised, pricing).one_type or planner.plan(raised)
        checks[name] = planner.check(o, repair=True, replan=replan)
    return checks


def confirmed_usd(check) -> float:
    """The cost of the plan `simulate` ends with, if the simulator finds it meeting the limit
    (billed as the cost model bills a job); inf otherwise."""
    if check is None or not check.meets_limit:
        return math.inf
    return check.extra.get("final_simulated_cost_usd", check.final_simulated.cost_usd)


def vs_limit_pct(throughput: float, limit: float) -> float:
    return 100.0 * (throughput / limit - 1.0) if limit > 0 else math.nan


def _units(result) -> str:
    return "-".join(str(s.num_replicas) for s in result.stages)


def _row(label: str, how: str, analytic, simulated, simulated_usd: float, limit: float) -> str:
    usd = f"{simulated_usd:,.4g}" if math.isfinite(simulated_usd) else "-"
    return (f"| {label} | {how} | {_units(simulated)} | {analytic.throughput:,.0f} | "
            f"{simulated.throughput:,.0f} | {vs_limit_pct(simulated.throughput, limit):+.1f}% | "
            f"{analytic.cost_usd:,.4g} | {usd} |")


def check_table(checks: dict, limit: float) -> str:
    """Per checked plan: as scheduled, and (where `simulate` changes it) as it ends."""
    lines = ["| plan | as | units per stage | model samples/s | simulated samples/s | "
             "simulated vs limit | model USD | simulated USD |", "|---" * 8 + "|"]
    for name, label in CHECKED:
        c = checks.get(name)
        if c is None:
            lines.append(f"| {label} | no plan at this limit | | | | | | |")
            continue
        lines.append(_row(label, "scheduled", c.analytic, c.simulated,
                          c.extra.get("simulated_cost_usd", c.simulated.cost_usd), limit))
        if c.status in ACTED:
            lines.append(_row(label, f"{_changes(c)} by `simulate`", c.final_analytic,
                              c.final_simulated, confirmed_usd(c), limit))
        elif c.reprovisioned or c.replanned:  # it tried; the best it found still misses
            lines.append(_row(label, "closest `simulate` finds", c.final_analytic,
                              c.final_simulated, c.extra.get("final_simulated_cost_usd",
                                                             c.final_simulated.cost_usd), limit))
    return "\n".join(lines)


def _outcome(check, label: str, limit: float) -> str:
    if check is None:
        return f"{label}: no plan meets the limit in the model"
    if not check.simulated.extra.get("simulated", True):
        return f"{label}: the simulator could not run it ({check.simulated.reason})"
    if check.status == "confirmed":
        return f"{label}: meets the limit as scheduled ({confirmed_usd(check):,.4g} USD)"
    if check.meets_limit:
        return (f"{label}: {vs_limit_pct(check.simulated.throughput, limit):+.1f}% as scheduled, "
                f"meets the limit once {_changes(check)} "
                f"({confirmed_usd(check):,.4g} USD)")
    return (f"{label}: misses the limit ({vs_limit_pct(check.final_simulated.throughput, limit):+.1f}"
            f"% at best)")


def verdict(checks: dict, limit: float) -> str:
    """What the simulator says of both plans, and the cost ratio it confirms (if any)."""
    parts = [_outcome(checks.get(name), label, limit) for name, label in CHECKED]
    text = "In the simulator, " + "; ".join(parts) + "."
    x = simulated_ratio(checks)
    if math.isfinite(x):
        text += f" So the single type pays {x:.2f}x ours in the simulator."
    elif math.isfinite(confirmed_usd(checks.get("exact"))):
        text += " So only our plan meets the limit in the simulator."
    elif math.isfinite(confirmed_usd(checks.get("homogeneous"))):
        text += (" So only the single-type plan meets the limit in the simulator: the "
                 "model's ratio is not a saving the simulator confirms.")
    return text


def simulated_ratio(checks: dict) -> float:
    """Single type's simulator-confirmed cost / ours (nan unless both meet the limit)."""
    ours, single = (confirmed_usd(checks.get(n)) for n, _ in CHECKED)
    return single / ours if math.isfinite(ours) and math.isfinite(single) else math.nan


def headline_cells(checks: dict) -> dict:
    """The headline's simulator columns: each plan's confirmed cost (or how far it misses),
    and the ratio of the two."""
    def cell(name):
        c = checks.get(name)
        if c is None:
            return "none"
        if c.meets_limit:
            return f"{confirmed_usd(c):,.4g}"
        lim = c.analytic.throughput_limit
        return f"misses ({vs_limit_pct(c.final_simulated.throughput, lim):+.1f}%)"
    x = simulated_ratio(checks)
    return {"sim_ours": cell("exact"), "sim_single": cell("homogeneous"),
            "sim_x": f"{x:.2f}x" if math.isfinite(x) else "n/a"}
