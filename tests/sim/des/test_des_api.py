"""The simulator's surface: options, provisioning, the RunResult it writes, lanes, traces."""

import math
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from heterps_sim.core.lanes import STEP, B, F, default_microbatches, replica_actions, stage_orders
from heterps_sim.core.pipeline import stage_actions
from heterps_sim.core.plan import Plan, Stage
from heterps_sim.core.trace import chrome_trace
from heterps_sim.cost.reference import PlanError, evaluate_plan
from heterps_sim.des import EFFECTS, DesOptions, DesRun, parse_effects, simulate
from heterps_sim.testing import chain_plan, chain_problem

ROOT = Path(__file__).resolve().parents[3]


def test_effect_names_parse():
    assert parse_effects("none") == parse_effects(None) == frozenset()
    assert parse_effects("all") == frozenset(EFFECTS)
    assert parse_effects(" jitter, ps ") == {"jitter", "ps"}
    with pytest.raises(ValueError, match="gremlins"):
        parse_effects("jitter,gremlins")
    assert DesOptions.with_effects("all", num_steps=3).effects == frozenset(EFFECTS)
    assert DesOptions(num_steps=3).with_effects("ps").num_steps == 3
    assert DesOptions(effects="contention").on("transfers")  # contention implies transfers


@pytest.mark.parametrize("fields, where", [
    ({"num_steps": 0}, "num_steps"), ({"jitter_cv": -0.1}, "jitter_cv"),
    ({"backward_fraction": 1.0}, "backward_fraction"), ({"straggler_fraction": 1.5}, "straggler"),
    ({"straggler_slowdown": 0.5}, "straggler_slowdown"), ({"restart_delay_s": -1}, "restart"),
    ({"preemption_rate_per_hour": -1}, "preemption"), ({"num_microbatches": 0}, "num_micro"),
    ({"warmup_steps": 4, "num_steps": 4}, "warmup_steps"), ({"effects": "gremlins"}, "gremlins"),
    ({"ps": {"num_shards": 0}}, "num_shards"), ({"param_bytes": (-1.0,)}, "param_bytes"),
    ({"ps": {"hot": {"hit_rate": 0.5, "bytes_per_s": 1e9, "latency_s": 0}}}, "sum to 1"),
    ({"typo": 1}, "typo")])
def test_bad_options_are_rejected_with_the_field(fields, where):
    with pytest.raises(ValidationError, match=where):
        DesOptions(**fields)


def test_every_option_is_documented():
    from heterps_sim.core.ps_spec import TierSpec
    from heterps_sim.des import PsOptions
    for model in (DesOptions, PsOptions, TierSpec):
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"


def test_fixed_replicas_are_used_and_others_provisioned_least():
    p = chain_problem([0.4, 0.2], alpha=0.9, limit=300.0)
    plan = Plan(stages=(Stage(layers=("l0",), resource="t", num_replicas=5),
                        Stage(layers=("l1",), resource="t")))
    run = simulate(p, plan, options=DesOptions(num_steps=3))
    least = evaluate_plan(p, plan, "least")
    assert isinstance(run, DesRun)
    assert [s.num_replicas for s in run.result.stages] == [5, least.stages[1].num_replicas]
    assert run.result.provisioning == "least"
    assert run.result.units_per_type == {"t": 5 + least.stages[1].num_replicas}


def test_result_costs_hours_at_the_simulated_throughput():
    p = chain_problem([0.4, 0.2], alpha=0.9)
    r = simulate(p, chain_plan(p, [2, 1]), options=DesOptions(effects="bubbles")).result
    assert r.source == "des" and r.feasible and r.reason == ""
    assert r.hours == pytest.approx(p.num_samples / r.throughput / 3600)
    assert r.cost_per_hour == 2.0 * 3 and r.cost_usd == pytest.approx(r.hours * r.cost_per_hour)
    assert r.step_time_s == pytest.approx(p.batch_size / r.throughput)
    for key in ("bubble_fraction", "ps_time_s", "events", "num_microbatches", "schedule",
                "effects", "seed"):
        assert key in r.extra
    assert all(0 <= s.utilisation <= 1 + 1e-9 and 0 <= s.bubble <= 1 for s in r.stages)
    assert max(s.utilisation for s in r.stages) == pytest.approx(1 - r.extra["bubble_fraction"])


def test_a_slow_simulation_is_infeasible_but_costed():
    p = chain_problem([0.4], alpha=0.9, limit=200.0)  # one unit makes 160 samples/s
    plan = chain_plan(p, [1])
    r = simulate(p, plan).result
    assert not r.feasible and "below the limit" in r.reason and math.isfinite(r.cost_usd)


def test_plans_the_analytic_model_cannot_run_are_not_simulated():
    p = chain_problem([0.4, 0.2], alpha=0.9, limit=1e9)  # no number of units reaches it
    run = simulate(p, chain_plan(p, [None, None]))
    assert not run.result.feasible and run.events == 0 and run.spans == ()
    assert "cannot reach" in run.result.reason and run.result.extra["simulated"] is False
    capped = chain_problem([0.4], alpha=0.9)
    capped = type(capped)(**{**{f: getattr(capped, f) for f in capped.__dataclass_fields__},
                             "available": (2,)})
    r = simulate(capped, chain_plan(capped, [3])).result
    assert not r.feasible and "available" in r.reason
    with pytest.raises(PlanError):
        simulate(p, chain_plan(p, [1]))  # covers one layer of two


def test_record_spans_false_gives_the_same_result_without_spans():
    p = chain_problem([0.4, 0.2], alpha=0.9)
    plan = chain_plan(p, [2, 1])
    a = simulate(p, plan, options=DesOptions(effects="all"), record_spans=False)
    b = simulate(p, plan, options=DesOptions(effects="all"))
    assert a.spans == () and b.spans and a.result == b.result and a.events == b.events > 0


def test_trace_has_a_track_per_replica_link_and_ps_shard():
    p = chain_problem([0.4, 0.2], alpha=0.9, boundary_bytes=1e5, latency_s=1e-4,
                      sparse_bytes=[64.0, 0.0])
    run = simulate(p, chain_plan(p, [2, 1]), options=DesOptions(effects="all", num_steps=2))
    doc = chrome_trace(run.spans)
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert {"stage 0 / replica 0 (t)", "stage 0 / replica 1 (t)", "stage 1 / replica 0 (t)"} <= names
    assert any(n.startswith("link 0->1") for n in names) and "ps shard 0" in names
    assert all(e["dur"] >= 0 for e in doc["traceEvents"] if e["ph"] == "X")


@pytest.mark.parametrize("replicas, stages, batch", [([1], 1, 64), ([2, 268], 2, 2048),
                                                     ([4, 6], 3, 4096), ([5, 11, 14, 26], 4, 4096)])
def test_default_microbatches(replicas, stages, batch):
    m = default_microbatches(replicas, stages, batch)
    if math.lcm(*replicas) <= 512:
        assert all(m % k == 0 for k in replicas)
    else:
        assert m % max(replicas) == 0 and m >= 512
    assert m <= max(batch, math.lcm(*replicas))


def test_one_replica_per_stage_follows_stage_actions_exactly():
    for schedule in ("gpipe", "1f1b"):
        for g in range(3):
            base = stage_orders(schedule, True, g, 3, 5, 2, 1)
            got = replica_actions(base, True, 1, 0, 5, 2, 1)
            want = [((F if a == "F" else B), n * 5 + i) for n in range(2)
                    for a, i in stage_actions(schedule, g, 3, 5)]
            assert [x for x in got if x[0] != STEP] == want and got.count((STEP, 0)) == 1


@pytest.mark.parametrize("flush", [True, False])
@pytest.mark.parametrize("k, lanes, m, steps", [(1, 1, 4, 3), (3, 6, 4, 3), (4, 4, 3, 2), (2, 6, 7, 2)])
def test_replicas_run_each_routed_microbatch_once_forward_then_backward(flush, k, lanes, m, steps):
    base = stage_orders("1f1b", flush, 0, 3, m, steps, lanes)
    for r in range(k):
        acts = replica_actions(base, flush, k, r, m, steps, lanes)
        mine = [mu for mu in range(m * steps) if mu % k == r]
        assert sorted(mu for c, mu in acts if c == F) == mine
        assert [mu for c, mu in acts if c == B] == mine  # backwards in microbatch order
        assert [n for c, n in acts if c == STEP] == list(range(steps))
        for n in range(steps):  # a step ends after the replica's backwards of that step
            end = acts.index((STEP, n))
            assert all(acts.index((B, mu)) < end for mu in mine if mu // m == n)


def test_only_the_simulator_imports_simpy():
    offenders = []
    for path in (ROOT / "heterps_sim").rglob("*.py"):
        if "des" in path.relative_to(ROOT / "heterps_sim").parts[:1]:
            continue
        if re.search(r"^\s*(import simpy|from simpy)", path.read_text(), re.M):
            offenders.append(str(path))
    assert offenders == []
