"""A plan over whole jobs with spot units (planner/episodes.py): bills against the plan's own
job cost, the floor's share against the step times, spot against on demand seed by seed, and
the market file's bad input."""

import math
from dataclasses import replace

import numpy as np
import pytest

from heterps_sim.core.files import UserFileError
from heterps_sim.cost import reference as model
from heterps_sim.cost.dominant import billed_hours
from heterps_sim.inputs.load import load_input
from heterps_sim.inputs.market import parse_market
from heterps_sim.planner import Planner
from heterps_sim.planner.episodes import rental_episodes, share_interval, step_times


@pytest.fixture(scope="module")
def tiny():
    problem = load_input("scenarios/exec-tiny.yaml").problem
    answer = Planner(search="exact").plan(problem)
    return answer.problem, answer.plan


def _market(spot=None, **kw):
    data = {"spot": spot or {}, "checkpoint": {"write_s": 30.0}, **kw}
    return parse_market(data, "<market>")


def _units(plan):
    return [(name, n) for s in plan.stages for name, n in s.groups]


def test_on_demand_jobs_cost_what_the_plan_bills_at_their_step_time(tiny):
    problem, plan = tiny
    step_s = np.array([2.0e-3, 2.5e-3, 3.0e-3])
    out = rental_episodes(problem, plan, _market(), seeds=3, step_s=step_s)
    steps = math.ceil(problem.num_samples / problem.batch_size)
    names = list(problem.type_names)
    per_hour = sum(float(problem.price_per_hour[names.index(t)]) * n for t, n in _units(plan))
    startup = model.plan_startup_s(problem, model.plan_stages(problem, plan))
    for s, cost, run in zip(step_s, out.cost_usd, out.run_s):
        assert run == pytest.approx(steps * s)  # no reclaim, no checkpoint
        assert cost == pytest.approx((per_hour + model.fixed_price_per_hour(problem))
                                     * billed_hours(startup + steps * s,
                                                    problem.unit_costs.billing_granularity_s))
    assert out.reference is None and out.reclaims.sum() == 0


def test_spot_that_is_never_reclaimed_bills_the_spot_price_for_the_same_run(tiny):
    problem, plan = tiny
    (name, n), = _units(plan)
    step_s = np.array([2.0e-3, 4.0e-3])
    out = rental_episodes(problem, plan, _market({name: {"price_per_hour": 0.1,
                                                          "reclaims_per_hour": 0.0}}),
                          seeds=2, step_s=step_s)
    assert np.allclose(out.run_s, out.reference.run_s)
    od = float(problem.price_per_hour[list(problem.type_names).index(name)])
    assert out.savings() == pytest.approx(1.0 - 0.1 / od)
    assert out.spot_units == {name: n}


def test_the_floors_share_is_the_jobs_whose_step_meets_it(tiny):
    problem, plan = tiny
    step_s = np.array([1.0, 2.0, 3.0, 4.0, 5.0]) * 1e-3
    limit = problem.batch_size / 3.5e-3  # steps of 1-3 ms meet it, 4-5 ms do not
    out = rental_episodes(replace(problem, throughput_limit=limit), plan, _market(), seeds=5,
                          step_s=step_s)
    assert out.meet.mean == pytest.approx(3 / 5)
    assert out.meet.low < 0.6 < out.meet.high


def test_reclaims_only_lengthen_each_job_and_youngs_interval_is_used(tiny):
    problem, plan = tiny
    (name, n), = _units(plan)
    problem = replace(problem, num_samples=problem.batch_size * 200_000)  # hours, not seconds
    step_s = np.full(12, 0.2)
    rate = 3.0
    out = rental_episodes(problem, plan, _market({name: {"price_per_hour": 0.1,
                                                          "reclaims_per_hour": rate}}),
                          seeds=12, step_s=step_s)
    assert np.all(out.run_s >= out.reference.run_s)
    assert out.reclaims.sum() > 0 and out.lost_steps.sum() > 0
    young = math.sqrt(2 * 30.0 * 3600.0 / (n * rate))
    assert out.checkpoint_every_steps == round(young / 0.2)


def test_step_times_are_the_simulators_at_each_seed(tiny):
    from heterps_sim.des import simulate
    from heterps_sim.planner.check import DETERMINISTIC_EFFECTS, VerifySettings
    problem, plan = tiny
    got = step_times(problem, plan, 3)
    effects = DETERMINISTIC_EFFECTS + ("jitter", "stragglers")
    for seed in range(3):
        options = VerifySettings(effects=effects, seed=seed).options().model_copy(
            update={"straggler_draw": "each"})
        r = simulate(problem, plan, seed=seed, record_spans=False, options=options).result
        assert got[seed] == pytest.approx(problem.batch_size / r.throughput)
    assert len(set(got.tolist())) > 1  # the jitter draws per seed


def test_a_job_of_one_unit_is_slow_as_often_as_the_stragglers_share_says():
    """Jobs draw each unit slow with the stragglers' share as its probability: a one-unit plan
    (which a share rounded down never makes slow) is 1.5x slower in about one job in ten."""
    from heterps_sim.des.effects import choose_stragglers
    from heterps_sim.testing import chain_plan, chain_problem
    problem = chain_problem([0.01], alpha=0.9)
    plan = chain_plan(problem, [1])
    assert choose_stragglers(0, 1, 0.1) == frozenset()  # the simulator's share: never slow
    slow = [len(choose_stragglers(s, 1, 0.1, "each")) for s in range(2000)]
    assert 0.08 < sum(slow) / 2000 < 0.12
    got = step_times(problem, plan, 40)
    fast = float(np.min(got))
    assert any(t > 1.3 * fast for t in got)  # some jobs hold the slow unit
    assert sum(t > 1.3 * fast for t in got) < 12  # and most do not


def test_wilson_interval_holds_the_share():
    iv = share_interval(0, 20)
    assert (iv.mean, iv.low) == (0.0, 0.0) and 0.1 < iv.high < 0.2


@pytest.mark.parametrize("data, words", [
    ({"checkpoint": {"write_s": 1}, "spot": {"t9": {"price_per_hour": 1, "reclaims_per_hour": 0}}},
     "spot.t9: not a type"),
    ({"checkpoint": {"write_s": 1}, "spot": {"t4": {"price_per_hour": 1,
                                                    "reclaims_per_hour": -1}}},
     "spot.t4.reclaims_per_hour"),
    ({"spot": {}}, "checkpoint"),
    ({"checkpoint": {"write_s": 1}, "probability": 1.5}, "probability"),
    ({"checkpoint": {"write_s": 1}, "bid": 3}, "bid"),
])
def test_bad_markets_are_one_line_naming_the_field(data, words):
    with pytest.raises(UserFileError, match=words) as exc:
        parse_market(data, "m.yaml", ["t4", "xeon-icelake-16vcpu"])
    assert str(exc.value).startswith("m.yaml: ") and "\n" not in str(exc.value)


def test_a_market_trace_is_replayed_and_its_fitted_model_is_printed_beside(tiny, tmp_path):
    from heterps_sim.planner.episodes import fitted_market
    problem, plan = tiny
    (name, n), = _units(plan)
    trace = tmp_path / "t.csv"
    trace.write_text("0,3\n1000,0\n1500,3\n")  # a dip every 4,000 s
    market = parse_market({"spot": {name: {"price_per_hour": 0.1, "trace": "t.csv",
                                           "trace_period_s": 4000}},
                           "checkpoint": {"write_s": 1.0}}, "<m>", base=tmp_path)
    problem = replace(problem, num_samples=problem.batch_size * 4_000_000)  # ~2.5 h jobs
    out = rental_episodes(problem, plan, market, seeds=6, step_s=np.full(6, 2.2e-3))
    assert out.reclaims.sum() > 0 and out.predicted is not None
    fitted = fitted_market(market, plan).spot[name]
    up_hours = 3500 / 3600
    assert fitted.availability is None
    assert fitted.reclaims_per_hour == pytest.approx(1 / up_hours / n)
    assert fitted_market(market, plan).restart_extra_s == pytest.approx(500.0)


def test_a_market_type_needs_a_rate_or_a_trace():
    with pytest.raises(UserFileError, match="spot.t4: give reclaims_per_hour or a trace"):
        parse_market({"spot": {"t4": {"price_per_hour": 1}}, "checkpoint": {"write_s": 1}},
                     "m.yaml")


def test_fresh_seeds_are_the_later_jobs_of_a_longer_run(tiny):
    problem, plan = tiny
    (name, _), = _units(plan)
    market = _market({name: {"price_per_hour": 0.1, "reclaims_per_hour": 0.0}})
    five = rental_episodes(problem, plan, market, seeds=5)
    last = rental_episodes(problem, plan, market, seeds=2, first_seed=3)
    assert np.array_equal(last.step_s, five.step_s[3:])
    assert np.array_equal(last.cost_usd, five.cost_usd[3:])
    assert np.array_equal(last.reference.cost_usd, five.reference.cost_usd[3:])
    assert not np.array_equal(last.step_s, five.step_s[:2])
