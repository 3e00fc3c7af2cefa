"""Re-plan with the exact optimum of the flushed closed form first, then raise floors.

The schedulers optimise the stage model (a steady pipeline); the simulator runs a flushed
schedule, whose step time cost/flush.py gives in closed form. When the checked plan misses
the limit in the simulator, the problem uses the default cost model and the check runs a
flushed schedule (gpipe or 1f1b, `bubbles` on), the plan to try first is the cheapest one
whose flushed throughput meets the limit over a set of microbatch counts m (2 up to MAX_WORK and
the simulator's m): a stage of k units runs ceil(m / k) microbatches per unit, so the
cheapest m is often an odd one (nce-cpu-gpu: m = 9, 2emb-aws: m = 7), not a round number.
schedulers/exact/flushed.py is exact for one m; the m's are searched smallest first as its
best_over_microbatches does: optimum() in full until one m has a plan, then solve() below
the best cost so far (fast, and no plan proves none cheaper at that m). Each search has a
label budget (`max_labels`, deterministic, unlike a time limit): an m past it is skipped (its
answer would not be proven optimal), and MAX_SKIPPED_IN_A_ROW skipped m's in a row end the
search (a larger m is a larger search). The best plan is simulated against the limit; if the
simulator finds it meeting the limit it is the plan to run (`proven_cheapest` when no m was
skipped). If the simulator finds it short (the closed form is usually within ~1%), the
search runs once more, for the limit raised by the closed form's overestimate of that plan
(limit x flushed / simulated), over the m's that were searched in full. Otherwise (no plan, or short again) the raised-floor
rounds of studies/replan.py run, and the round list says why.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.core.result import RunResult
from heterps_sim.schedulers.exact.flushed_search import (
    MAX_SKIPPED_IN_A_ROW,
    MicrobatchSearch,
    budgeted_counts,
    search_microbatches,
)
from heterps_sim.studies.replan import (
    MAX_ROUNDS,
    Replan,
    Replanned,
    ReplanRound,
    replan_rounds,
    round_line,
)

EXACT = "exact-flushed"
RAISED = "raised-floor"
MAX_LABELS = 30_000
"""Labels one search (one m) may make before that m is skipped (not proven there). The first m
with a plan is searched in full, the others only below the best cost so far: 2emb-aws' plan
at m = 7 takes 26,806 labels, nce-cpu-gpu's at m = 9 17,162, dlrm-64types' at m = 3 6,669;
synthetic-64x64 passes it (or 100 x it in stage options tried) at every m."""
FLUSHED_SCHEDULES = ("gpipe", "1f1b")


@dataclass(frozen=True, slots=True)
class ExactTry:
    """The exact rounds (the search, and the search at the raised limit if it ran), and the
    plan the simulator confirmed, if any."""

    rounds: tuple[ReplanRound, ...]
    plan: Plan | None = None
    simulated: RunResult | None = None
    proven: bool = False
    """`plan` is the cheapest under the flushed form over every m in `microbatches`."""
    microbatches: tuple[int, ...] = field(default=())


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
    """The m's searched, smallest first: flushed_search.budgeted_counts (2..m_hi within
    MAX_WORK) and the simulator's m of the checked plan, within 2 to the batch size."""
    return budgeted_counts(problem, (int(sim.extra["num_microbatches"]),))


def ms_text(ms) -> str:
    """2, 3, 4, 7, 9, 10 -> '2-4, 7, 9-10'."""
    runs: list[list[int]] = []
    for m in sorted(ms):
        if runs and m == runs[-1][1] + 1:
            runs[-1][1] = m
        else:
            runs.append([m, m])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _round(target: float, limit: float, found: MicrobatchSearch,
           max_labels: int) -> ReplanRound:
    """One exact search as a round: its best plan's m, cost and units; the m's in fields."""
    head = dict(target=target, method=EXACT, labels=found.labels,
                microbatches_searched=found.searched, microbatches_skipped=found.skipped,
                microbatches_not_reached=found.not_reached, max_labels=max_labels,
                limit=limit)
    if found.best is None:
        why = (f"no plan meets the limit under the flushed form at m = {ms_text(found.searched)}"
               if found.searched else "no m searched in full")
        return ReplanRound(found=False, reason=why, **head)
    got = found.best
    return ReplanRound(found=True, num_microbatches=got.plan.num_microbatches,
                       flushed_throughput=got.throughput, flushed_cost_usd=got.cost_usd,
                       units=tuple(s.num_replicas for s in got.plan.stages), **head)


def exact_rounds(problem: Problem, sim: RunResult, effects: tuple[str, ...], *,
                 max_labels: int, simulate: Callable[[Plan], RunResult],
                 evaluate: Callable[[Plan], RunResult],
                 job_cost: Callable[[Plan, RunResult], float],
                 lower_bound: float | None = None) -> ExactTry:
    """The exact search over microbatch_counts() (search_microbatches), its plan simulated;
    if the simulator finds it short, once more for the limit raised by the closed form's
    overestimate of that plan (flushed / simulated).
    `lower_bound`: the first search's first cost ceiling (any value gives the same optimum;
    one near it, e.g. the stage model's optimum, is fastest)."""
    from heterps_sim.schedulers.exact.flushed import EFFECTS
    schedule = str(sim.extra["schedule"])
    priced = tuple(e for e in EFFECTS if e in effects)
    bound = lower_bound if lower_bound is not None and math.isfinite(lower_bound) \
        and lower_bound > 0 else None
    limit = problem.throughput_limit
    ms = microbatch_counts(problem, sim)
    rounds: list[ReplanRound] = []
    found = search_microbatches(problem, ms, schedule, effects=priced, max_labels=max_labels,
                                lower_bound=bound)
    target, proven = limit, found.complete
    while True:
        rounds.append(_round(target, limit, found, max_labels))
        if found.best is None:
            break
        plan = found.best.plan
        new = simulate(plan)
        meets = bool(new.feasible)
        rounds[-1] = replace(
            rounds[-1], analytic_throughput=evaluate(plan).throughput,
            simulated_throughput=new.throughput, simulated_cost_usd=job_cost(plan, new),
            meets_limit=meets, reason="" if meets else (
                f"the simulator finds it {100 * (1 - new.throughput / limit):.1f}% short"))
        if meets:
            return ExactTry(tuple(rounds), plan, new, proven=proven and target == limit,
                            microbatches=tuple(ms))
        if target != limit or not found.searched or new.throughput <= 0:
            break
        # once more, for the limit raised by the closed form's overestimate of this plan
        # (flushed / simulated), over the m's that were searched in full (the skipped ones
        # would pass the budget again); this plan's flushed throughput is then below it
        target = limit * found.best.throughput / new.throughput
        found = search_microbatches(problem.with_limit(target), found.searched, schedule,
                                    effects=priced, max_labels=max_labels,
                                    lower_bound=found.best.cost_usd)
    return ExactTry(tuple(rounds), microbatches=tuple(ms))


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


def any_round_line(r: ReplanRound) -> str:
    """One round of either kind as the commands print it."""
    return round_line(r) if r.method == RAISED else exact_line(r)


def exact_line(r: ReplanRound) -> str:
    """One exact round as the commands print it."""
    head = "  exact under the flushed form"
    if r.limit is not None and r.target > r.limit * (1 + 1e-12):
        head += f" for {r.target:,.0f} samples/s"
    tried = sorted((*r.microbatches_searched, *r.microbatches_skipped,
                    *r.microbatches_not_reached))
    head += f", m = {ms_text(tried)}" if tried else f" at {r.num_microbatches} microbatches"
    notes = []
    if r.microbatches_skipped:
        notes.append(f"past its budget of {r.max_labels or 0:,} labels at m = "
                     f"{ms_text(r.microbatches_skipped)}")
    if r.microbatches_not_reached:
        notes.append(f"m = {ms_text(r.microbatches_not_reached)} not searched: "
                     f"{len(r.microbatches_skipped[-MAX_SKIPPED_IN_A_ROW:])} skipped in a row")
    if not r.found:
        return head + ": " + r.reason + (f" ({'; '.join(notes)})" if notes else "")
    units = "-".join(str(k) for k in r.units)
    body = (f": {r.flushed_cost_usd:,.6g} USD at m = {r.num_microbatches}, flushed "
            f"{r.flushed_throughput:,.0f}")
    if r.simulated_throughput is None:
        notes.insert(0, "not simulated")
    else:
        body += f", simulated {r.simulated_throughput:,.0f}"
        notes.insert(0, "meets the limit" if r.meets_limit else r.reason)
    return head + body + f" (units {units}; {'; '.join(notes)})"
