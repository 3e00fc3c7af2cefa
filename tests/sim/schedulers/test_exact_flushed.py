"""The flushed optimum (schedulers/exact/flushed.py) is the brute-force optimum under the
flushed closed form (cost/flush.py): every contiguous partition x type per stage x unit count
of tiny random default-model problems, each plan costed by flushed_throughput and the job's
bill, with and without availability caps."""

import math

import numpy as np
import pytest

from heterps_sim.core.plan import Plan, Stage
from heterps_sim.cost.flush import flushed_throughput
from heterps_sim.cost.reference import job_cost, plan_stages, plan_startup_s
from heterps_sim.schedulers.exact.flushed import EFFECTS, optimum, solve, unit_candidates
from heterps_sim.testing import random_default_problem
from tests.sim.schedulers.flushed_oracle import brute_force, partitions, switches

SHAPES = [(1, 2), (2, 2), (2, 3), (3, 2), (3, 3), (4, 2)]


def test_unit_candidates_keep_the_fewest_units_per_ceil():
    assert unit_candidates(8, 1, 100) == [1, 2, 3, 4, 8]
    assert unit_candidates(8, 3, 100) == [3, 4, 8]
    assert unit_candidates(8, 1, 3) == [1, 2, 3]
    assert unit_candidates(4, 9, 100) == [9]


EFFECT_SETS = [EFFECTS, ("allreduce", "transfers"), ("transfers", "contention"), ()]


@pytest.mark.parametrize("seed", range(6))
def test_flushed_optimum_matches_brute_force(seed):
    rng = np.random.default_rng(4200 + seed)
    feasible = 0
    for n in range(len(SHAPES)):
        layers, types = SHAPES[n]
        p = random_default_problem(rng, layers, types, caps=bool(rng.random() < 0.4))
        m = int(rng.integers(2, 6))
        effects = EFFECT_SETS[(seed + n) % len(EFFECT_SETS)]
        want, _ = brute_force(p, m, effects)
        got = solve(p, m, effects=effects)
        # in rounds from any first ceiling: too low, too high, the stage model's
        rounds = [optimum(p, m, effects=effects, lower_bound=b) for b in (1e-9, None)]
        if want < math.inf:
            rounds.append(optimum(p, m, effects=effects, lower_bound=want * 5))
        if want == math.inf:
            assert got is None and all(r is None for r in rounds)
            continue
        for r in rounds:
            assert r.cost_usd == pytest.approx(want, rel=1e-9)
        feasible += 1
        assert got is not None
        # the plan the solver returns really costs what it says under the closed form
        thr = flushed_throughput(p, got.plan, m, **switches(effects))
        assert thr >= p.throughput_limit * (1 - 1e-12)
        assert thr == pytest.approx(got.throughput, rel=1e-9)
        per_hour = sum(p.price_per_hour[p.type_index(s.resource)] * s.num_replicas
                       for s in got.plan.stages)
        cost = job_cost(p, per_hour, thr, plan_startup_s(p, plan_stages(p, got.plan)))
        assert cost == pytest.approx(got.cost_usd, rel=1e-9)
        assert got.cost_usd == pytest.approx(want, rel=1e-9)
    assert feasible >= 1


def _stressed(rng, layers, types):
    """A random problem where every term counts: heavy boundaries (interface queues), heavy
    embedding bytes (PS pulls pace the forwards), several microbatches per unit."""
    from dataclasses import replace

    from heterps_sim.core.ps_spec import DEFAULT_PS

    p = random_default_problem(rng, layers, types)
    scale = float(rng.choice([1.0, 30.0, 1000.0, 1e5]))
    sparse = None if p.sparse_bytes is None else np.asarray(p.sparse_bytes) * float(
        rng.choice([1.0, 100.0, 1e4]))
    # a described PS: the default model's odt then holds its unloaded time (the pulls' pace
    # takes the least pull off)
    ps = DEFAULT_PS if rng.random() < 0.5 else None
    return replace(p, boundary_bytes=np.asarray(p.boundary_bytes) * scale, sparse_bytes=sparse,
                   ps=ps)


@pytest.mark.parametrize("seed", range(4))
def test_label_step_time_is_the_closed_form(seed):
    """The search's numbers (D, PF, PB, Z and the pending first stage), built stage by stage
    from the last, give cost/flush.py's step time exactly for any plan and any effects."""
    from heterps_sim.schedulers.exact.flushed_reference import Search

    rng = np.random.default_rng(900 + seed)
    checked = 0
    for _ in range(150):
        layers, types = int(rng.integers(2, 7)), int(rng.integers(1, 4))
        p = _stressed(rng, layers, types)
        m = int(rng.integers(2, 9))
        effects = tuple(e for e in EFFECTS if rng.random() < 0.7)
        schedule = str(rng.choice(["gpipe", "1f1b"]))
        search = Search(p, m, effects, 2.0 / 3.0, 0.5, schedule=schedule)
        parts = list(partitions(layers))
        parts = parts[int(rng.integers(len(parts)))]
        types_ = [int(rng.integers(types)) for _ in parts]
        if not all(p.runnable[a:b + 1, j].all() for (a, b), j in zip(parts, types_)):
            continue
        lab, chosen = None, []
        for g in range(len(parts) - 1, -1, -1):
            (a, b), j = parts[g], types_[g]
            nj = types_[g + 1] if g + 1 < len(parts) else -1
            opts = search.options(a, b, j, nj)
            if not opts:
                break
            o = opts[int(rng.integers(len(opts)))]
            lab = search.prepend(lab, o, j)
            if lab is None:
                break
            lab = lab + ((o, b, nj, None),)
            chosen.append(o.k)
        else:
            ks = chosen[::-1]
            plan = Plan(stages=tuple(
                Stage(layers=tuple(p.layer_names[a:b + 1]), resource=p.type_names[j],
                      num_replicas=k) for (a, b), j, k in zip(parts, types_, ks)),
                num_microbatches=m, schedule=schedule)
            want = flushed_throughput(p, plan, m, **switches(effects))
            got = min(p.batch_size / search.step_time(lab), search.cap)
            assert got == pytest.approx(want, rel=1e-12, abs=0.0)
            checked += 1
    assert checked >= 60


@pytest.mark.parametrize("seed", range(3))
def test_restricted_search_is_the_brute_force_over_its_plans(seed):
    """Restricted to some types and some stage ends, the search is the cheapest plan among
    exactly those (the brute force over the same plans)."""
    rng = np.random.default_rng(77 + seed)
    feasible = 0
    for layers, types in [(3, 3), (4, 3), (4, 2), (3, 4)]:
        p = random_default_problem(rng, layers, types, caps=bool(rng.random() < 0.3))
        m = int(rng.integers(2, 6))
        allowed = tuple(sorted(rng.choice(types, size=2, replace=False).tolist()))
        ends = frozenset(int(e) for e in range(layers - 1) if rng.random() < 0.5)
        want, _ = brute_force(p, m, EFFECTS, allowed, ends)
        got = optimum(p, m, types=allowed, ends=ends)
        if want == math.inf:
            assert got is None
            continue
        feasible += 1
        assert got.cost_usd == pytest.approx(want, rel=1e-9)
        assert {p.type_index(s.resource) for s in got.plan.stages} <= set(allowed)
    assert feasible >= 1


@pytest.mark.parametrize("seed", range(3))
def test_compiled_search_equals_the_python_search(seed):
    """The numba sweep (flushed_kernel.py) finds the same optimum as this module's Python one
    (same numbers, dominance and bounds), stressed problems and caps included."""
    rng = np.random.default_rng(500 + seed)
    for _ in range(12):
        layers, types = int(rng.integers(1, 6)), int(rng.integers(1, 4))
        p = _stressed(rng, layers, types) if rng.random() < 0.5 else random_default_problem(
            rng, layers, types, caps=bool(rng.random() < 0.4))
        m = int(rng.integers(2, 9))
        effects = tuple(e for e in EFFECTS if rng.random() < 0.7)
        schedule = str(rng.choice(["gpipe", "1f1b"]))
        want = solve(p, m, schedule, effects=effects, compiled=False)
        got = solve(p, m, schedule, effects=effects)
        assert (want is None) == (got is None)
        if want is not None:
            assert got.cost_usd == pytest.approx(want.cost_usd, rel=1e-9)
            # (ties in cost, e.g. billed whole hours, may pick another plan: its own numbers)
            thr = flushed_throughput(p, got.plan, m, **switches(effects))
            assert thr == pytest.approx(got.throughput, rel=1e-9)
            assert thr >= p.throughput_limit * (1 - 1e-12)


def test_exact_flushed_scheduler_is_the_cheapest_over_its_microbatch_counts():
    """The registered scheduler returns the brute-force optimum over every plan at each of
    its microbatch counts, with its units and m; its notes say it is proven."""
    from heterps_sim.schedulers.base import run_scheduler
    from heterps_sim.schedulers.registry import make_scheduler

    rng = np.random.default_rng(31)
    checked = 0
    for layers, types in [(3, 2), (2, 3), (3, 3)]:
        p = random_default_problem(rng, layers, types)
        from dataclasses import replace
        p = replace(p, costs=replace(p.unit_costs, num_microbatches=1))
        sched = make_scheduler("exact-flushed", microbatches=[2, 3])
        outcome = run_scheduler(sched, p, "least")
        want = min(brute_force(p, m)[0] for m in (2, 3))
        if want == math.inf:
            assert outcome.plan is None
            continue
        checked += 1
        plan = outcome.plan
        assert plan.num_microbatches in (2, 3)
        thr = flushed_throughput(p, plan, plan.num_microbatches, contention=True, ps=True)
        per_hour = sum(p.price_per_hour[p.type_index(s.resource)] * s.num_replicas
                       for s in plan.stages)
        cost = job_cost(p, per_hour, thr, plan_startup_s(p, plan_stages(p, plan)))
        assert cost == pytest.approx(want, rel=1e-9)
        assert outcome.notes["proven_optimal"] is True
    assert checked >= 1


def test_exact_flushed_scheduler_refuses_the_paper_model():
    from pathlib import Path

    from heterps_sim.inputs.load import load_input
    from heterps_sim.schedulers.base import run_scheduler
    from heterps_sim.schedulers.registry import make_scheduler

    root = Path(__file__).resolve().parents[3]
    p = load_input(root / "scenarios/2emb-aws.yaml", "paper").problem
    outcome = run_scheduler(make_scheduler("exact-flushed"), p)
    assert outcome.plan is None
    assert "paper model" in outcome.notes["reason"]


@pytest.mark.parametrize("seed", range(3))
def test_a_dominated_suffix_is_never_better_for_any_completion(seed):
    """_dominates(a, b) (time numbers traded against D) holds only where every completion of
    a has a step time, and so a cost, at most b's: suffixes and completions of random plans on
    stressed problems, every effect."""
    from heterps_sim.schedulers.exact.flushed_reference import TYPE, Search, dominates

    rng = np.random.default_rng(1300 + seed)
    compared = 0
    for _ in range(40):
        layers, types = int(rng.integers(3, 7)), int(rng.integers(2, 4))
        p = _stressed(rng, layers, types)
        m = int(rng.integers(2, 9))
        effects = tuple(e for e in EFFECTS if rng.random() < 0.8)
        search = Search(p, m, effects, 2.0 / 3.0, 0.5,
                        schedule=str(rng.choice(["gpipe", "1f1b"])))
        cut = int(rng.integers(1, layers))  # suffixes start at layer `cut`

        def build(parts, types_, lab=None, nxt=-1, search=search, p=p):
            for (a, b), j in zip(reversed(parts), reversed(types_)):
                opts = search.options(a, b, j, nxt)
                if not opts:
                    return None
                lab = search.prepend(lab, opts[int(rng.integers(len(opts)))], j)
                if lab is None:
                    return None
                lab, nxt = lab + (-float(p.network_bytes_per_s[j]), j), j
            return lab

        def random_parts(first, last):
            parts = [pp for pp in partitions(last - first + 1)]
            chosen = parts[int(rng.integers(len(parts)))]
            return [(a + first, b + first) for a, b in chosen]

        suffixes = []
        for _ in range(12):
            parts = random_parts(cut, layers - 1)
            types_ = [int(rng.integers(types)) for _ in parts]
            if all(p.runnable[a:b + 1, j].all() for (a, b), j in zip(parts, types_)):
                lab = build(parts, types_)
                if lab is not None:
                    suffixes.append(lab)
        for x in suffixes:
            for y in suffixes:
                if x is y or not dominates(x, y, search):
                    continue
                for _ in range(6):  # completions of both by the same prefix
                    parts = random_parts(0, cut - 1)
                    types_ = [int(rng.integers(types)) for _ in parts]
                    if not all(p.runnable[a:b + 1, j].all() for (a, b), j in zip(parts, types_)):
                        continue
                    state = rng.bit_generator.state
                    full_x = build(parts, types_, x, x[TYPE])
                    rng.bit_generator.state = state  # the same unit counts for both
                    full_y = build(parts, types_, y, y[TYPE])
                    if full_x is None or full_y is None:
                        continue
                    tx, ty = search.step_time(full_x), search.step_time(full_y)
                    assert tx <= ty * (1 + 1e-12) + 1e-15
                    compared += 1
    assert compared >= 20


def test_the_scheduler_past_its_budget_says_its_plan_is_not_proven():
    """exact-flushed proves its optimum (the brute force's) within its budget; past its work
    budget it says its plan is not proven and bounds how far it may be."""
    from dataclasses import replace

    from heterps_sim.schedulers.base import run_scheduler
    from heterps_sim.schedulers.registry import make_scheduler

    # 3 layers and two m's keep the brute force to seconds (4 layers x 4 m's took minutes)
    p = random_default_problem(np.random.default_rng(50), 3, 3)
    p = replace(p, costs=replace(p.unit_costs, num_microbatches=1))
    want = min(brute_force(p, m)[0] for m in (2, 3))
    sched = make_scheduler("exact-flushed", microbatches=[2, 3])
    run_scheduler(sched, p, "least")
    assert sched.notes["proven_optimal"] is True
    assert sched.notes["flushed_cost_usd"] == pytest.approx(want, rel=1e-9)
    assert "gap_bound" not in sched.notes
    sched = make_scheduler("exact-flushed", microbatches=[2, 3], max_work=1)
    outcome = run_scheduler(sched, p, "least")
    notes = sched.notes
    assert notes["proven_optimal"] is False
    assert notes["lower_bound_usd"] <= want * (1 + 1e-9)
    if outcome.plan is not None:  # a plan found within the budget: never below the optimum
        assert notes["flushed_cost_usd"] >= want * (1 - 1e-9)
        assert notes["gap_bound"] == pytest.approx(
            notes["flushed_cost_usd"] / notes["lower_bound_usd"] - 1)
    else:
        assert "work budget" in notes["reason"]
