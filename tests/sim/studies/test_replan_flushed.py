"""Re-planning tries the exact optimum of the flushed closed form first, over several
microbatch counts (studies/replan_flushed.py): checked against direct `optimum` calls at each
m (the oracle: exact per m) and flushed.best_over_microbatches, the raised-floor re-plan on the
same problem, the search once more at a raised limit, and the fallback past the label budget."""

import json

import numpy as np

from heterps_sim.cost import evaluate_plan
from heterps_sim.schedulers.base import run_scheduler
from heterps_sim.schedulers.exact.flushed import best_over_microbatches, optimum
from heterps_sim.schedulers.exact.flushed_search import (
    MAX_MICROBATCHES,
    MAX_SKIPPED_IN_A_ROW,
    MAX_WORK,
    search_microbatches,
)
from heterps_sim.schedulers.registry import make_scheduler
from heterps_sim.studies.replan_flushed import (
    EXACT,
    RAISED,
    microbatch_counts,
    ms_text,
    not_applicable,
)
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


def _oracle(problem, ms):
    """The cheapest optimum over `ms` (exact at each m), the smallest m among ties."""
    optima = [o for o in (optimum(problem, m, "gpipe", effects=()) for m in ms) if o]
    low = min(o.cost_usd for o in optima)
    return next(o for o in optima if o.cost_usd <= low * (1 + 1e-9))


def test_exact_plan_is_the_cheapest_over_every_m_searched():
    p = _problem()
    check = _check(p, 30_000)
    assert not check.simulated.feasible
    assert check.status == "replanned" and check.meets_limit
    assert check.replan_method == EXACT and check.replan_proven_cheapest
    ms = microbatch_counts(p, check.simulated)
    assert ms == list(range(2, 65))  # a small problem: every m up to 64
    [exact] = [r for r in check.rounds if r.method == EXACT]  # one round for the search
    assert not any(r.method == RAISED for r in check.rounds)  # not needed
    assert exact.microbatches_searched == tuple(ms) and not exact.microbatches_skipped
    # the oracle: the cheapest optimum over the m's searched is the plan run, at its cost
    best = _oracle(p, ms)
    m = check.final_plan.num_microbatches
    assert m == exact.num_microbatches == best.plan.num_microbatches
    assert exact.flushed_cost_usd == best.cost_usd
    assert check.final_plan == best.plan
    assert exact.units == tuple(s.num_replicas for s in best.plan.stages)
    # no dearer than the old m set (the simulator's 8 and 4, 16)
    assert best.cost_usd <= _oracle(p, (4, 8, 16)).cost_usd
    # the raised-floor re-plan (exact off) ends dearer here: it keeps the stage model's cuts
    # and grows units, where the flushed optimum runs one 8-unit stage (no fill and drain)
    fallback = _check(p, 0)
    assert fallback.meets_limit and all(r.method == RAISED for r in fallback.rounds)
    usd = check.extra["final_simulated_cost_usd"]
    assert usd == exact.simulated_cost_usd
    assert usd <= fallback.extra["final_simulated_cost_usd"]
    assert abs(usd / best.cost_usd - 1) < 1e-9  # one stage: the closed form is the simulator
    lines = "\n".join(check_lines(check))
    assert f"exact under the flushed form, m = 2-64: {best.cost_usd:,.6g} USD at m = {m}" \
        in lines
    assert "the cheapest plan that meets the limit at m = 2-64)" in lines
    out = json.loads(json.dumps(check.to_json_dict()))
    assert out["replanned"]["method"] == EXACT and out["replanned"]["proven_cheapest"] is True
    [row] = out["replan_rounds"]
    assert row["method"] == EXACT and row["meets_limit"] and row["num_microbatches"] == m
    assert row["flushed_cost_usd"] == best.cost_usd
    assert row["microbatches_searched"] == ms and row["microbatches_skipped"] == []
    # the older fields are kept
    assert {"target", "found", "reason", "units", "simulated_throughput", "labels"} <= set(row)


def _random_problem():
    # 6 layers x 4 types (seed 6): the stage model's optimum misses in the simulator; the
    # searches at m = 5, 6, 7 make more than 50 labels, at 5 and 43-45 more than 150
    return random_default_problem(np.random.default_rng(6), 6, 4)


def test_past_the_label_budget_m_is_skipped_and_three_in_a_row_end_the_search():
    p = _random_problem()
    check = _check(p, 50)
    assert not check.simulated.feasible
    assert microbatch_counts(p, check.simulated) == list(range(2, 65))
    [exact] = [r for r in check.rounds if r.method == EXACT]
    assert exact.microbatches_searched == (2, 3, 4)
    assert exact.microbatches_skipped == (5, 6, 7) and MAX_SKIPPED_IN_A_ROW == 3
    assert exact.microbatches_not_reached == tuple(range(8, 65))
    assert not exact.found and exact.max_labels == 50
    assert all(optimum(p, m, "gpipe", effects=()) is None for m in (2, 3, 4))  # oracle
    raised = check.rounds[1:]
    assert raised and all(r.method == RAISED for r in raised)
    assert check.replan_method != EXACT and not check.replan_proven_cheapest
    # then everything runs as without the exact search
    off = _check(p, 0)
    assert check.final_plan == off.final_plan and check.status == off.status
    assert [r.target for r in raised] == [r.target for r in off.rounds]
    lines = "\n".join(check_lines(check))
    assert ("exact under the flushed form, m = 2-64: no plan meets the limit under the "
            "flushed form at m = 2-4 (past its budget of 50 labels at m = 5-7; m = 8-64 "
            "not searched: 3 skipped in a row)") in lines
    out = check.to_json_dict()["replan_rounds"]
    assert [r["method"] for r in out] == [EXACT] + [RAISED] * len(raised)
    assert json.loads(json.dumps(out))[0]["microbatches_not_reached"] == list(range(8, 65))
    # a budget that finds a plan past skipped m's: the cheapest over the m's searched, not
    # proven the cheapest over all
    mid = _check(p, 150)
    [exact] = [r for r in mid.rounds if r.method == EXACT]
    assert exact.microbatches_skipped == (5, 43, 44, 45) and exact.found
    assert exact.microbatches_searched == (2, 3, 4, *range(6, 43))
    assert exact.microbatches_not_reached == tuple(range(46, 65))
    assert exact.flushed_cost_usd == _oracle(p, exact.microbatches_searched).cost_usd
    assert mid.replan_method == EXACT and not mid.replan_proven_cheapest
    assert "past its budget of 150 labels at m = 5, 43-45; m = 46-64 not searched" in \
        "\n".join(check_lines(mid))
    # with the budget every m needs, the plan is the cheapest over all of them (here at
    # m = 64, which the budget of 150 did not reach: a cheaper plan)
    full = _check(p, 30_000)
    [best] = [r for r in full.rounds if r.method == EXACT]
    assert best.microbatches_searched == tuple(microbatch_counts(p, full.simulated))
    assert best.flushed_cost_usd == _oracle(p, best.microbatches_searched).cost_usd
    assert best.flushed_cost_usd < exact.flushed_cost_usd and best.num_microbatches == 64
    assert full.replan_proven_cheapest


def test_a_plan_short_in_the_simulator_searches_once_more_for_a_raised_limit():
    # 5 layers x 3 types (seed 5): the flushed optimum simulates short; the search at the
    # raised limit finds one that meets it
    p = random_default_problem(np.random.default_rng(5), 5, 3)
    check = _check(p, 30_000)
    first, again = [r for r in check.rounds if r.method == EXACT]
    ms = microbatch_counts(p, check.simulated)
    assert first.target == p.throughput_limit and not first.meets_limit
    assert first.flushed_cost_usd == _oracle(p, ms).cost_usd
    assert first.flushed_throughput >= p.throughput_limit > first.simulated_throughput
    assert first.reason.startswith("the simulator finds it")
    # the limit raised by the closed form's overestimate of that plan
    target = p.throughput_limit * first.flushed_throughput / first.simulated_throughput
    assert again.target == target and again.limit == p.throughput_limit
    raised = p.with_limit(target)
    assert again.flushed_cost_usd == _oracle(raised, first.microbatches_searched).cost_usd
    assert again.meets_limit and check.status == "replanned" and check.meets_limit
    assert check.replan_method == EXACT and not check.replan_proven_cheapest
    assert check.final_simulated.throughput == again.simulated_throughput
    assert check.final_plan.num_microbatches == again.num_microbatches
    lines = "\n".join(check_lines(check))
    assert f"exact under the flushed form for {target:,.0f} samples/s, m = " in lines
    assert (f"after re-planning (exact under the flushed form at {again.num_microbatches} "
            "microbatches)") in lines
    # seed 2: short again at the raised limit -> the raised-floor rounds, as without the search
    q = random_default_problem(np.random.default_rng(2), 5, 3)
    short = _check(q, 30_000)
    exact = [r for r in short.rounds if r.method == EXACT]
    assert len(exact) == 2 and not any(r.meets_limit for r in exact)
    assert short.replan_method == RAISED
    off = _check(q, 0)
    assert short.final_plan == off.final_plan and short.status == off.status


def test_search_microbatches_is_best_over_microbatches_with_a_stop():
    for seed in range(4):
        p = random_default_problem(np.random.default_rng(seed), 5, 3)
        ms = range(2, 13)
        got = search_microbatches(p, ms, "gpipe", effects=(), max_labels=2_000_000)
        ref = best_over_microbatches(p, ms, "gpipe", effects=(), max_labels=2_000_000)
        assert got.complete and got.searched == ref.searched and not ref.skipped
        if ref.best is None:
            assert got.best is None
        else:
            assert abs(got.best.cost_usd / ref.best.cost_usd - 1) < 1e-9
            assert got.best.cost_usd == _oracle(p, ms).cost_usd
    # one label: m = 2, 3 prove they have no plan without one; three skipped in a row, the
    # rest not reached
    p = _random_problem()
    got = search_microbatches(p, range(2, 11), "gpipe", effects=(), max_labels=1)
    assert got.best is None and got.searched == (2, 3) and got.skipped == (4, 5, 6)
    assert optimum(p, 2, "gpipe", effects=()) is None is optimum(p, 3, "gpipe", effects=())
    assert got.not_reached == tuple(range(7, 11)) and not got.complete


def test_the_m_set_shrinks_with_the_problem_as_the_work_rule_says():
    class Shape:  # microbatch_counts reads the problem's size only
        def __init__(self, layers, types, batch=4096):
            self.num_layers, self.num_types, self.batch_size = layers, types, batch

    class Sim:
        def __init__(self, m):
            self.extra = {"num_microbatches": m}

    def brute(layers, types):  # the largest m_hi with sum(2..m_hi) layers x types x m <= MAX_WORK
        return max(h for h in range(1, MAX_MICROBATCHES + 1)
                   if sum(layers * types * m for m in range(2, h + 1)) <= MAX_WORK)

    for layers, types, hi in ((36, 64, 12), (8, 64, 26), (64, 64, 8), (11, 2, 64), (9, 16, 49)):
        assert brute(layers, types) == hi
        assert microbatch_counts(Shape(layers, types), Sim(45)) == [*range(2, hi + 1), 45][
            :None if hi < 45 else -1]
    # the simulator's m always, within the batch size; too large a problem: that m only
    assert microbatch_counts(Shape(256, 1024), Sim(48)) == [48]
    assert microbatch_counts(Shape(36, 64, batch=6), Sim(45)) == [2, 3, 4, 5, 6]


def test_ms_text():
    assert ms_text([9, 2, 3, 4, 7, 10, 45]) == "2-4, 7, 9-10, 45"
    assert ms_text([5]) == "5" and ms_text([]) == ""


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
