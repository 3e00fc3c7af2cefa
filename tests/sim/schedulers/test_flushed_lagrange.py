"""The Lagrangian bound (schedulers/exact/flushed_lagrange.py) never exceeds the brute-force
optimum at its m (flushed_oracle: every plan of a tiny problem), under gpipe and 1F1B, with
and without caps, heavy embedding bytes and priced PS hosts; it is deterministic, and it
reaches the optimum's neighbourhood on problems where the relaxation is tight enough."""

import math
from dataclasses import replace

import numpy as np
import pytest

from heterps_sim.core.ps_spec import PsSpec
from heterps_sim.schedulers.exact.flushed_compiled import CompiledSearch
from heterps_sim.schedulers.exact.flushed_lagrange import LagrangeBound
from heterps_sim.testing import random_default_problem
from tests.sim.schedulers.flushed_oracle import brute_force


def _problem(rng, layers, types):
    p = random_default_problem(rng, layers, types, caps=bool(rng.random() < 0.4))
    p = replace(p, costs=replace(p.unit_costs, num_microbatches=1))
    if rng.random() < 0.5 and p.sparse_bytes is not None:
        p = replace(p, sparse_bytes=np.asarray(p.sparse_bytes) * float(rng.choice([30.0, 1e3])),
                    ps=PsSpec())
    if rng.random() < 0.3:
        p = replace(p, ps=PsSpec(host_type="ps-host", price_per_hour=float(rng.uniform(1, 9))))
    return p


@pytest.mark.parametrize("seed", [0, *(pytest.param(s, marks=pytest.mark.slow) for s in (1, 2))])
def test_the_bound_is_at_most_the_brute_force_optimum(seed):
    rng = np.random.default_rng(8600 + seed)
    tight = 0
    for layers, types in [(2, 3), (3, 2), (3, 3), (4, 2)]:
        p = _problem(rng, layers, types)
        schedule = str(rng.choice(["gpipe", "1f1b"]))
        bound = LagrangeBound(CompiledSearch(p, schedule=schedule))
        for m in (2, 3, 5):
            want = brute_force(p, m, schedule=schedule)[0]
            # target: prove as much as it can (inf: split the boxes until the budget ends)
            got, work, _ = bound.bound(m, math.inf, 300_000)
            assert got <= want * (1 + 1e-9), (m, got, want)
            assert bound.bound(m, math.inf, 300_000)[:2] == (got, work)  # deterministic
            if math.isfinite(want) and got >= 0.9 * want:
                tight += 1
            if math.isfinite(want):  # proving a cost just above the optimum never succeeds
                above = bound.bound(m, want * 1.001, 300_000)[0]
                assert above <= want * (1 + 1e-9)
    assert tight >= 1


@pytest.mark.parametrize("seed", range(2))
def test_a_bound_over_a_range_of_m_holds_at_each_m_and_its_plans_are_real(seed):
    """bounds() over several m's at once (boxes over ranges of m, split in m first): each
    m's bound is at most the brute-force optimum at that m, already after the first sweep
    (a box over every m) and after splitting; a plan its shortest paths give costs what the
    closed form and the bill say, at its m."""
    from tests.sim.schedulers.test_certified_flushed import _recost

    rng = np.random.default_rng(8700 + seed)
    for layers, types in [(2, 3), (3, 2), (3, 3), (4, 2)]:
        p = _problem(rng, layers, types)
        schedule = str(rng.choice(["gpipe", "1f1b"]))
        bound = LagrangeBound(CompiledSearch(p, schedule=schedule))
        ms = (2, 3, 4, 6, 9)
        want = {m: brute_force(p, m, schedule=schedule)[0] for m in ms}
        for work in (20_000, 300_000):
            got = bound.bounds(ms, math.inf, work)
            assert set(got.per_m) == set(ms)
            for m in ms:
                assert got.per_m[m] <= want[m] * (1 + 1e-9), (work, m, got.per_m[m], want[m])
            again = bound.bounds(ms, math.inf, work)
            assert again.per_m == got.per_m and again.work == got.work  # deterministic
        best = min(want.values())
        if math.isfinite(best):
            got = bound.bounds(ms, best * 1.5, 300_000)
            assert min(got.per_m.values()) <= best * (1 + 1e-9)
            if got.best is not None:
                assert got.best.cost_usd < best * 1.5
                assert got.best.cost_usd >= best * (1 - 1e-9)
                assert _recost(p, got.best.plan) == pytest.approx(got.best.cost_usd, rel=1e-9)
