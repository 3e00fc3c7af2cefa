"""Priced parameter-server hosts (cost/ps_hosts.py): the memory rule, the choices, with_ps,
and the price reaching the analytic model, the simulator and plan.json."""

import math

import numpy as np
import pytest

from heterps_sim.core.plan import Plan, PsHosts, Stage, plan_from_dict
from heterps_sim.cost import ps_hosts, ps_traffic
from heterps_sim.cost.reference import (
    evaluate_plan,
    fixed_price_per_hour,
    job_cost,
    plan_stages,
    plan_startup_s,
)
from heterps_sim.inputs.scenario import ScenarioError, parse_scenario, scenario_problem

HOSTS = ["r7i-4xlarge", "r7i-8xlarge", "r6i-16xlarge"]


def problem_of(ps=None, *, rows=2_000_000, dim=64, limit=200_000, types=None, model="default"):
    """tiny-ctr with 8 tables of `rows` x `dim` on three memory-optimised hosts and a T4."""
    data = {"name": "ps-hosts", "model": {"name": "tiny-ctr",
                                          "params": {"rows": rows, "embedding_dim": dim}},
            "cluster": {"types": types or [*HOSTS, "t4"]},
            "workload": {"batch_size": 4096, "throughput_limit": limit, "num_samples": 1e9},
            "costs": {"model": model}}
    if ps is not None:
        data["ps"] = ps
    return scenario_problem(parse_scenario(data))


def every_option(problem, max_shards=64):
    """Every (host, shards) pair, feasible or not, priced as ps_hosts prices them."""
    spec = ps_traffic.problem_ps(problem)
    return [ps_hosts._choice(problem, spec, problem.type_index(h), n)
            for h in spec.hosts for n in range(1, max_shards + 1)]


def test_the_scenario_hosts_default_to_its_memory_optimised_types_and_start_on_the_cheapest():
    p = problem_of()
    assert p.ps.hosts == tuple(HOSTS)
    assert p.ps.table_bytes == 8 * 2_000_000 * 64 * 4
    assert p.ps.held_bytes == 2 * p.ps.table_bytes  # Adagrad: one accumulator per element
    first = ps_hosts.ps_choices(p)[0]
    assert (p.ps.host_type, p.ps.num_shards) == (first.host_type, first.num_shards)
    assert fixed_price_per_hour(p) == pytest.approx(first.price_per_hour)


def test_no_memory_optimised_type_or_hosts_none_keeps_the_free_ps():
    assert problem_of(types=["xeon-icelake-16vcpu", "t4"]).ps.price_per_hour == 0
    p = problem_of({"hosts": "none"})
    assert p.ps.hosts == () and p.ps.host_type == "" and fixed_price_per_hour(p) == 0
    assert ps_hosts.ps_choices(p) == []


def test_memory_rule_a_choice_that_cannot_hold_the_tables_is_absent():
    # 8 x 200M x 64 x 4 B = 409.6 GB of rows, 819.2 GB with Adagrad's state: an r7i.4xlarge
    # (128 GB, 102.4 usable) needs 8 shards, an r7i.8xlarge 4, an r6i.16xlarge 2
    p = problem_of(rows=200_000_000, model="paper")
    choices = ps_hosts.ps_choices(p)
    assert choices and all(ps_hosts.holds_tables(p, c) for c in choices)
    fewest = {h: min(c.num_shards for c in every_option(p) if c.host_type == h
                     and ps_hosts.holds_tables(p, c)) for h in HOSTS}
    assert fewest == {"r7i-4xlarge": 8, "r7i-8xlarge": 4, "r6i-16xlarge": 2}
    for c in every_option(p):
        if c.num_shards < fewest[c.host_type]:
            assert not ps_hosts.holds_tables(p, c) and c not in choices


def test_the_cheapest_adequate_choice_is_present_and_prices_add():
    for p in (problem_of(), problem_of(rows=200_000_000), problem_of(limit=2_000_000)):
        traffic = p.throughput_limit * sum(map(sum, ps_traffic.layer_bytes(p)))
        adequate = [c for c in every_option(p, 512) if ps_hosts.holds_tables(p, c)
                    and c.aggregate_bytes_per_s >= traffic * (1 - 1e-12)]
        cheapest = min(c.price_per_hour for c in adequate)  # brute force over 1..512 shards
        choices = ps_hosts.ps_choices(p)
        assert choices[0].price_per_hour == pytest.approx(cheapest, rel=1e-12)
        for c in choices:
            j = p.type_index(c.host_type)
            assert c.price_per_hour == pytest.approx(c.num_shards * p.price_per_hour[j])
            assert c.shard_bytes_per_s == p.network_bytes_per_s[j]


def test_no_kept_choice_is_dominated_and_every_dropped_one_is():
    p = problem_of()
    kept = ps_hosts.ps_choices(p)
    assert 1 < len(kept) <= (ps_hosts.FINE_STEPS + 5) * len(HOSTS)
    for a in kept:
        for b in kept:
            assert a is b or not (a.price_per_hour <= b.price_per_hour
                                  and a.aggregate_bytes_per_s >= b.aggregate_bytes_per_s)
    rungs = [ps_hosts._choice(p, p.ps, p.type_index(h), n)
             for h in HOSTS for n in ps_hosts._ladder(p, p.ps, p.type_index(h))]
    for c in rungs:
        if c not in kept:
            assert any(k.price_per_hour <= c.price_per_hour
                       and k.aggregate_bytes_per_s >= c.aggregate_bytes_per_s for k in kept)


@pytest.mark.parametrize("model", ["default", "paper"])
def test_with_ps_equals_the_problem_built_with_that_spec(model):
    p = problem_of(model=model)
    for choice in ps_hosts.ps_choices(p)[:4]:
        got = ps_hosts.with_ps(p, choice)
        direct = problem_of({"hosts": "none", "num_shards": choice.num_shards,
                             "shard_gbps": choice.shard_bytes_per_s * 8 / 1e9}, model=model)
        assert got.ps.num_shards == direct.ps.num_shards == choice.num_shards
        assert got.ps.shard_bytes_per_s == pytest.approx(direct.ps.shard_bytes_per_s, rel=1e-15)
        np.testing.assert_allclose(got.odt_s, direct.odt_s, rtol=1e-12, atol=0)
        assert np.array_equal(np.isnan(got.odt_s), np.isnan(direct.odt_s))
        assert got.ps.price_per_hour == choice.price_per_hour and direct.ps.price_per_hour == 0
        assert ps_traffic.max_throughput(got) == pytest.approx(ps_traffic.max_throughput(direct))
    # and back: the starting choice again gives the starting problem
    again = ps_hosts.with_ps(ps_hosts.with_ps(p, ps_hosts.ps_choices(p)[-1]),
                             ps_hosts.ps_choices(p)[0])
    np.testing.assert_allclose(again.odt_s, p.odt_s, rtol=1e-12)


def test_a_table_never_counts_against_a_stage_memory():
    """Tables live on the PS: a table 1,000x larger changes what the PS must hold, not which
    (layer, type) entries can run nor any unit's state (only rows in flight count there)."""
    small, huge = problem_of(rows=20_000), problem_of(rows=20_000_000)
    assert huge.ps.table_bytes == 1000 * small.ps.table_bytes
    t4 = huge.type_index("t4")
    assert huge.ps.table_bytes > 2 * huge.unit_costs.memory_bytes[t4]  # 41 GB vs the T4's 16
    assert np.array_equal(small.runnable, huge.runnable)
    assert np.array_equal(small.unit_costs.state_bytes, huge.unit_costs.state_bytes)
    assert np.array_equal(small.unit_costs.activation_bytes, huge.unit_costs.activation_bytes)
    emb = [i for i, n in enumerate(huge.layer_names) if n.startswith("emb")]
    assert emb and huge.runnable[emb, huge.type_index("t4")].all()


def one_stage_plan(p, resource, units):
    return Plan(stages=(Stage(layers=p.layer_names, resource=resource, num_replicas=units),))


def test_the_ps_price_is_in_every_plan_cost_at_the_billed_hours():
    p = problem_of()
    free = ps_hosts.replace_ps(p, p.ps.model_copy(update={"price_per_hour": 0.0,
                                                          "host_type": ""}))
    plan = one_stage_plan(p, "t4", 6)
    priced, unpriced = evaluate_plan(p, plan), evaluate_plan(free, plan)
    assert priced.feasible and priced.throughput == unpriced.throughput
    billed = job_cost(p, 1.0, priced.throughput, plan_startup_s(p, plan_stages(p, plan))) - \
        job_cost(free, 1.0, priced.throughput, plan_startup_s(p, plan_stages(p, plan)))
    assert billed == pytest.approx(p.ps.price_per_hour * job_cost(free, 1.0, priced.throughput,
                                   plan_startup_s(p, plan_stages(p, plan))))
    assert priced.cost_usd - unpriced.cost_usd == pytest.approx(billed)
    assert priced.cost_per_hour == unpriced.cost_per_hour  # the stages' units
    assert priced.extra["ps_hosts"] == {"resource": p.ps.host_type, "num_shards": p.ps.num_shards,
                                  "price_per_hour": p.ps.price_per_hour}
    assert "ps_hosts" not in unpriced.extra


def test_simulated_and_analytic_cost_agree_with_a_priced_ps():
    """The simulator reads the same spec (shards, bandwidth) from the problem: with its effects
    off it runs a priced-PS plan at the analytic throughput (one unit: no all-reduce, which
    only the `allreduce` effect adds), and the job it bills (the cost model's startup and
    billing, the PS hosts included) is the analytic cost."""
    from heterps_sim.des import DesOptions, simulate
    p = problem_of(limit=20_000)
    choice = ps_hosts.ps_choices(p)[1]  # not the starting one: with_ps must reach the simulator
    q = ps_hosts.with_ps(p, choice)
    plan = one_stage_plan(q, "t4", 1)
    analytic = evaluate_plan(q, plan)
    assert analytic.feasible and ps_traffic.problem_ps(q).num_shards == choice.num_shards
    run = simulate(q, plan, options=DesOptions(num_steps=6, schedule="async"), record_spans=False)
    des = run.result
    assert des.throughput == pytest.approx(analytic.throughput, rel=1e-6)
    assert des.extra["ps_hosts"] == analytic.extra["ps_hosts"]
    billed = job_cost(q, des.cost_per_hour, des.throughput, plan_startup_s(q, plan_stages(q, plan)))
    assert billed == pytest.approx(analytic.cost_usd, rel=1e-6)
    hours = q.num_samples / des.throughput / 3600
    assert des.cost_usd == pytest.approx(hours * (des.cost_per_hour + choice.price_per_hour))


def test_plan_json_round_trip_with_the_ps_entry_and_old_files_still_load():
    plan = Plan(stages=(Stage(layers=("a", "b"), resource="t4", num_replicas=2),),
                ps=PsHosts(resource="r7i-8xlarge", num_shards=3))
    data = plan.to_json_dict()
    assert data["ps"] == {"resource": "r7i-8xlarge", "num_shards": 3}
    assert data["format_version"] == 2
    assert plan_from_dict(data) == plan
    assert plan.with_replicas([4]).ps == plan.ps
    old = {"format_version": 1, "num_microbatches": 1, "schedule": "gpipe",
           "stages": [{"layers": ["a", "b"], "resource": "t4", "num_replicas": 2}]}
    loaded = plan_from_dict(old)
    assert loaded.ps is None and "ps" not in loaded.to_json_dict()
    assert plan.problems(("a", "b"), ("t4",)) == ["ps.resource: unknown resource type "
                                                   "'r7i-8xlarge'"]


@pytest.mark.parametrize("ps, message", [
    ({"hosts": ["r7i-9xlarge"]}, "ps.hosts.0: unknown resource type 'r7i-9xlarge'"),
    ({"hosts": ["r7i-8xlarge", "r7i-48xlarge"]},
     "ps.hosts.1: 'r7i-48xlarge' is not among the scenario's types"),
    ({"hosts": ["r7i-8xlarge"], "shard_gbps": 10}, "ps.shard_gbps: a priced PS's shard"),
])
def test_bad_hosts_name_the_field(ps, message):
    with pytest.raises(ScenarioError, match="^<scenario>: " + message.replace("(", r"\(")):
        problem_of(ps)


def test_an_unknown_host_type_is_one_line_and_exit_2(tmp_path, capsys):
    import yaml

    from heterps_sim.cli import main
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({
        "name": "bad", "model": {"name": "tiny-ctr"}, "cluster": {"types": ["r7i-8xlarge", "t4"]},
        "workload": {"batch_size": 64, "throughput_limit": 100, "num_samples": 1e6},
        "ps": {"hosts": ["r7i-8xlarge", "r9z-huge"]}}))
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0]
    assert "ps.hosts.1: unknown resource type 'r9z-huge'" in err[0]


def test_choices_are_few_and_cheap_on_the_shipped_dlrm_scenario():
    from heterps_sim.inputs.load import load_input
    p = load_input("scenarios/dlrm-criteo1tb-aws.yaml").problem
    choices = ps_hosts.ps_choices(p)
    assert 3 <= len(choices) <= (ps_hosts.FINE_STEPS + 5) * len(p.ps.hosts)
    assert math.isclose(p.ps.table_bytes, 187_767_399 * 128 * 4, rel_tol=1e-12)
