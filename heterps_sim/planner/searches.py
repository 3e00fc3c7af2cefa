"""The planner's searches: the exact optimum under the pricing's own objective, or a
registered scheduler's cuts and types priced as they run.

    exact under the flushed form   schedulers/exact/certified.certified_optimum: units, m,
                                   cuts and types, proven optimal or with a certified gap,
                                   over every parameter-server host choice the problem prices
    exact under the stage model    the stage model's dynamic program (schedulers/exact/sweep)
    any other scheduler            its search under the stage model's batched evaluator (the
                                   fast one every scheduler shares), then its plan priced by
                                   the pricing: a heuristic never proves anything
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

from heterps_sim.core.plan import Plan, Stage
from heterps_sim.core.problem import Problem
from heterps_sim.planner.answer import Answer
from heterps_sim.planner.pricing import Pricing

EXACT_NAMES = ("exact", "exact-flushed")
"""Names that mean "the exact optimum under the pricing" (exact-flushed: the flushed one)."""
STAGE_OPTIONS = ("allow_same_type_cuts", "max_labels", "seed")
"""Options of the stage model's exact scheduler the certified flushed search subsumes (it
always allows same-type cuts; its own budget is max_work)."""
FLUSHED_OPTIONS = ("max_work", "target_gap")
"""Options of the certified flushed search itself (schedulers/exact/flushed_scheduler.py's
Config): its work budget and the gap at which it may stop."""
PRICING_OPTIONS = ("microbatches", "max_microbatches", "schedule")
"""exact-flushed's Config fields that the planner's pricing holds instead (the scenario's
costs.num_microbatches, --pipeline)."""


def ps_variants(problem: Problem) -> list[tuple[Problem, object]]:
    """(problem, PsChoice) per parameter-server host choice the problem prices; [(problem, None)]
    when its parameter server is free or given (cost/ps_hosts.py)."""
    from heterps_sim.cost import ps_hosts
    choices = ps_hosts.ps_choices(problem)
    if not choices:
        return [(problem, None)]
    return [(ps_hosts.with_ps(problem, c), c) for c in choices]


def exact(problem: Problem, pricing: Pricing, *, options: dict | None = None,
          types: tuple[int, ...] | None = None, max_work: int | None = None) -> Answer:
    """The exact optimum under `pricing` (module docstring); `types` restricts the types."""
    options = dict(options or {})
    if pricing.flushed:
        held = sorted(set(options) & set(PRICING_OPTIONS))
        if held:
            raise ValueError(f"exact: --set {held[0]}: the planner takes the microbatches from "
                             "the scenario (costs.num_microbatches) and the schedule from "
                             "--pipeline")
        if set(options) <= set(STAGE_OPTIONS) | set(FLUSHED_OPTIONS):
            from heterps_sim.schedulers.exact.flushed_scheduler import FlushedExactScheduler
            own = FlushedExactScheduler.Config(**{k: v for k, v in options.items()
                                                  if k in FLUSHED_OPTIONS})
            return _exact_flushed(problem, pricing, types,
                                  own.max_work if own.max_work is not None else max_work,
                                  own.target_gap)
    return _exact_stage(problem, pricing, options, types)


def _exact_flushed(problem: Problem, pricing: Pricing, types, max_work,
                   target_gap: float = 0.0) -> Answer:
    from heterps_sim.schedulers.exact.certified import certified_optimum
    start = time.perf_counter()
    ms = tuple(pricing.microbatch_counts(problem))
    best = None  # (cost, problem, certified, label)
    bound, proven, work, per_host = math.inf, True, 0, []
    kw = {} if max_work is None else {"max_work": max_work}
    for variant, label in ps_variants(problem):
        got = certified_optimum(variant, schedule=pricing.schedule, microbatches=ms,
                                types=types, target_gap=target_gap,
                                incumbent=best[0] if best is not None else None, **kw)
        work += got.work
        # a search told to beat an incumbent proves only that nothing cheaper exists
        bound = min(bound, got.lower_bound_usd if got.best is not None or not got.proven
                    else math.inf)
        proven = proven and got.proven
        if got.best is not None and (best is None or got.best.cost_usd < best[0]):
            best = (got.best.cost_usd, variant, got, label)
        per_host.append({"ps": label.label if label else "", "cost_usd": got.best.cost_usd if got.best else None,
                         "proven": got.proven, "lower_bound_usd": got.lower_bound_usd})
    wall = time.perf_counter() - start
    notes = {"search": "exact (flushed closed form)", "work": work,
             "microbatches_searched": _span(ms)}
    if len(per_host) > 1:
        notes["ps_hosts"] = per_host
        notes["ps_choices_searched"] = len(per_host)
    if best is None:
        notes["reason"] = _no_plan_reason(problem, ms, proven)
        return Answer(scheduler="exact", plan=None, result=None, pricing=pricing,
                      problem=problem, proven=proven, lower_bound_usd=None, wall_s=wall,
                      notes=notes)
    cost, variant, got, label = best
    plan = got.best.plan
    if not proven and types is None:
        # past its budget the search may have missed a plan of one type that its per-type
        # search finds (each is small): the cheaper of the two is the answer, under the same
        # certified bound
        one = _best_one_type(variant, pricing, ms, cost, kw)
        if one is not None:
            cost, plan = one.cost_usd, one.plan
            notes["from"] = "the one-type search (cheaper than the budgeted search's plan)"
    if label:  # the plan says which hosts hold the tables
        from heterps_sim.core.plan import PsHosts
        plan = replace(plan, ps=PsHosts(resource=label.host_type, num_shards=label.num_shards))
    plan, result = pricing.price(problem, plan)
    result = replace(result, provisioning="flushed")  # units and m chosen by the search
    if label:
        notes["ps"] = label.label
    lower = min(bound, cost)
    if not result.feasible:  # the search and the pricing disagree: nothing is proven
        notes["reason"] = ("the exact search's plan misses the limit as the pricing prices it: "
                           + result.reason)
        proven = False
    return Answer(scheduler="exact", plan=plan, result=result, pricing=pricing,
                  # proven when the certified bound over every host choice reaches the cost
                  # (a choice the search did not finish still bounds it from below)
                  problem=variant, proven=result.feasible and bound >= cost * (1 - 1e-9),
                  lower_bound_usd=lower if math.isfinite(lower) and lower > 0 else None,
                  evaluations=1, wall_s=wall, notes=notes)


def _best_one_type(problem: Problem, pricing: Pricing, ms, below: float, kw: dict):
    """The cheapest plan of one type cheaper than `below` (FlushedOptimum), or None."""
    from heterps_sim.schedulers.exact.certified import certified_optimum
    runnable = problem.runnable
    best = None
    for j in range(problem.num_types):
        if not runnable[:, j].all():
            continue
        got = certified_optimum(problem, schedule=pricing.schedule, microbatches=ms, types=(j,),
                                incumbent=best.cost_usd if best else below, **kw)
        if got.best is not None and got.best.cost_usd < (best.cost_usd if best else below):
            best = got.best
    return best


def _no_plan_reason(problem: Problem, ms, proven: bool) -> str:
    """Why no plan meets the limit: the parameter server's capacity when it is below the limit
    for every host choice, else the search's verdict."""
    from heterps_sim.cost.reference import ps_cap
    limit = problem.throughput_limit
    cap = max(ps_cap(variant) for variant, _ in ps_variants(problem))
    if cap < limit * (1 - 1e-12):
        return (f"no plan reaches {limit:,.6g} samples/s: the parameter server's shared "
                f"bandwidth carries at most {cap:,.6g} samples/s of embedding traffic")
    return (f"no plan meets the limit {limit:,.6g} samples/s under the flushed closed form at "
            f"m = {_span(ms)}" + ("" if proven else " within the search's budget"))


def _exact_stage(problem: Problem, pricing: Pricing, options: dict, types) -> Answer:
    """The stage model's optimum over every parameter-server host choice the problem prices
    (as the flushed search; each choice's search is fast: 24 choices in about 1 s on the
    DLRM scenario): proven when each choice's search is."""
    from heterps_sim.core.plan import PsHosts
    variants = ps_variants(problem)
    if len(variants) == 1 and variants[0][1] is None:
        return _exact_stage_one(problem, pricing, options, types)
    start = time.perf_counter()
    best, first, proven = None, None, True
    for variant, label in variants:
        got = _exact_stage_one(variant, pricing, options, types)
        first = first or got  # the answer when no choice has a plan (its reason)
        proven = proven and got.proven
        if got.feasible and (best is None or got.cost_usd < best.cost_usd):
            best = replace(got, plan=replace(got.plan, ps=PsHosts(
                resource=label.host_type, num_shards=label.num_shards)), problem=variant)
            best.notes["ps"] = label.label
    answer = best or first
    answer.proven = proven
    answer.notes["proven_optimal"] = proven
    answer.notes["ps_choices_searched"] = len(variants)
    if best is not None:
        answer.lower_bound_usd = best.cost_usd if proven else None
    answer.wall_s = time.perf_counter() - start
    return answer


def _exact_stage_one(problem: Problem, pricing: Pricing, options: dict, types) -> Answer:
    """The stage model's optimum with the problem's parameter server as it is."""
    problem_t = only_types(problem, types) if types is not None else problem
    # every plan: a run of one type may also be cut into adjacent stages (their units
    # differ, so a cut can shed units the stage's memory floor or rounding forces: the
    # DLRM scenario's async optimum is two H100 stages). Over maximal runs only (the
    # scheduler's own default, or asked for), the optimum found proves nothing about them.
    options = {"allow_same_type_cuts": True, **options}
    answer = scheduler(problem_t, pricing, "exact", options)
    searched = bool(answer.notes.get("proven_optimal", False))
    # (answer.proven is already False where the plan keeps more async weight versions than
    # the search counted, scheduler() below)
    proven = (answer.proven and bool(answer.notes.get("proven_optimal", False))
              and not options.get("mixed") and bool(options["allow_same_type_cuts"]))
    answer.notes["proven_optimal"] = proven
    if not options["allow_same_type_cuts"]:
        answer.notes["not_proven"] = ("maximal runs of one type only (allow_same_type_cuts "
                                      "off): a plan that cuts a run may cost less")
    answer.proven = proven
    answer.problem = problem
    if proven and answer.feasible:
        answer.lower_bound_usd = answer.result.cost_usd
    elif (searched and answer.result is not None and answer.result.extra.get("synchronous")
          and not options.get("mixed") and options["allow_same_type_cuts"]):
        if all(a is None for a in problem_t.available):
            return _one_stage_apart(problem, problem_t, pricing, options, answer)
        answer.notes["not_proven"] = (
            "the stage model's optimum has one stage and staleness 0: it trains "
            "synchronously and is priced as it flushes; with unit caps the plans of several "
            "stages are not searched apart and may cost less")
        # (with caps the sweep's cap search may answer one stage: no search apart) the
        # optimum under the stage model trains synchronously and was priced as it flushes;
        # no plan's price is below the stage model's optimum (a plan of staleness 0 flushes
        # no faster than the stage model runs it, tests/sim/planner), so that is a certified
        # bound, and the answer is proven when its price still equals it
        bound = float(answer.notes.get("predicted_cost_usd", 0.0))
        if bound > 0:
            answer.lower_bound_usd = bound
            if answer.feasible and answer.result.cost_usd <= bound * (1 + 1e-9):
                answer.proven = True
                answer.notes["proven_optimal"] = True
                answer.notes.pop("not_proven", None)
    return answer


def _one_stage_apart(problem: Problem, problem_t: Problem, pricing: Pricing, options: dict,
                     first: Answer) -> Answer:
    """The stage model's optimum was one stage of staleness 0, which trains synchronously and
    is priced as it flushes. The optimum over every plan is then the cheaper of the plans of
    one stage, each priced (one per type: their units and m as the pricing sets them), and
    the stage model's optimum over plans of two stages or more, searched apart (their
    staleness is at least 1, so the stage model prices them)."""
    start = time.perf_counter()
    multi = scheduler(problem_t, pricing, "exact", {**options, "two_stages": True})
    proven = bool(multi.notes.get("proven_optimal")) and (multi.proven or not multi.feasible)
    best_plan, best_result = (multi.plan, multi.result) if multi.feasible else (None, None)
    for name in problem_t.type_names:
        plan = Plan(stages=(Stage(layers=tuple(problem_t.layer_names), resource=name),),
                    schedule=pricing.schedule)
        got, result = pricing.price(problem_t, plan)
        if result.feasible and (best_result is None or result.cost_usd < best_result.cost_usd):
            best_plan, best_result = got, result
    notes = {**multi.notes, "proven_optimal": proven,
             "one_stage_apart": (
                 "the stage model's optimum had one stage of staleness 0 (it trains "
                 "synchronously, priced as it flushes): plans of one stage priced one by one, "
                 "plans of two stages or more searched apart")}
    if not proven:
        notes["not_proven"] = multi.notes.get(
            "not_proven", "the search over plans of two stages or more is not proven")
    if best_result is None:
        notes["reason"] = multi.notes.get("reason", first.notes.get("reason", "")) or (
            f"no plan meets the limit {problem.throughput_limit:.6g} samples/s")
    answer = Answer(scheduler=first.scheduler, plan=best_plan, result=best_result,
                    pricing=pricing, problem=problem, proven=proven,
                    evaluations=first.evaluations + multi.evaluations,
                    wall_s=first.wall_s + time.perf_counter() - start, notes=notes)
    if proven and answer.feasible:
        answer.lower_bound_usd = answer.result.cost_usd
    return answer


def scheduler(problem: Problem, pricing: Pricing, name: str, options: dict | None = None,
              seed: int = 0) -> Answer:
    """A registered scheduler's plan, priced by `pricing` (never proven optimal, except the
    stage model's exact scheduler under the stage model, whose notes say so)."""
    from heterps_sim.schedulers.base import Evaluator, NoFeasiblePlan
    from heterps_sim.schedulers.registry import make_scheduler
    search = make_scheduler(name, **{"seed": seed, **(options or {})})
    searched = pricing.search_problem(problem)  # (async: stashed weights in the memory)
    evaluate = Evaluator(searched, pricing.provisioning)
    start = time.perf_counter()
    try:
        plan = search.schedule(searched, evaluate)
    except NoFeasiblePlan as exc:
        return Answer(scheduler=name, plan=None, result=None, pricing=pricing,
                      problem=problem, evaluations=evaluate.count,
                      wall_s=time.perf_counter() - start,
                      notes={**(getattr(search, "notes", {}) or {}), "reason": str(exc)})
    notes = dict(getattr(search, "notes", {}) or {})
    plan, result = pricing.price(problem, _open_units(plan) if pricing.flushed else plan)
    # the search counted an async plan's stashed weights at staleness 1; a plan that keeps
    # more versions was priced with them, and the proof does not cover it
    stage_model = not pricing.flushed and name == "exact" and not (
        plan.schedule == "async" and pricing.search_problem(problem) is not problem
        and _staleness(plan) > 1)
    if result.extra.get("synchronous"):
        # a plan of staleness 0 trains synchronously and was priced as it flushes, which the
        # stage model's proof does not cover (_exact_stage_one says what holds instead)
        stage_model = False
    return Answer(scheduler=name, plan=plan, result=result, pricing=pricing, problem=problem,
                  proven=stage_model and bool(notes.get("proven_optimal")),
                  evaluations=evaluate.count, wall_s=time.perf_counter() - start,
                  notes=notes)


def _staleness(plan: Plan) -> int:
    from heterps_sim.core.asynchrony import staleness
    return staleness([s.num_replicas for s in plan.stages], plan.num_microbatches)


def _open_units(plan: Plan) -> Plan:
    """The plan's cuts and types with units and m left to the flushed pricing (a scheduler's
    units are the stage model's); mixed stages keep theirs."""
    if any(s.is_mixed for s in plan.stages):
        return plan
    return Plan(stages=tuple(Stage(layers=s.layers, resource=s.resource) for s in plan.stages),
                num_microbatches=plan.num_microbatches, schedule=plan.schedule)


def only_types(problem: Problem, types) -> Problem:
    """The same problem where only `types` can run any layer (the others' times unknown)."""
    import numpy as np
    keep = np.zeros(problem.num_types, bool)
    keep[list(types)] = True
    fields = {f: getattr(problem, f) for f in problem.__dataclass_fields__}
    oct_s = problem.oct_s.copy()
    oct_s[:, ~keep] = np.nan
    fields["oct_s"] = oct_s
    return type(problem)(**fields)


def _span(ms) -> str:
    ms = list(ms)
    if len(ms) > 2 and ms == list(range(ms[0], ms[-1] + 1)):
        return f"{ms[0]}-{ms[-1]}"
    return ", ".join(map(str, ms))
