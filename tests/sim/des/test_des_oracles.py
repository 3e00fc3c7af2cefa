"""The simulator against exact oracles: timelines, the uniform-pipeline closed form, the
analytic model with every effect off, and jitter against expectations and a Monte Carlo."""

import math
from pathlib import Path

import numpy as np
import pytest

from heterps_sim.core.plan import plan_from_assignment
from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.des import DesOptions, simulate
from heterps_sim.inputs.load import load_input
from heterps_sim.schedulers.base import run_scheduler
from heterps_sim.schedulers.registry import make_scheduler
from heterps_sim.testing import chain_plan, chain_problem, random_problem

SCENARIOS = sorted(Path(__file__).resolve().parents[3].glob("scenarios/*.yaml"))


def timeline(run):
    return sorted((s.start_s, s.track.split(" (")[0], s.name, s.end_s) for s in run.spans)


# Two stages: stage 0 takes 3 s per batch (F 0.5 + B 1.0 per microbatch of m = 2), stage 1 6 s.
GPIPE = [
    (0.0, "stage 0 / replica 0", "F0", 0.5), (0.5, "stage 0 / replica 0", "F1", 1.0),
    (0.5, "stage 1 / replica 0", "F0", 1.5), (1.5, "stage 1 / replica 0", "F1", 2.5),
    (2.5, "stage 1 / replica 0", "B0", 4.5), (4.5, "stage 0 / replica 0", "B0", 5.5),
    (4.5, "stage 1 / replica 0", "B1", 6.5), (6.5, "stage 0 / replica 0", "B1", 7.5)]
ONE_F_ONE_B = [
    (0.0, "stage 0 / replica 0", "F0", 0.5), (0.5, "stage 0 / replica 0", "F1", 1.0),
    (0.5, "stage 1 / replica 0", "F0", 1.5), (1.5, "stage 1 / replica 0", "B0", 3.5),
    (3.5, "stage 0 / replica 0", "B0", 4.5), (3.5, "stage 1 / replica 0", "F1", 4.5),
    (4.5, "stage 1 / replica 0", "B1", 6.5), (6.5, "stage 0 / replica 0", "B1", 7.5)]


@pytest.mark.parametrize("schedule, expected", [("gpipe", GPIPE), ("1f1b", ONE_F_ONE_B)])
@pytest.mark.parametrize("batch", [True, False])
def test_exact_timeline_of_two_stages(schedule, expected, batch):
    p = chain_problem([3.0, 6.0])
    opts = DesOptions(schedule=schedule, effects="bubbles", num_microbatches=2, num_steps=2,
                      warmup_steps=0, batch=batch)
    run = simulate(p, chain_plan(p, [1, 1]), options=opts)
    second = [(a + 7.5, t, n[0] + str(int(n[1:]) + 2), b + 7.5) for a, t, n, b in expected]
    assert timeline(run) == sorted(expected + second)  # the flush: step 2 repeats step 1
    assert run.result.step_time_s == 7.5


def test_continuous_timeline_overlaps_steps():
    p = chain_problem([3.0, 6.0])
    opts = DesOptions(schedule="async", num_microbatches=2, num_steps=2, warmup_steps=0)
    spans = timeline(simulate(p, chain_plan(p, [1, 1]), options=opts))
    stage0 = [n for _, t, n, _ in spans if t.startswith("stage 0")]
    assert stage0[:5] == ["F0", "F1", "B0", "F2", "B1"]  # step 1's F2 before step 0's B1
    f2 = next(s for s in spans if s[1].startswith("stage 0") and s[2] == "F2")
    assert f2[0] == 4.5 < 7.5


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("num_stages, m", [(1, 1), (2, 1), (2, 3), (3, 4), (4, 2), (5, 8), (6, 16)])
def test_uniform_pipeline_step_is_m_plus_s_minus_1_times_t(schedule, num_stages, m):
    per_batch = 0.8
    p = chain_problem([per_batch] * num_stages)
    opts = DesOptions(schedule=schedule, effects="bubbles", num_microbatches=m, num_steps=3,
                      warmup_steps=1)
    r = simulate(p, chain_plan(p, [1] * num_stages), options=opts).result
    t = per_batch / m  # forward + backward of one microbatch on one stage
    assert r.step_time_s == pytest.approx((m + num_stages - 1) * t, rel=1e-12, abs=0)
    assert r.extra["bubble_fraction"] == pytest.approx((num_stages - 1) / (m + num_stages - 1),
                                                       abs=1e-12)


def _exact_plan(path):
    # The simulator with every effect off is the paper's model (the default model counts
    # what the effects add: docs/concepts/simulator.md).
    problem = load_input(path).problem.with_model("paper")
    outcome = run_scheduler(make_scheduler("exact"), problem)
    return problem, outcome.plan


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_effects_off_matches_analytic_on_every_scenario(path):
    problem, plan = _exact_plan(path)
    if plan is None:
        pytest.skip("no feasible plan (the scenario is infeasible on purpose)")
    analytic = evaluate_plan(problem, plan, "least")
    des = simulate(problem, plan, options=DesOptions(schedule="async"), record_spans=False).result
    assert des.source == "des" and des.feasible == analytic.feasible
    assert des.throughput == pytest.approx(analytic.throughput, rel=0.01)
    assert des.cost_usd == pytest.approx(analytic.cost_usd, rel=0.01)
    assert [s.num_replicas for s in des.stages] == [s.num_replicas for s in analytic.stages]


def test_effects_off_matches_analytic_on_random_plans():
    checked = 0
    for seed in range(80):
        rng = np.random.default_rng(seed)
        problem = random_problem(rng, int(rng.integers(2, 9)), int(rng.integers(1, 5)),
                                 unrunnable=0.0)
        assignment = rng.integers(0, problem.num_types, problem.num_layers)
        plan = plan_from_assignment(problem.layer_names, problem.type_names, assignment)
        if seed % 3 == 0:  # some plans with fixed replica counts, the rest provisioned
            plan = plan.with_replicas([int(rng.integers(1, 9)) for _ in plan.stages])
        analytic = evaluate_plan(problem, plan, "least")
        if analytic.throughput == 0:
            continue
        des = simulate(problem, plan, options=DesOptions(), record_spans=False).result
        assert des.throughput == pytest.approx(analytic.throughput, rel=0.01), seed
        checked += 1
    assert checked >= 30


def test_jitter_adds_its_mean_delay_to_a_single_stage():
    """One stage, one replica: steps are sums of independent factors with mean 1 + cv."""
    cv, m, steps = 0.5, 4, 400
    p = chain_problem([0.6], alpha=0.9)
    opts = DesOptions(effects="jitter", jitter_cv=cv, num_microbatches=m, num_steps=steps,
                      warmup_steps=0)
    r = simulate(p, chain_plan(p, [1]), seed=7, options=opts, record_spans=False).result
    w, u = 0.9 * 0.6 / m, 0.1 * 0.6
    parts = [w / 3] * m + [2 * w / 3 + u / m] * m  # forwards, backwards (+ spread step work)
    se = cv * math.sqrt(sum(d * d for d in parts)) / math.sqrt(steps)
    assert abs(r.step_time_s - 0.6 * (1 + cv)) < 4 * se


def _tandem_monte_carlo(stage_s, alpha, m, cv, chains=4000, steps=12, seed=0):
    """Mean step time of 2 stages under flushed gpipe, by the max-plus recursion."""
    rng = np.random.default_rng(seed)

    def draw(base, n):
        return base * (1 + cv * rng.exponential(1.0, (chains, n)))

    (p0, p1) = stage_s
    t0, t1 = np.zeros(chains), np.zeros(chains)
    ends = []
    for _ in range(steps):
        f0, b0 = draw(alpha * p0 / m / 3, m), draw(2 * alpha * p0 / m / 3, m)
        f1, b1 = draw(alpha * p1 / m / 3, m), draw(2 * alpha * p1 / m / 3, m)
        u0, u1 = draw((1 - alpha) * p0, 1)[:, 0], draw((1 - alpha) * p1, 1)[:, 0]
        fwd0 = []
        for i in range(m):
            t0 = t0 + f0[:, i]
            fwd0.append(t0)
        for i in range(m):
            t1 = np.maximum(t1, fwd0[i]) + f1[:, i]
        bwd1 = []
        for i in range(m):
            t1 = t1 + b1[:, i]
            bwd1.append(t1)
        t1 = t1 + u1
        for i in range(m):
            t0 = np.maximum(t0, bwd1[i]) + b0[:, i]
        t0 = t0 + u0
        ends.append(np.maximum(t0, t1))
    increments = np.diff(np.array(ends), axis=0)[3:]  # steady steps
    return increments.mean(), increments.std()


def test_jitter_on_a_tandem_matches_monte_carlo():
    stage_s, alpha, m, cv, steps = (0.5, 0.7), 0.8, 3, 0.4, 2000
    mc_mean, mc_sd = _tandem_monte_carlo(stage_s, alpha, m, cv)
    p = chain_problem(list(stage_s), alpha=alpha)
    opts = DesOptions(schedule="gpipe", effects="bubbles,jitter", jitter_cv=cv,
                      num_microbatches=m, num_steps=steps, warmup_steps=2)
    r = simulate(p, chain_plan(p, [1, 1]), seed=11, options=opts, record_spans=False).result
    deterministic = simulate(p, chain_plan(p, [1, 1]), options=opts.with_effects("bubbles"),
                             record_spans=False).result
    se = mc_sd / math.sqrt(steps - 2)
    assert abs(r.step_time_s - mc_mean) < 4 * se
    assert mc_mean - deterministic.step_time_s > 6 * se  # the oracle tells jitter from none
