"""Planning on spot prices (planner/spot.py) and parameter-server hosts rented on spot
(planner/episodes.py): the repriced problem against the catalog's numbers, the answer against
the planner on the repriced problem, the PS hosts' lease against a bill by hand, and a
held-out trace window in a market file."""

import math

import numpy as np
import pytest

from heterps_sim.core.files import UserFileError
from heterps_sim.cost import reference as model
from heterps_sim.cost.dominant import billed_hours
from heterps_sim.cost.ps_hosts import cheapest_choice, with_ps
from heterps_sim.inputs.load import load_input
from heterps_sim.inputs.market import parse_market
from heterps_sim.planner import Planner
from heterps_sim.planner.episodes import job_specs, rental_episodes
from heterps_sim.planner.robust import headroom_sweep
from heterps_sim.planner.spot import spot_priced


def _market(spot, **kw):
    return parse_market({"spot": spot, "checkpoint": {"write_s": 30.0}, **kw}, "<market>")


@pytest.fixture(scope="module")
def dlrm():
    problem = load_input("scenarios/dlrm-criteo1tb-aws.yaml").problem
    return with_ps(problem, cheapest_choice(problem))


def test_spot_prices_replace_only_the_spot_types_prices():
    problem = load_input("scenarios/exec-tiny.yaml").problem
    got = spot_priced(problem, _market({"t4": {"price_per_hour": 0.2, "reclaims_per_hour": 0}}))
    names = list(problem.type_names)
    for j, name in enumerate(names):
        want = 0.2 if name == "t4" else float(problem.price_per_hour[j])
        assert float(got.price_per_hour[j]) == want
    assert float(problem.price_per_hour[names.index("t4")]) != 0.2  # the input is not changed


def test_a_spot_ps_host_type_reprices_the_parameter_server(dlrm):
    host, shards = dlrm.ps.host_type, dlrm.ps.num_shards
    got = spot_priced(dlrm, _market({host: {"price_per_hour": 0.05, "reclaims_per_hour": 0}}))
    assert (got.ps.host_type, got.ps.num_shards) == (host, shards)
    assert model.fixed_price_per_hour(got) == pytest.approx(shards * 0.05)
    assert model.fixed_price_per_hour(dlrm) == pytest.approx(
        shards * float(dlrm.price_per_hour[list(dlrm.type_names).index(host)]))


def test_ps_hosts_on_spot_are_a_lease_and_bill_the_spot_price():
    from heterps_sim.cost.ps_hosts import problem_for_plan
    from heterps_sim.inputs.load import load_plan
    from heterps_sim.planner import Pricing
    problem = load_input("scenarios/dlrm-criteo1tb-aws.yaml").problem
    shipped = load_plan("scenarios/plans/dlrm-criteo1tb-aws.json")
    plan, _ = Pricing.of(problem).price(problem, shipped)
    host, shards = plan.ps.resource, plan.ps.num_shards
    priced = problem_for_plan(problem, host, shards)
    market = _market({host: {"price_per_hour": 0.05, "reclaims_per_hour": 0.0}})
    steps = math.ceil(problem.num_samples / problem.batch_size)
    (spec,) = job_specs(priced, plan, market, np.array([0.05]))
    leases = {lease.name: lease for lease in spec.leases}
    assert leases[host].count == shards and leases[host].price_per_hour == 0.05
    assert spec.fixed_per_hour == 0.0  # the hosts are billed as a lease, not a fixed price
    (on_demand,) = job_specs(priced, plan, market.on_demand(), np.array([0.05]))
    assert host not in {lease.name for lease in on_demand.leases}
    assert on_demand.fixed_per_hour == pytest.approx(model.fixed_price_per_hour(priced))
    out = rental_episodes(problem, plan, market, seeds=2, step_s=np.array([0.05, 0.05]))
    names = list(problem.type_names)
    stages = sum(float(problem.price_per_hour[names.index(n)]) * k
                 for s in plan.stages for n, k in s.groups)
    hours = billed_hours(spec.startup_s + steps * 0.05, problem.unit_costs.billing_granularity_s)
    assert out.cost_usd[0] == pytest.approx((stages + shards * 0.05) * hours)
    assert out.reference.cost_usd[0] == pytest.approx(
        (stages + model.fixed_price_per_hour(priced)) * hours)
    assert out.spot_units == {host: shards}


def test_the_spot_priced_sweep_answers_what_the_planner_answers_on_spot_prices():
    problem = load_input("scenarios/exec-tiny.yaml").problem
    planner = Planner(search="exact")
    on_demand = planner.plan(problem).plan
    used = {name for s in on_demand.stages for name, _ in s.groups}
    other = next(n for n in problem.type_names if n not in used)
    # the type the on-demand answer leaves out, nearly free on spot: the spot answer takes it
    market = _market({other: {"price_per_hour": 1e-3, "reclaims_per_hour": 0.0}})
    repriced = spot_priced(problem, market)
    want = planner.plan(repriced)
    sweep = headroom_sweep(problem, market, planner, headrooms=(0.0,), seeds=2,
                           plan_on=repriced, label="spot prices")
    (c,) = sweep.candidates
    assert c.label == "spot prices 0%"
    assert c.plan == want.plan and c.planned_cost_usd == pytest.approx(want.cost_usd)
    assert other in {name for s in c.plan.stages for name, _ in s.groups}
    assert c.outcome.spot_units.get(other, 0) > 0


def test_a_trace_window_in_a_market_is_replayed_alone(tmp_path):
    (tmp_path / "t.csv").write_text("0,3\n1000,0\n1500,3\n4000,3\n")
    market = parse_market({"spot": {"t4": {"price_per_hour": 0.1, "trace": "t.csv",
                                           "trace_window_s": [1500, 4000]}},
                           "checkpoint": {"write_s": 1.0}}, "<m>", base=tmp_path)
    trace = market.spot["t4"].availability
    assert trace.times_s == (0.0,) and trace.units == (3,) and trace.period_s == 2500.0


@pytest.mark.parametrize("terms, words", [
    ({"price_per_hour": 1, "reclaims_per_hour": 0, "trace_window_s": [0, 10]}, "needs a trace"),
    ({"price_per_hour": 1, "trace": "t.csv", "trace_window_s": [0, 9000]}, "trace window"),
    ({"price_per_hour": 1, "trace": "t.csv", "trace_window_s": [10]}, "trace_window_s"),
    ({"price_per_hour": 1, "reclaims_per_hour": 0, "fit_window_s": [0, 10]}, "needs a trace"),
    ({"price_per_hour": 1, "trace": "t.csv", "fit_window_s": [0, 9000]}, "fit_window_s"),
])
def test_bad_trace_and_fit_windows_are_one_line_naming_the_field(tmp_path, terms, words):
    (tmp_path / "t.csv").write_text("0,3\n1000,0\n4000,3\n")
    with pytest.raises(UserFileError, match=words) as exc:
        parse_market({"spot": {"t4": terms}, "checkpoint": {"write_s": 1}}, "m.yaml",
                     base=tmp_path)
    assert str(exc.value).startswith("m.yaml: spot.t4") and "\n" not in str(exc.value)


@pytest.fixture(scope="module")
def tight():
    """exec-tiny with its floor just under its answer's mean throughput: on means the answer
    holds it, under the simulator's jitter and stragglers its jobs miss it. The floor must
    hold in 80% of 8 jobs: one job in about ten draws a slow unit, and no unit added to this
    plan of 2 microbatches per step makes a job with a slow unit reach the floor."""
    from dataclasses import replace
    problem = load_input("scenarios/exec-tiny.yaml").problem
    planner = Planner(search="exact")
    answer = planner.plan(problem)
    problem = replace(problem, throughput_limit=0.99 * answer.result.throughput)
    (name,) = {n for s in answer.plan.stages for n, _ in s.groups}
    market = _market({name: {"price_per_hour": 0.3, "reclaims_per_hour": 0.0}},
                     probability=0.8)
    (start,) = headroom_sweep(problem, market, planner, headrooms=(0.0,), seeds=8).candidates
    return problem, market, start


def test_the_floor_quantile_says_whether_the_floor_holds(tight):
    from heterps_sim.planner.robust import floor_quantile
    problem, market, start = tight
    assert not start.holds  # the premise: noise makes the mean-time answer miss
    assert floor_quantile(problem, start.outcome) < problem.throughput_limit
    thr = problem.batch_size * start.outcome.steps / start.outcome.run_s
    assert floor_quantile(problem, start.outcome) in set(thr.tolist())


def test_units_are_added_until_the_floor_holds_and_no_further(tight):
    from heterps_sim.planner.robust import floor_quantile, unit_repair, with_unit_added
    problem, market, start = tight
    got = unit_repair(problem, start, market, seeds=8)
    assert got.holds and floor_quantile(problem, got.outcome) >= problem.throughput_limit
    units = [s.num_replicas for s in got.plan.stages]
    added = sum(units) - sum(s.num_replicas for s in start.plan.stages)
    assert added >= 1 and got.label == f"headroom 0% +{added} units"
    # one unit fewer (the plan of the last round's start) did not hold: it stopped at once
    before = start.plan
    for _ in range(added - 1):
        before = with_unit_added(before, 0)
    assert not rental_episodes(problem, before, market, seeds=8, reference=False).meets_probability
    # the outcome is the final plan's own jobs (the same seeds), and its planned cost its bill
    again = rental_episodes(problem, got.plan, market, seeds=8, reference=False)
    assert np.array_equal(again.cost_usd, got.outcome.cost_usd)
    from heterps_sim.planner import Pricing
    assert got.planned_cost_usd == pytest.approx(
        Pricing.of(problem).price(problem, got.plan)[1].cost_usd)


def test_a_plan_that_holds_is_left_as_it_is(tight):
    from dataclasses import replace

    from heterps_sim.planner.robust import unit_repair
    problem, market, start = tight
    loose = replace(problem, throughput_limit=problem.throughput_limit / 4)
    held = rental_episodes(loose, start.plan, market, seeds=8, reference=False)
    begin = replace(start, outcome=held)
    assert unit_repair(loose, begin, market, seeds=8).plan == start.plan


def test_growth_adds_one_unit_per_stage_and_one_ps_host():
    from heterps_sim.inputs.load import load_plan
    from heterps_sim.planner.robust import growth_moves
    plan = load_plan("scenarios/plans/dlrm-criteo1tb-aws.json")
    moves = growth_moves(plan)
    assert len(moves) == len(plan.stages) + 1
    for g, m in enumerate(moves[:-1]):
        assert [s.num_replicas for s in m.stages] == [
            s.num_replicas + (i == g) for i, s in enumerate(plan.stages)]
        assert m.ps == plan.ps
    assert moves[-1].stages == plan.stages
    assert (moves[-1].ps.resource, moves[-1].ps.num_shards) == (plan.ps.resource,
                                                                plan.ps.num_shards + 1)


def test_growth_stays_within_each_types_available_units():
    from dataclasses import replace

    from heterps_sim.inputs.load import load_plan
    from heterps_sim.planner.robust import growth_moves
    problem = load_input("scenarios/dlrm-criteo1tb-aws.yaml").problem
    plan = load_plan("scenarios/plans/dlrm-criteo1tb-aws.json")
    names = list(problem.type_names)
    h100 = sum(s.num_replicas for s in plan.stages)  # both stages are H100s
    avail = list(problem.available)
    avail[names.index("h100-80gb-sxm")] = h100  # no H100 to spare: only the PS host grows
    moves = growth_moves(plan, replace(problem, available=tuple(avail)))
    assert len(moves) == 1 and moves[0].ps.num_shards == plan.ps.num_shards + 1
    assert len(growth_moves(plan, problem)) == len(plan.stages) + 1


def test_a_stage_model_answer_is_rented_with_the_units_its_price_provisioned():
    from dataclasses import replace

    from heterps_sim.planner.episodes import rentable
    problem = load_input("scenarios/mixed-leftovers.yaml").problem  # the paper's stage model
    problem = replace(problem, throughput_limit=problem.throughput_limit / 2)  # a plan exists
    answer = Planner(search="exact", provisioning="least", options={"mixed": True}).plan(problem)
    assert any(s.num_replicas is None for s in answer.plan.stages)  # the premise
    got = rentable(answer.plan, answer.result)
    assert [s.num_replicas for s in got.stages] == [s.num_replicas
                                                     for s in answer.result.stages]
    assert got.layer_names == answer.plan.layer_names
    assert rentable(got, answer.result) is got


def test_the_checkpoint_sweep_finds_youngs_interval_near_the_cheapest():
    """Hours-long jobs reclaimed twice an hour with a 30 s checkpoint: the jobs' mean cost is
    least near Young's interval and clearly higher at an eighth and at eight times it (too
    many writes; too much lost work)."""
    from dataclasses import replace

    from heterps_sim.planner.robust import best_checkpoint, checkpoint_sweep
    problem = load_input("scenarios/exec-tiny.yaml").problem
    answer = Planner(search="exact").plan(problem)
    problem = replace(answer.problem, num_samples=problem.batch_size * 2_000_000)
    (name,) = {n for s in answer.plan.stages for n, _ in s.groups}
    market = _market({name: {"price_per_hour": 0.3, "reclaims_per_hour": 2.0}}, restart_s=120)
    got = checkpoint_sweep(problem, answer.plan, market, seeds=60, scales=(0.125, 0.5, 1, 2, 8))
    assert [c.scale for c in got] == [0.125, 0.5, 1, 2, 8]
    every = [c.outcome.checkpoint_every_steps for c in got]
    assert every[2] == pytest.approx(8 * every[0], rel=1e-3) and every[4] == pytest.approx(
        8 * every[2], rel=1e-3)
    assert all(np.array_equal(c.outcome.step_s, got[0].outcome.step_s) for c in got)
    best = best_checkpoint(got)
    assert best.scale in (0.5, 1, 2)
    for extreme in (got[0], got[4]):
        assert extreme.outcome.cost.low > best.outcome.cost.high


def test_a_fit_window_is_what_the_prediction_and_the_checkpoints_know(tmp_path):
    # the fit window [0, 3600): one fall below 2 units; the replayed window [3600, 7200): none
    (tmp_path / "t.csv").write_text("0,2\n1800,1\n2400,2\n7200,2\n")
    terms = {"price_per_hour": 0.1, "trace": "t.csv", "trace_window_s": [3600, 7200]}
    market = parse_market({"spot": {"t4": {**terms, "fit_window_s": [0, 3600]}},
                           "checkpoint": {"write_s": 1.0}}, "<m>", base=tmp_path)
    alone = parse_market({"spot": {"t4": terms}, "checkpoint": {"write_s": 1.0}}, "<m>",
                         base=tmp_path)
    from heterps_sim.core.plan import Plan, Stage
    from heterps_sim.planner.episodes import fitted_market
    plan = Plan(stages=(Stage(layers=("x",), resource="t4", num_replicas=2),))
    fitted = fitted_market(market, plan).spot["t4"]
    # one fall per 3,000 s held at 2 units, shared by the 2 units; the wait 600 s
    assert fitted.reclaims_per_hour == pytest.approx(1 / (3000 / 3600) / 2)
    assert fitted.availability is None and fitted.fit_on is None
    assert fitted_market(market, plan).restart_extra_s == pytest.approx(600.0)
    # without a fit window the prediction is fitted on the replayed part: no fall there
    assert fitted_market(alone, plan).spot["t4"].reclaims_per_hour == 0.0
    assert market.spot["t4"].availability.units == (2,)  # the replay is the later part


def test_the_checkpoint_interval_comes_from_the_fit_window_not_the_replay(tmp_path):
    # exec-tiny's answer on spot: the fit window has a fall, the replayed part none; Young's
    # interval follows the fit window's rate (a planner knows the past, not the replay)
    problem = load_input("scenarios/exec-tiny.yaml").problem
    plan = Planner(search="exact").plan(problem).plan
    (name,) = {n for s in plan.stages for n, _ in s.groups}
    (tmp_path / "t.csv").write_text("0,64\n1800,0\n2400,64\n7200,64\n")
    terms = {"price_per_hour": 0.1, "trace": "t.csv", "trace_window_s": [3600, 7200]}

    def every(extra):
        market = parse_market({"spot": {name: {**terms, **extra}},
                               "checkpoint": {"write_s": 1.0}}, "<m>", base=tmp_path)
        (spec,) = job_specs(problem, plan, market, np.array([0.01]))
        return spec.checkpoint_every

    assert every({}) == 0  # no fall in the replayed part: no checkpoints
    assert every({"fit_window_s": [0, 3600]}) > 0
