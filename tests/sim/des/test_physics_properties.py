"""The simulator's physics as properties over random problems, plans, schedules, microbatch
counts and seeds (hypothesis, a fixed example budget, derandomized: the same examples every run).

    effects off == the analytic model (exact where the measured window spans whole routing
                   periods, des/window.py; within 0.2% where it cannot)
    switching an effect on (alone, or added to any set of others) never raises throughput
    more work, more latency, less bandwidth, a slower unit never raise throughput

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
TIMED = sorted(set(EFFECTS) - {"preemption", "jitter"})
"""Effects the perturbation properties hold for. Left out: preemption strikes at fixed times,
so a slower unit can dodge a failure by chance; under jitter a finite run is not periodic, and
a slower unit that delays the window's first step more than its last reads as a faster rate
(measured: +0.12% on one case). Switching either on is still checked above."""


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
    assert throughput(case, base | {effect}) <= throughput(case, base) * (1 + TOL), \
        (case, effect, sorted(base))


def _scaled(problem: Problem, **changes) -> Problem:
    return replace(problem, **changes)


@SETTINGS
@given(cases, st.sets(st.sampled_from(TIMED), max_size=3),
       st.sampled_from(["oct", "latency", "bandwidth", "boundary"]),
       st.floats(1.01, 4.0))
def test_more_work_or_slower_links_never_raise_throughput(case, effects, knob, factor):
    p = case.problem
    worse = {"oct": lambda: _scaled(p, oct_s=p.oct_s * factor),
             "latency": lambda: _scaled(p, latency_s=p.latency_s * factor + 1e-4),
             "bandwidth": lambda: _scaled(p, network_bytes_per_s=p.network_bytes_per_s / factor),
             "boundary": lambda: _scaled(p, boundary_bytes=p.boundary_bytes * factor)}[knob]()
    effects = frozenset(effects)
    assert throughput(replace(case, problem=worse), effects) <= \
        throughput(case, effects) * (1 + TOL), (case, knob, factor, sorted(effects))


@SETTINGS
@given(cases, st.sets(st.sampled_from(TIMED), max_size=3), st.floats(1.01, 4.0),
       st.integers(0, 100))
def test_a_slower_unit_never_raises_throughput(case, effects, factor, pick):
    ks = [s.num_replicas for s in case.plan.stages]
    g = pick % len(ks)
    slow = replace(case, slow=((g, pick % ks[g], factor),))
    effects = frozenset(effects)
    assert throughput(slow, effects) <= throughput(case, effects) * (1 + TOL), \
        (case, g, factor, sorted(effects))


def test_the_random_effects_are_the_seeded_ones():
    assert RANDOM_EFFECTS <= set(EFFECTS)
    case = random_case(7)
    assert isinstance(case.plan, Plan) and all(isinstance(s, Stage) for s in case.plan.stages)
    assert np.isfinite(throughput(case, frozenset(EFFECTS)))
