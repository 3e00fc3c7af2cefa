"""A plan whose every stage fixes its units is simulated even when the parameter server's cap
lies below the throughput limit (the analytic provisioning stops at that cap before it reads
the units; such a plan used to come back not simulated, with no units), as a fixed plan short
of the limit by its stage times always was."""

from dataclasses import replace

import numpy as np

from heterps_sim.core import ps_odt
from heterps_sim.core.ps_spec import PsSpec
from heterps_sim.cost.reference import evaluate_plan, ps_cap
from heterps_sim.des import DesOptions, simulate
from heterps_sim.testing import chain_plan, chain_problem


def slow_ps_problem(limit: float):
    p = chain_problem([0.01, 0.02], alpha=0.9, batch_size=64, limit=limit)
    ps = PsSpec(num_shards=1, shard_bytes_per_s=1e6)
    sparse = np.array([1000.0, 0.0])
    p = replace(p, cost_model="default", ps=ps, sparse_bytes=sparse,
                odt_s=ps_odt.with_ps_side(p.odt_s, ps_odt.ps_side_s(sparse, 64, ps, 0.0)))
    return p


def test_fixed_plan_past_the_ps_cap_is_simulated():
    p = slow_ps_problem(limit=1.0)
    cap = ps_cap(p)
    p = p.with_limit(2.0 * cap)
    plan = chain_plan(p, [2, 1], microbatches=4)
    assert "parameter server" in evaluate_plan(p, plan).reason  # the analytic verdict
    run = simulate(p, plan, options=DesOptions.with_effects("bubbles,ps", num_steps=4),
                   record_spans=False)
    r = run.result
    assert r.extra.get("simulated", True) and run.events > 0
    assert [s.num_replicas for s in r.stages] == [2, 1]
    assert 0 < r.throughput <= cap * (1 + 1e-9) and not r.feasible
    assert "below the limit" in r.reason


def test_same_plan_under_a_limit_the_cap_allows_is_unchanged():
    """The limit only changes the verdict, not the simulation."""
    p = slow_ps_problem(limit=1.0)
    plan = chain_plan(p, [2, 1], microbatches=4)
    opts = DesOptions.with_effects("bubbles,ps", num_steps=4)
    low = simulate(p, plan, options=opts, record_spans=False).result
    high = simulate(p.with_limit(2.0 * ps_cap(p)), plan, options=opts, record_spans=False).result
    assert high.throughput == low.throughput and low.feasible and not high.feasible
