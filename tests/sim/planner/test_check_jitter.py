"""The check says what the simulator's default jitter asks of the plan it runs: the headroom
des/margin.jitter_margin gives, the headroom the deterministic check found, and the verdict;
a plan with less headroom than the margin misses the limit at the median seed with jitter on
(the simulator itself, several seeds), one with more meets it."""

import statistics

import pytest

from heterps_sim.cost import evaluate_plan
from heterps_sim.des import DesOptions, simulate
from heterps_sim.des.margin import jitter_margin
from heterps_sim.planner.check import VerifySettings, check_lines, verify_plan
from heterps_sim.testing import chain_plan, chain_problem


def checked(limit):
    p = chain_problem([0.02, 0.05], alpha=0.95, batch_size=64, limit=limit)
    plan = chain_plan(p, [1, 2], microbatches=4)
    analytic = evaluate_plan(p, plan, "least")
    c = verify_plan(p, plan, analytic, lambda q: evaluate_plan(p, q, "least"), VerifySettings())
    return p, plan, c


def median_jittered(p, plan, seeds=9):
    opts = DesOptions.with_effects("bubbles,allreduce,transfers,contention,ps,jitter",
                                   num_steps=8)
    return statistics.median(simulate(p, plan, seed=s, options=opts, record_spans=False)
                             .result.throughput for s in range(seeds))


@pytest.mark.parametrize("share", [0.99, 0.6])
def test_the_verdict_under_jitter_is_the_simulators(share):
    p0, plan, c0 = checked(1.0)
    deterministic = c0.simulated.throughput
    p, plan, c = checked(deterministic * share)  # the same plan, a limit below its throughput
    assert c.meets_limit
    need = jitter_margin(p, c.final_plan, options=c.settings.options())
    assert c.extra["jitter_margin"] == pytest.approx(need)
    assert c.extra["headroom"] == pytest.approx(deterministic / p.throughput_limit - 1)
    meets = c.extra["meets_with_jitter"]
    assert meets == (c.extra["headroom"] >= need)
    assert meets == (median_jittered(p, c.final_plan) >= p.throughput_limit)
    text = "\n".join(check_lines(c))
    assert "default jitter" in text and ("still meets it" in text) == meets
    assert c.to_json_dict()["jitter"]["meets_with_jitter"] == meets
