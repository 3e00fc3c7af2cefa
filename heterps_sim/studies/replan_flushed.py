"""Re-plan with the exact optimum of the flushed closed form first, then raise floors.

The schedulers optimise the stage model (a steady pipeline); the simulator runs a flushed
schedule, whose step time cost/flush.py gives in closed form. When the checked plan misses
the limit in the simulator, the problem uses the default cost model and the check runs a
flushed schedule (gpipe or 1f1b, `bubbles` on), the plan to try first is the cheapest one
whose flushed throughput meets the limit: schedulers/exact/flushed.py `optimum`, exact for
one microbatch count m. It is asked for at the m the simulator ran the checked plan with,
pricing the check's effects that the closed form prices, and it runs with a label budget
(`max_labels`, deterministic, unlike a time limit): past it the search stops (LabelLimit)
and its answer would not be proven optimal. Its plan (units and m fixed) is simulated
against the limit; if the simulator finds it meeting the limit it is the plan to run: the
cheapest plan that meets the limit under the flushed form at that m. Otherwise (past the
budget, no plan at that m, or the simulator finds the plan short) the raised-floor rounds
of studies/replan.py run, and the round list says why.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.core.result import RunResult
from heterps_sim.studies.replan import (
    MAX_ROUNDS,
    Replan,
    Replanned,
    ReplanRound,
    replan_rounds,
)

EXACT = "exact-flushed"
RAISED = "raised-floor"
MAX_LABELS = 30_000
"""Labels one search (one m) may make before it stops; the m's after it are then not
searched. Measured on the 2-core VM under load (simulate's check, before -> after):
nce-cpu-gpu finds its plans in 17,408 and 24,019 labels (m = 8, 12; 0.24 -> 0.24 s),
ctr-dnn-64types in <= 9,637 (0.04 -> 0.42 s), dlrm-64types in 11,121 at m = 4 and passes the
budget at 8 (0.27 -> 1.09 s), synthetic-64x64 passes it at 4 (1.88 -> 2.33 s); at 200,000
labels one dlrm search took 0.4 s and one synthetic-64x64 search 15 s."""
MICROBATCHES = (4, 8, 16)
"""Microbatch counts searched besides the simulator's: few, small ones (a search's work grows
with m: ~2 sqrt(m) unit counts per stage and type)."""
FLUSHED_SCHEDULES = ("gpipe", "1f1b")


@dataclass(frozen=True, slots=True)
class ExactTry:
    """The exact rounds (one per m searched), and the plan the simulator confirmed, if any."""

    rounds: tuple[ReplanRound, ...]
    plan: Plan | None = None
    simulated: RunResult | None = None
    proven: bool = False
    """`plan` is the cheapest under the flushed form over every m in `microbatches`."""
    microbatches: tuple[int, ...] = ()


def not_applicable(problem: Problem, sim: RunResult, effects: tuple[str, ...]) -> str:
    """Why the exact search does not apply to this check ('' when it does)."""
    m = int(sim.extra.get("num_microbatches") or 0)
    if getattr(problem, "cost_model", "paper") != "default":
        return "it prices the default cost model only"
    if "bubbles" not in effects:
        return "the check runs without the bubbles effect (no flush)"
    if sim.extra.get("schedule") not in FLUSHED_SCHEDULES:
        return "the check's schedule does not flush"
    if m < 2 or m > problem.batch_size:
        return f"{m} microbatches (it needs 2 to the batch size)"
    return ""


def microbatch_counts(problem: Problem, sim: RunResult) -> list[int]:
    """The m's searched, smallest first: the simulator's m of the checked plan and
    MICROBATCHES (the closed form's optimum moves a lot with m), within 2 to the batch size."""
    ms = {int(sim.extra["num_microbatches"]), *MICROBATCHES}
    return sorted(m for m in ms if 2 <= m <= problem.batch_size)


def exact_rounds(problem: Problem, sim: RunResult, effects: tuple[str, ...], *,
                 max_labels: int, simulate: Callable[[Plan], RunResult],
                 evaluate: Callable[[Plan], RunResult],
                 job_cost: Callable[[Plan, RunResult], float],
                 lower_bound: float | None = None) -> ExactTry:
    """The exact optimum at each of microbatch_counts(), smallest m first (a search past
    `max_labels` ends them: a larger m has more unit counts per stage, a larger search);
    the plans found, cheapest first, simulated until the simulator finds one meeting the
    limit. `lower_bound`: the searches' first cost ceiling (any value
    gives the same optimum; one near it, e.g. the stage model's optimum, is fastest)."""
    from heterps_sim.schedulers.exact.flushed import EFFECTS, LabelLimit, optimum
    schedule = str(sim.extra["schedule"])
    priced = tuple(e for e in EFFECTS if e in effects)
    bound = lower_bound if lower_bound is not None and math.isfinite(lower_bound) \
        and lower_bound > 0 else None
    rounds: dict[int, ReplanRound] = {}
    found = []
    ms = microbatch_counts(problem, sim)
    for m in ms:
        head = dict(target=problem.throughput_limit, method=EXACT, num_microbatches=m)
        try:
            got = optimum(problem, m, schedule, effects=priced, max_labels=max_labels,
                          lower_bound=bound)
        except LabelLimit:
            rounds[m] = ReplanRound(found=False, reason=(
                f"past its budget of {max_labels:,} labels (not proven optimal)"), **head)
            break
        if got is None:
            rounds[m] = ReplanRound(found=False, reason=(
                "no plan meets the limit under the flushed form at this m"), **head)
            continue
        rounds[m] = ReplanRound(found=True, flushed_throughput=got.throughput,
                                flushed_cost_usd=got.cost_usd, labels=got.labels,
                                units=tuple(s.num_replicas for s in got.plan.stages), **head)
        found.append(got)
    searched = len(rounds) == len(ms) and all(r.found or "budget" not in r.reason
                                              for r in rounds.values())
    accepted = None
    for got in sorted(found, key=lambda g: (g.cost_usd, g.plan.num_microbatches)):
        m, new = got.plan.num_microbatches, simulate(got.plan)
        meets = bool(new.feasible)
        rounds[m] = replace(
            rounds[m], analytic_throughput=evaluate(got.plan).throughput,
            simulated_throughput=new.throughput, simulated_cost_usd=job_cost(got.plan, new),
            meets_limit=meets, reason="" if meets else (
                f"the simulator finds it "
                f"{100 * (1 - new.throughput / problem.throughput_limit):.1f}% short"))
        if meets:
            accepted = (got.plan, new)
            break
    cheapest = bool(accepted) and searched and accepted[0].num_microbatches == min(
        found, key=lambda g: (g.cost_usd, g.plan.num_microbatches)).plan.num_microbatches
    return ExactTry(tuple(rounds.values()), *(accepted or (None, None)), proven=cheapest,
                    microbatches=tuple(ms))


def replan(problem: Problem, plan: Plan, sim: RunResult, replan_fn: Replan | None,
           evaluate: Callable[[Plan], RunResult], simulate: Callable[[Plan], RunResult],
           effects: tuple[str, ...], job_cost: Callable[[Plan, RunResult], float], *,
           max_rounds: int = MAX_ROUNDS, max_labels: int = MAX_LABELS,
           lower_bound: float | None = None) -> Replanned:
    """The exact rounds where they apply (max_labels > 0); unless the simulator confirms one
    of their plans, the raised-floor rounds (when `replan_fn` is given and max_rounds > 0),
    whose plan closest to the limit is kept for re-provisioning."""
    rounds: list[ReplanRound] = []
    if max_labels > 0 and not not_applicable(problem, sim, effects):
        tried = exact_rounds(problem, sim, effects, max_labels=max_labels, simulate=simulate,
                             evaluate=evaluate, job_cost=job_cost, lower_bound=lower_bound)
        rounds.extend(tried.rounds)
        if tried.plan is not None:
            return Replanned(tuple(rounds), tried.plan, evaluate(tried.plan), tried.simulated,
                             accepted=True, method=EXACT, proven_cheapest=tried.proven)
    if replan_fn is None or max_rounds <= 0:
        return Replanned(tuple(rounds))
    got = replan_rounds(problem, plan, sim, replan_fn, evaluate, simulate, effects, job_cost,
                        max_rounds)
    return replace(got, rounds=tuple(rounds) + got.rounds)


def exact_line(r: ReplanRound) -> str:
    """One exact round as the commands print it."""
    head = f"  exact under the flushed form at {r.num_microbatches} microbatches: "
    if not r.found:
        return head + r.reason
    units = "-".join(str(k) for k in r.units)
    body = f"{r.flushed_cost_usd:,.6g} USD, flushed {r.flushed_throughput:,.0f}"
    if r.simulated_throughput is None:  # a cheaper m's plan met the limit first
        return head + body + f" (units {units}), not simulated"
    body += f", simulated {r.simulated_throughput:,.0f} (units {units}"
    return head + body + (", meets the limit)" if r.meets_limit else f"; {r.reason})")
