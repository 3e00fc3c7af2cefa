"""Re-planning tries the exact optimum of the flushed closed form first
(studies/replan_flushed.py): checked against direct `optimum` calls (the oracle: exact per m),
the raised-floor re-plan on the same problem, and its fallback past the label budget."""

import json

import numpy as np

from heterps_sim.cost import evaluate_plan
from heterps_sim.schedulers.base import run_scheduler
from heterps_sim.schedulers.exact.flushed import optimum
from heterps_sim.schedulers.registry import make_scheduler
from heterps_sim.studies.replan_flushed import EXACT, RAISED, microbatch_counts, not_applicable
from heterps_sim.studies.verify import VerifySettings, check_lines, verify_plan
from heterps_sim.testing import chain_problem, random_default_problem

EFFECTS = ("bubbles",)


def _problem():
    # the stage model's optimum (4-4 units) simulates 23% short at its 8 microbatches
    return chain_problem([0.02, 0.05, 0.03, 0.04], alpha=1.0, batch_size=64,
                         limit=3000).with_model("default")


def _scheduler(problem):
    return run_scheduler(make_scheduler("exact", seed=0, allow_same_type_cuts=True), problem,
                         "least")


def _check(problem, max_labels):
    first = _scheduler(problem)
    return verify_plan(problem, first.plan, first.result,
                       lambda q: evaluate_plan(problem, q, "least"),
                       VerifySettings(effects=EFFECTS, exact_max_labels=max_labels),
                       reprovision=True, replan=_scheduler)


def test_exact_plan_is_accepted_and_is_the_optimum_no_dearer_than_raising_the_floor():
    p = _problem()
    check = _check(p, 30_000)
    assert not check.simulated.feasible
    assert check.status == "replanned" and check.meets_limit
    assert check.replan_method == EXACT and check.replan_proven_cheapest
    exact = [r for r in check.rounds if r.method == EXACT]
    assert [r.num_microbatches for r in exact] == microbatch_counts(p, check.simulated) \
        == [4, 8, 16]
    assert not any(r.method == RAISED for r in check.rounds)  # not needed
    # the oracle: the cheapest optimum over the m's searched is the plan run, at its cost
    optima = [optimum(p, m, "gpipe", effects=()) for m in (4, 8, 16)]
    best = min((o for o in optima if o is not None), key=lambda o: o.cost_usd)
    m = check.final_plan.num_microbatches
    assert check.final_plan == best.plan and m == best.plan.num_microbatches
    accepted = next(r for r in exact if r.meets_limit)
    assert accepted.flushed_cost_usd == best.cost_usd == optimum(p, m, "gpipe",
                                                                 effects=()).cost_usd
    assert accepted.units == tuple(s.num_replicas for s in best.plan.stages)
    # the raised-floor re-plan (exact off) ends dearer here: it keeps the stage model's cuts
    # and grows units, where the flushed optimum runs one 8-unit stage (no fill and drain)
    fallback = _check(p, 0)
    assert fallback.meets_limit and all(r.method == RAISED for r in fallback.rounds)
    usd = check.extra["final_simulated_cost_usd"]
    assert usd == accepted.simulated_cost_usd
    assert usd <= fallback.extra["final_simulated_cost_usd"]
    assert abs(usd / best.cost_usd - 1) < 1e-9  # one stage: the closed form is the simulator
    lines = "\n".join(check_lines(check))
    assert f"exact under the flushed form at {m} microbatches: " in lines
    assert "the cheapest plan that meets the limit at m = 4, 8, 16" in lines
    out = json.loads(json.dumps(check.to_json_dict()))
    assert out["replanned"]["method"] == EXACT and out["replanned"]["proven_cheapest"] is True
    row = out["replan_rounds"][[r.num_microbatches for r in exact].index(m)]
    assert row["method"] == EXACT and row["meets_limit"] and row["num_microbatches"] == m
    assert row["flushed_cost_usd"] == best.cost_usd and row["labels"] == best.labels
    # the older fields are kept
    assert {"target", "found", "reason", "units", "simulated_throughput"} <= set(row)


def _random_problem():
    # 6 layers x 4 types (seed 6): the stage model's optimum misses in the simulator, and the
    # flushed optimum at m = 8 needs 115 labels
    return random_default_problem(np.random.default_rng(6), 6, 4)


def test_past_the_label_budget_the_raised_floor_rounds_run_and_say_why():
    p = _random_problem()
    check = _check(p, 50)
    assert not check.simulated.feasible
    exact = [r for r in check.rounds if r.method == EXACT]
    # smallest m first: none at 4, past the budget at 8, which ends the search (16, the
    # simulator's m, is not searched)
    assert microbatch_counts(p, check.simulated) == [4, 8, 16]
    assert [r.num_microbatches for r in exact] == [4, 8]
    assert [r.reason for r in exact] == [
        "no plan meets the limit under the flushed form at this m",
        "past its budget of 50 labels (not proven optimal)"]
    assert not any(r.found for r in exact)
    raised = check.rounds[len(exact):]
    assert raised and all(r.method == RAISED for r in raised)
    assert check.replan_method != EXACT and not check.replan_proven_cheapest
    # then everything runs as without the exact search
    off = _check(p, 0)
    assert check.final_plan == off.final_plan and check.status == off.status
    assert [r.target for r in raised] == [r.target for r in off.rounds]
    lines = "\n".join(check_lines(check))
    assert "exact under the flushed form at 8 microbatches: past its budget" in lines
    out = check.to_json_dict()["replan_rounds"]
    assert [r["method"] for r in out] == [EXACT] * 2 + [RAISED] * len(raised)
    # with the budget its search needs, the exact plan is found at m = 8
    assert _check(p, 30_000).rounds[1].labels == optimum(
        p, 8, "gpipe", effects=(), lower_bound=_scheduler(p).result.cost_usd).labels


def test_the_exact_search_applies_to_flushed_default_model_checks_only():
    p = _problem()
    first = _scheduler(p)
    plan = first.plan.with_replicas([s.num_replicas for s in first.result.stages])
    sim = _check(p, 0).simulated
    assert not_applicable(p, sim, EFFECTS) == ""
    assert "default cost model" in not_applicable(p.with_model("paper"), sim, EFFECTS)
    assert "bubbles" in not_applicable(p, sim, ("transfers",))
    unflushed = type(sim)(**{**{f: getattr(sim, f) for f in sim.__dataclass_fields__},
                             "extra": {**sim.extra, "schedule": "async"}})
    assert "does not flush" in not_applicable(p, unflushed, EFFECTS)
    # a paper-model check records no exact round
    q = p.with_model("paper")
    paper = verify_plan(q, plan, evaluate_plan(q, plan, "least"),
                        lambda x: evaluate_plan(q, x, "least"), VerifySettings(effects=EFFECTS),
                        reprovision=True, replan=_scheduler)
    assert not any(r.method == EXACT for r in paper.rounds)
