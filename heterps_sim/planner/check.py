"""The planner's check: run a plan in the simulator, and repair it where the simulator
finds it short.

    check = verify_plan(problem, plan, analytic, evaluate)                    # `schedule`
    check = verify_plan(problem, plan, analytic, evaluate, reprovision=True,  # `simulate`
                        replan=search_at_raised_limit)
    check.simulated      RunResult(source="des") of the planned plan
    check.final_plan     the plan to run: the planned one, the re-planned or re-provisioned one
    check.status         confirmed | missed | replanned | reprovisioned | impossible |
                         unresolved | not_run

The simulator runs the plan with the deterministic effects on (`DETERMINISTIC_EFFECTS`:
bubbles, all-reduce, transfers, contention, the parameter server; no jitter, stragglers or
preemption, so the seed changes nothing) under the plan's own schedule and microbatch count.
`evaluate` is the planner's pricing of a plan with its units fixed.

Repair (`reprovision=True`): first, with a `replan` callable (the planner's own search), the
search runs again with its throughput floor raised by the shortfall the closed form predicts
(planner/replan.py), at most `max_replan_rounds` times; the first re-planned plan the simulator
finds meeting the real limit is the one to run (`replanned`). Otherwise the re-planned plan
closest to the limit (or the checked plan, if closer) is re-provisioned (planner/repair.py).
Only the pricing (a callable) and `des.simulate` are used, so any cost model or simulator
physics behind them is checked as it is.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.core.result import RunResult
from heterps_sim.des import DesOptions, simulate
from heterps_sim.des.options import EFFECTS, VARIABILITY
from heterps_sim.planner.repair import Growth, Reprovision
from heterps_sim.planner.replan import (
    MAX_ROUNDS,
    Replan,
    ReplanRound,
    flushed_or_none,
    replan_rounds,
    round_line,
)

DETERMINISTIC_EFFECTS: tuple[str, ...] = tuple(e for e in EFFECTS if e not in VARIABILITY)
"""The effects a check switches on: every cluster effect that does not draw from the seed."""
ENGINES = ("des", "none")
"""`--verify` values: check with the simulator, or not at all."""

Evaluate = Callable[[Plan], RunResult]
"""The analytic model for one plan (its replica counts fixed), as the scheduler used it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifySettings:
    effects: tuple[str, ...] = DETERMINISTIC_EFFECTS
    seed: int = 0
    num_steps: int | None = 4
    """Simulated steps (the first is warm-up); None = DesOptions' default. With the bubbles
    effect every step flushes, so 4 steps give the 8-step throughput within 0.3% on the
    64-type scenarios at half the time."""
    max_resimulations: int = 24
    """Re-provisioning simulates the plan at most this many more times..."""
    max_events: int = 400_000
    """... and stops starting new simulations once they have processed this many SimPy
    events in all: deterministic, unlike a time limit; with contention and the PS on, the
    simulator runs ~200,000 events/s on the 2-core VM (measured under load), so about 2 s."""
    max_replan_rounds: int = MAX_ROUNDS
    """Re-planning runs the planner's search at most this many times (planner/replan.py)."""

    def options(self) -> DesOptions:
        """The simulator's options: these effects, the plan's schedule and microbatches."""
        fields = {} if self.num_steps is None else {"num_steps": self.num_steps}
        return DesOptions.with_effects(self.effects, **fields)


@dataclass(frozen=True, slots=True, kw_only=True)
class Verification:
    status: str
    reason: str
    settings: VerifySettings
    analytic: RunResult
    """The analytic result of the checked plan."""
    simulated: RunResult
    """The simulator's result of the checked plan."""
    final_plan: Plan
    """The checked plan with its replica counts fixed, or the re-provisioned plan."""
    final_analytic: RunResult
    final_simulated: RunResult
    growths: tuple[Growth, ...] = ()
    rounds: tuple[ReplanRound, ...] = ()
    """The re-planning rounds (studies/replan.py), if any ran."""
    replanned_plan: Plan | None = None
    """The re-planned plan the final plan comes from (itself, or re-provisioned)."""
    replanned_simulated: RunResult | None = None
    replan_method: str | None = None
    """How the re-planned plan was found: ReplanRound.method of its round."""
    replan_proven_cheapest: bool = False
    """exact-flushed: the re-planned plan is the cheapest under the flushed form over every
    microbatch count searched (its rounds)."""
    wall_s: float = 0.0
    simulations: int = 1
    extra: dict = field(default_factory=dict)

    @property
    def meets_limit(self) -> bool:
        return bool(self.final_simulated.feasible)

    @property
    def replanned(self) -> bool:
        return self.replanned_plan is not None

    @property
    def reprovisioned(self) -> bool:
        return any(g.kept for g in self.growths)

    def to_json_dict(self) -> dict:
        from dataclasses import asdict
        s = self.settings
        out = {"engine": "des", "status": self.status, "meets_limit": self.meets_limit,
               "reason": self.reason, "effects": list(s.effects), "seed": s.seed,
               "schedule": self.simulated.extra.get("schedule"),
               "num_microbatches": self.simulated.extra.get("num_microbatches"),
               "num_steps": self.simulated.extra.get("num_steps"),
               "wall_s": self.wall_s, "simulations": self.simulations,
               "analytic": summary(self.analytic),
               "simulated": summary(self.simulated, self.extra.get("simulated_cost_usd")),
               "simulated_vs_analytic_pct": gap_pct(self.simulated, self.analytic),
               "flushed": ({"throughput": self.extra["flushed_throughput"],
                            "cost_usd": self.extra["flushed_cost_usd"]}
                           if "flushed_throughput" in self.extra else None),
               "jitter": ({k: self.extra[k] for k in ("jitter_margin", "headroom",
                                                       "meets_with_jitter")}
                          if "jitter_margin" in self.extra else None),
               "replan_rounds": [asdict(r) for r in self.rounds],
               "steps": [asdict(g) for g in self.growths],
               "simulated_result": self.simulated.to_json_dict()}
        if self.replanned:
            out["replanned"] = {"plan": self.replanned_plan.to_json_dict(),
                                "simulated_result": self.replanned_simulated.to_json_dict(),
                                "method": self.replan_method,
                                "proven_cheapest": self.replan_proven_cheapest}
        if self.reprovisioned or self.status == "replanned":  # the plan to run instead
            out["final"] = {"plan": self.final_plan.to_json_dict(),
                            "analytic": summary(self.final_analytic),
                            "simulated": summary(self.final_simulated,
                                                 self.extra.get("final_simulated_cost_usd")),
                            "simulated_result": self.final_simulated.to_json_dict()}
            if self.reprovisioned:
                out["reprovisioned"] = out["final"]
        return out


def job_cost_usd(problem: Problem, plan: Plan, result: RunResult) -> float:
    """What the cost model charges for the job at `result`'s throughput: the simulator's own
    cost_usd is hours x USD/h; the default model also bills startup and whole billing
    periods (cost.reference.job_cost), so a simulated run is priced the same way."""
    from heterps_sim.cost import reference as model
    if (getattr(problem, "cost_model", "paper") != "default" or not hasattr(model, "job_cost")
            or not math.isfinite(result.cost_usd) or result.throughput <= 0):
        return result.cost_usd
    startup = model.plan_startup_s(problem, model.plan_stages(problem, plan))
    return float(model.job_cost(problem, result.cost_per_hour, result.throughput, startup))


def summary(result: RunResult, cost_usd: float | None = None) -> dict:
    """The numbers a check compares: throughput, cost (`cost_usd` replaces the result's),
    feasibility, units."""
    cost = result.cost_usd if cost_usd is None else cost_usd
    return {"feasible": result.feasible, "throughput": result.throughput,
            "cost_usd": cost if math.isfinite(cost) else None,
            "cost_per_hour": result.cost_per_hour, "step_time_s":
            result.step_time_s if math.isfinite(result.step_time_s) else None,
            "units": [s.num_replicas for s in result.stages],
            "bottleneck_stage": result.bottleneck_stage, "reason": result.reason}


def gap_pct(result: RunResult, reference: RunResult) -> float | None:
    """100 x (result / reference - 1) of the throughputs."""
    if reference.throughput <= 0 or not math.isfinite(reference.throughput):
        return None
    return 100.0 * (result.throughput / reference.throughput - 1.0)


def fixed_plan(plan: Plan, analytic: RunResult) -> Plan:
    """The plan with every stage's units as the analytic model provisioned them."""
    return plan.with_replicas([s.num_replicas for s in analytic.stages])


def verify_plan(problem: Problem, plan: Plan, analytic: RunResult, evaluate: Evaluate,
                settings: VerifySettings | None = None, *,
                reprovision: bool = False, replan: Replan | None = None) -> Verification:
    """Simulate `plan` (provisioned as `analytic` says) with the deterministic effects on;
    with `reprovision`, re-plan it (when `replan`, the scheduler that chose it, is given) and
    grow it until the simulator's throughput meets the limit (module docstring). `evaluate` is
    the analytic model the plan was scheduled with."""
    check = _verify(problem, plan, analytic, evaluate, settings or VerifySettings(), reprovision,
                    replan)
    costs = {"simulated_cost_usd": job_cost_usd(problem, fixed_plan(plan, analytic),
                                                check.simulated),
             "final_simulated_cost_usd": job_cost_usd(problem, check.final_plan,
                                                      check.final_simulated),
             **flushed_prediction(problem, fixed_plan(plan, analytic), check)}
    if check.replanned:
        costs["replanned_simulated_cost_usd"] = job_cost_usd(problem, check.replanned_plan,
                                                             check.replanned_simulated)
    return replace(check, extra={**check.extra, **costs, **jitter_headroom(problem, check)})


def jitter_headroom(problem: Problem, check: Verification) -> dict:
    """What the simulator's default jitter asks of the plan to run (des/margin.py): the
    headroom it needs over the limit to meet it at the median seed, the headroom it has in the
    deterministic check, and whether that is enough; {} when the check did not run it or the
    plan does not flush (the margin is the flushed step's)."""
    from heterps_sim.cost.flush import FLUSHED
    from heterps_sim.des.margin import jitter_margin
    sim, plan = check.final_simulated, check.final_plan
    if not sim.extra.get("simulated", True) or plan.schedule not in FLUSHED \
            or "bubbles" not in check.settings.effects or sim.throughput <= 0:
        return {}
    need = jitter_margin(problem, plan, options=check.settings.options())
    has = sim.throughput / problem.throughput_limit - 1.0
    return {"jitter_margin": need, "headroom": has,
            "meets_with_jitter": bool(has >= need * (1 - 1e-9))}


def flushed_prediction(problem: Problem, plan: Plan, check: Verification) -> dict:
    """The analytic step time of the checked plan under its flushed schedule (cost/flush.py),
    at the simulator's m, with the effects the check switched on: {} when the plan did not
    run, or runs unflushed (async, or no bubbles effect)."""
    thr = flushed_or_none(problem, plan, check.simulated, check.settings.effects)
    if thr is None or check.analytic.cost_per_hour <= 0:
        return {}
    usd = job_cost_usd(problem, plan, replace(check.analytic, throughput=thr, cost_usd=(
        problem.num_samples / thr / 3600.0 * check.analytic.cost_per_hour)))
    return {"flushed_throughput": thr, "flushed_cost_usd": usd}


def _verify(problem: Problem, plan: Plan, analytic: RunResult, evaluate: Evaluate,
            settings: VerifySettings, reprovision: bool,
            replan: Replan | None = None) -> Verification:
    options = settings.options()
    start = time.perf_counter()
    plan = fixed_plan(plan, analytic)

    def run(p: Plan) -> RunResult:
        return simulate(problem, p, seed=settings.seed, options=options,
                        record_spans=False).result

    first = run(plan)
    done = dict(settings=settings, analytic=analytic, simulated=first)
    if not first.extra.get("simulated", True):  # the simulator could not run the plan
        return Verification(status="not_run", reason=first.reason, final_plan=plan,
                            final_analytic=analytic, final_simulated=first,
                            wall_s=time.perf_counter() - start, **done)
    if first.feasible:
        return Verification(status="confirmed", reason="", final_plan=plan,
                            final_analytic=analytic, final_simulated=first,
                            wall_s=time.perf_counter() - start, **done)
    if not reprovision:
        return Verification(status="missed", reason=first.reason, final_plan=plan,
                            final_analytic=analytic, final_simulated=first,
                            wall_s=time.perf_counter() - start, **done)
    base, base_sim, rounds, sims, from_replan = plan, first, (), 0, {}
    if replan is not None and settings.max_replan_rounds > 0:
        got = replan_rounds(problem, plan, first, replan, evaluate, run, settings.effects,
                            lambda p, r: job_cost_usd(problem, p, r), settings.max_replan_rounds)
        rounds, sims = got.rounds, len({r.units for r in got.rounds if r.found})
        if got.accepted:
            return Verification(status="replanned", reason="", final_plan=got.plan,
                                final_analytic=got.analytic, final_simulated=got.simulated,
                                rounds=rounds, replanned_plan=got.plan,
                                replanned_simulated=got.simulated, replan_method=got.method,
                                simulations=1 + sims,
                                wall_s=time.perf_counter() - start, **done)
        if got.plan is not None and got.simulated.throughput > first.throughput:
            base, base_sim = got.plan, got.simulated  # re-provision the closest plan
            from_replan = dict(replanned_plan=got.plan, replanned_simulated=got.simulated,
                               replan_method=got.method)
    search = Reprovision(problem, evaluate, run, base, base_sim, settings)
    status, reason = search.run()
    final_plan, final_sim = search.plan, search.sim
    return Verification(status=status, reason=reason, final_plan=final_plan,
                        final_analytic=evaluate(final_plan), final_simulated=final_sim,
                        growths=tuple(search.growths), rounds=rounds,
                        simulations=1 + sims + search.simulations,
                        wall_s=time.perf_counter() - start, **from_replan, **done)


VERDICTS = {
    "confirmed": "simulator: FEASIBLE, the plan meets the limit",
    "replanned": "simulator: FEASIBLE after re-planning",
    "reprovisioned": "simulator: FEASIBLE after re-provisioning",
    "missed": "simulator: MISSES the limit (heterps-sim simulate re-plans or re-provisions it)",
    "impossible": "simulator: MISSES the limit",
    "unresolved": "simulator: MISSES the limit",
    "not_run": "simulator: could not run the plan",
}


def check_lines(check: Verification) -> list[str]:
    """The check as the commands print it: analytic beside simulated (and re-provisioned)
    throughput and cost, the re-provisioning steps, the verdict."""
    sim, lim = check.simulated, check.analytic.throughput_limit
    lines = [f"simulator check ({', '.join(check.settings.effects) or 'no effects'}; "
             f"{sim.extra.get('schedule', '?')}, {sim.extra.get('num_microbatches', '?')} "
             f"microbatches, {sim.extra.get('num_steps', '?')} steps, seed {check.settings.seed}): "
             f"{check.simulations} simulation{'s' if check.simulations != 1 else ''}, "
             f"{check.wall_s:.2f} s",
             f"  {'':15}{'samples/s':>13} {'vs limit':>9} {'cost USD':>12}  units per stage"]
    rows = [("analytic", check.analytic, check.analytic.cost_usd)]
    if "flushed_throughput" in check.extra:  # the closed form of the flushed schedule
        rows.append(("  flushed", replace(check.analytic,
                                          throughput=check.extra["flushed_throughput"]),
                     check.extra["flushed_cost_usd"]))
    rows.append(("simulated", sim, check.extra.get("simulated_cost_usd", sim.cost_usd)))
    if check.replanned:
        rows.append(("re-planned", check.replanned_simulated,
                     check.extra.get("replanned_simulated_cost_usd",
                                     check.replanned_simulated.cost_usd)))
    if check.reprovisioned:
        rows.append(("re-provisioned", check.final_simulated,
                     check.extra.get("final_simulated_cost_usd", check.final_simulated.cost_usd)))
    for label, r, usd in rows:
        vs = f"{100 * (r.throughput / lim - 1):+.1f}%" if lim > 0 else ""
        cost = f"{usd:,.6g}" if math.isfinite(usd) else "-"
        units = "-".join(str(s.num_replicas) for s in r.stages)
        lines.append(f"  {label:15}{r.throughput:>13,.0f} {vs:>9} {cost:>12}  {units}")
    lines.extend(round_line(r) for r in check.rounds)
    kept = [g for g in check.growths if g.kept]
    for n, g in enumerate(kept, 1):
        lines.append(f"  step {n}: stage {g.stage} ({g.resource}) "
                     f"{g.units_before} -> {g.units_after} units: "
                     f"{g.throughput_before:,.0f} -> {g.throughput_after:,.0f} samples/s")
    if len(kept) < len(check.growths):
        lines.append(f"  ({len(check.growths) - len(kept)} other tries undone: they did not "
                     "raise the simulated throughput; verify.json lists them)")
    verdict = VERDICTS[check.status]
    lines.append(verdict + (f": {check.reason}" if check.reason and check.status in
                            ("impossible", "unresolved", "not_run") else ""))
    if "jitter_margin" in check.extra and check.meets_limit:
        from heterps_sim.des.options import DesOptions
        need, has = check.extra["jitter_margin"], check.extra["headroom"]
        lines.append(
            f"with the simulator's default jitter (cv {DesOptions().jitter_cv:g}) a step of "
            f"this plan takes {100 * need:.1f}% longer at the median seed: it has "
            f"{100 * has:+.1f}% over the limit, so it "
            + ("still meets it" if check.extra["meets_with_jitter"] else
               f"misses it there (plan for a limit {100 * need:.0f}% higher to cover it)"))
    return lines
