"""The simulator's physics as properties over random problems, plans, schedules, microbatch
counts and seeds (hypothesis, a fixed example budget, derandomized: the same examples every run).

    effects off == the analytic model (exact where the measured window spans whole routing
                   periods, des/window.py; within 0.2% where it cannot)
    switching an effect on (alone, or added to any set of others) never raises throughput
    more work, more latency, less bandwidth, a slower unit never raise throughput
    (at the same seed; where the base has noise, jitter or preemption, and what changes is not
    the noise itself, only the long-run rate is claimed: checked on the mean over paired seeds)

benchmarks/bench_invariants.py runs the same checks on many more cases.
"""

import math
from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from heterps_sim.core.plan import Plan, Stage
from heterps_sim.core.problem import Problem
from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.des import EFFECTS
from heterps_sim.des.effects import NOISE
from heterps_sim.des.invariants import (
    RANDOM_EFFECTS,
    exact_window,
    random_case,
    throughput,
)

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
TOL = 1e-9
cases = st.builds(random_case, st.integers(0, 2**32 - 1))
SEEDS = 8
Z = 4.0


def never_raises(case, worse, worse_effects, effects) -> tuple[bool, str]:
    """At the same seed when nothing noisy is on in the base or the change is the noise itself
    (exact); else the mean of worse / base - 1 over SEEDS paired seeds must not rise by more
    than Z standard errors (docs/concepts/simulator.md: only the long-run rate is monotone)."""
    switched = worse_effects - effects
    if (switched and switched <= NOISE) or not effects & NOISE:
        a, b = throughput(worse, worse_effects), throughput(case, effects)
        return a <= b * (1 + TOL), f"{b} -> {a}"
    d = np.array([throughput(replace(worse, seed=case.seed + 1000 * i), worse_effects) /
                  throughput(replace(case, seed=case.seed + 1000 * i), effects) - 1.0
                  for i in range(SEEDS)])
    mean, se = d.mean(), d.std(ddof=1) / math.sqrt(SEEDS)
    return not (mean > TOL and mean > Z * se), f"mean {mean:+.3g}, standard error {se:.2g}"


@SETTINGS
@given(cases)
def test_effects_off_equal_the_analytic_model(case):
    analytic = evaluate_plan(case.problem, case.plan).throughput
    got = throughput(case, frozenset())
    exact = exact_window(case)
    assert math.isclose(got, analytic, rel_tol=TOL if exact else 2e-3), (case, got, analytic)


@SETTINGS
@given(cases, st.sampled_from(EFFECTS), st.sets(st.sampled_from(EFFECTS), max_size=3))
def test_an_effect_never_raises_throughput(case, effect, others):
    base = frozenset(others) - {effect}
    ok, what = never_raises(case, case, base | {effect}, base)
    assert ok, (case, effect, sorted(base), what)


def _scaled(problem: Problem, **changes) -> Problem:
    return replace(problem, **changes)


@SETTINGS
@given(cases, st.sets(st.sampled_from(EFFECTS), max_size=3),
       st.sampled_from(["oct", "latency", "bandwidth", "boundary"]),
       st.floats(1.01, 4.0))
def test_more_work_or_slower_links_never_raise_throughput(case, effects, knob, factor):
    p = case.problem
    worse = {"oct": lambda: _scaled(p, oct_s=p.oct_s * factor),
             "latency": lambda: _scaled(p, latency_s=p.latency_s * factor + 1e-4),
             "bandwidth": lambda: _scaled(p, network_bytes_per_s=p.network_bytes_per_s / factor),
             "boundary": lambda: _scaled(p, boundary_bytes=p.boundary_bytes * factor)}[knob]()
    effects = frozenset(effects)
    ok, what = never_raises(case, replace(case, problem=worse), effects, effects)
    assert ok, (case, knob, factor, sorted(effects), what)


@SETTINGS
@given(cases, st.sets(st.sampled_from(EFFECTS), max_size=3), st.floats(1.01, 4.0),
       st.integers(0, 100))
def test_a_slower_unit_never_raises_throughput(case, effects, factor, pick):
    ks = [s.num_replicas for s in case.plan.stages]
    g = pick % len(ks)
    slow = replace(case, slow=((g, pick % ks[g], factor),))
    effects = frozenset(effects)
    ok, what = never_raises(case, slow, effects, effects)
    assert ok, (case, g, factor, sorted(effects), what)


def test_the_random_effects_are_the_seeded_ones():
    assert RANDOM_EFFECTS <= set(EFFECTS)
    case = random_case(7)
    assert isinstance(case.plan, Plan) and all(isinstance(s, Stage) for s in case.plan.stages)
    assert np.isfinite(throughput(case, frozenset(EFFECTS)))
