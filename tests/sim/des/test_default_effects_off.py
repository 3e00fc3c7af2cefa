"""With every effect off the simulator runs the default model's stage work: ET_g(k) without its
all-reduce (the `allreduce` effect adds the ring) and without the PS cap (the `ps` effect
queues at the shards instead), so its throughput is min_g B / (ET_g(k_g) - AR_g(k_g)) exactly
where the measured window spans whole routing periods. Before, the per-unit fixed costs F of
the default model were left out of the simulated work (+12% to +55% on the 64-type optima)."""

import math
from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from heterps_sim.core.plan import Plan, plan_from_assignment
from heterps_sim.cost import dominant
from heterps_sim.cost.reference import plan_stages
from heterps_sim.des.invariants import Case, exact_window, throughput
from heterps_sim.testing import random_default_problem


def default_case(seed: int) -> Case:
    rng = np.random.default_rng(seed)
    problem = random_default_problem(rng, int(rng.integers(1, 5)), int(rng.integers(1, 4)))
    assignment = [int(rng.choice(np.flatnonzero(problem.runnable[i])))
                  for i in range(problem.num_layers)]
    plan = plan_from_assignment(problem.layer_names, problem.type_names, assignment)
    stages = tuple(replace(s, num_replicas=int(rng.integers(1, 5))) for s in plan.stages)
    schedule = str(rng.choice(["gpipe", "1f1b", "async"]))
    m = int(rng.integers(1, 9))
    return Case(problem, Plan(stages=stages, num_microbatches=m, schedule=schedule), schedule,
                m, int(rng.integers(0, 1000)))


def runs(case: Case) -> bool:
    """Every stage's units fit its memory and minimum batch (else nothing is simulated)."""
    return all(t.k_lo <= s.num_replicas <= t.k_hi
               for t, s in zip(plan_stages(case.problem, case.plan), case.plan.stages))


def stage_work_throughput(case: Case) -> float:
    """min_g B / (ET_g - AR_g): the default model's stage times without the ring."""
    p = case.problem
    worst = 0.0
    for t, s in zip(plan_stages(p, case.plan), case.plan.stages):
        k = s.num_replicas
        worst = max(worst, t.exec_time(k) - dominant.allreduce_time(t.bw_s, t.lat_s, k))
    return p.batch_size / worst


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_effects_off_run_the_default_stage_work(seed):
    case = default_case(seed)
    assume(runs(case))
    got = throughput(case, frozenset())
    want = stage_work_throughput(case)
    assert math.isclose(got, want, rel_tol=1e-9 if exact_window(case) else 2e-3), (case, got, want)


def test_fixed_costs_are_simulated():
    """One stage of one unit, F = 1 ms + 0.2 ms per layer: the step takes ET(1) = P + F."""
    case = next(c for c in map(default_case, range(100)) if runs(c))
    p = case.problem
    costs = replace(p.unit_costs, step_overhead_s=np.full(p.num_types, 0.5),
                    layer_overhead_s=np.zeros(p.num_types))
    slow = replace(case, problem=replace(p, costs=costs))
    assert throughput(slow, frozenset()) < throughput(case, frozenset())
    assert math.isclose(throughput(slow, frozenset()), stage_work_throughput(slow),
                        rel_tol=1e-9 if exact_window(slow) else 2e-3)


def test_ps_effect_charges_the_service_the_paper_odt_leaves_out():
    """Paper model: odt has no PS side, so with `ps` on a forward waits until its pull is
    served (one unit, one stage, no prefetch: the pull queues behind the last push, then is
    served; before, only the queueing was charged and the service nowhere); default model with
    a ps: the work holds the unloaded PS time already, so one replica alone (its pulls
    prefetched) sees no change."""
    from heterps_sim.core.ps_spec import DEFAULT_PS
    from heterps_sim.des import DesOptions, simulate
    from heterps_sim.des.options import PsOptions
    from heterps_sim.inputs.ps_section import with_ps
    from heterps_sim.testing import chain_plan, chain_problem

    base = chain_problem([1e-2], batch_size=64, sparse_bytes=[1e6])
    plan = chain_plan(base, [1])
    pull_s = 64 * 1e6 / DEFAULT_PS.num_shards * DEFAULT_PS.seconds_per_byte  # ~1.9 ms
    no_prefetch = PsOptions(**DEFAULT_PS.model_dump(), prefetch=False)

    def thr(problem, effects, ps=no_prefetch):
        opts = DesOptions(effects=effects, num_microbatches=1, schedule="gpipe", ps=ps)
        return simulate(problem, plan, options=opts, record_spans=False).result.throughput

    paper = with_ps(base, DEFAULT_PS)
    assert paper.cost_model == "paper" and np.array_equal(paper.odt_s, base.odt_s)
    slower = paper.batch_size / thr(paper, frozenset({"ps"}))
    # the pull queues behind the previous push, then is served: two services per step
    assert slower >= paper.batch_size / thr(paper, frozenset()) + 1.9 * pull_s
    default = with_ps(replace(base, cost_model="default"), DEFAULT_PS)
    assert math.isclose(thr(default, frozenset({"ps"}), None), thr(default, frozenset(), None),
                        rel_tol=1e-9)  # (prefetched: the pull does not queue behind the push)
