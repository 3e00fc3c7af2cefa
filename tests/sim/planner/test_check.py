"""The simulator's check of a plan (studies/verify.py) against exact oracles: with the effects
off it reproduces the analytic model; re-provisioning agrees with a brute force over extra
units on tiny chains (it meets the limit exactly when some provisioning does, and says
`impossible` only when none does)."""

import dataclasses
import itertools

import numpy as np
import pytest

from heterps_sim.cost import evaluate_plan
from heterps_sim.des import simulate
from heterps_sim.planner.check import (
    DETERMINISTIC_EFFECTS,
    VerifySettings,
    check_lines,
    verify_plan,
)
from heterps_sim.planner.repair import with_units
from heterps_sim.testing import chain_plan, chain_problem, random_problem


def _check(problem, plan, effects, reprovision=True, budget=40):
    analytic = evaluate_plan(problem, plan, "least")
    return verify_plan(problem, plan, analytic, lambda p: evaluate_plan(problem, p, "least"),
                       VerifySettings(effects=tuple(effects), max_resimulations=budget),
                       reprovision=reprovision)


def _brute_force(problem, plan, ks0, effects, cap):
    """Fewest units (and one such provisioning) over every extra-unit vector within the cap
    whose simulated throughput meets the limit; None when none does."""
    best = None
    for extra in itertools.product(range(cap + 1), repeat=len(ks0)):
        ks = [k + e for k, e in zip(ks0, extra)]
        if sum(ks) > cap:
            continue
        p = chain_plan(problem, ks, microbatches=plan.num_microbatches, schedule=plan.schedule)
        r = simulate(problem, p, options=VerifySettings(effects=effects).options(),
                     record_spans=False).result
        if r.feasible and (best is None or sum(ks) < best[0]):
            best = (sum(ks), ks)
    return best


def test_the_check_uses_every_deterministic_effect():
    assert set(DETERMINISTIC_EFFECTS) == {"bubbles", "allreduce", "transfers", "contention", "ps"}


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b", "async"])
def test_effects_off_simulated_equals_analytic(schedule):
    p = chain_problem([0.02, 0.05, 0.03], alpha=0.9, batch_size=64, limit=1500)
    plan = chain_plan(p, [None, None, None], microbatches=4, schedule=schedule)
    check = _check(p, plan, ())
    assert check.status == "confirmed" and check.simulations == 1
    assert check.simulated.throughput == pytest.approx(check.analytic.throughput, rel=1e-9)
    assert check.simulated.cost_usd == pytest.approx(check.analytic.cost_usd, rel=1e-9)
    assert check.final_plan.stages[1].num_replicas == check.analytic.stages[1].num_replicas


def test_effects_off_on_random_problems_confirm_the_analytic_plan():
    from heterps_sim.schedulers.base import run_scheduler
    from heterps_sim.schedulers.registry import make_scheduler
    for seed in range(4):
        p = random_problem(np.random.default_rng(seed), 5, 3)
        outcome = run_scheduler(make_scheduler("exact"), p, "least")
        if outcome.plan is None:
            continue
        check = verify_plan(p, outcome.plan, outcome.result,
                            lambda plan, p=p: evaluate_plan(p, plan, "least"),
                            VerifySettings(effects=()), reprovision=True)
        assert check.status == "confirmed"
        assert check.simulated.throughput == pytest.approx(outcome.result.throughput, rel=1e-6)


def test_a_plan_short_in_the_simulator_is_reprovisioned_to_the_brute_force_minimum():
    # bubbles: the analytic (1, 3) misses; the fewest units that meet the limit are (2, 4)
    p = chain_problem([0.02, 0.05], alpha=0.95, batch_size=64, limit=3000)
    plan = chain_plan(p, [None, None], microbatches=4, schedule="gpipe")
    check = _check(p, plan, ["bubbles"])
    assert check.simulated.feasible is False and check.status == "reprovisioned"
    ks = [s.num_replicas for s in check.final_simulated.stages]
    best = _brute_force(p, plan, [1, 3], ("bubbles",), cap=16)
    assert sum(ks) == best[0] and ks == best[1] == [2, 4]
    again = simulate(p, check.final_plan, options=check.settings.options(),
                     record_spans=False).result
    assert again.feasible and again.throughput == check.final_simulated.throughput
    assert check.final_analytic.stages[1].num_replicas == 4  # the analytic result of that plan
    kept = [g for g in check.growths if g.kept]
    assert kept and all(g.throughput_after > g.throughput_before for g in kept)
    # a schedule check does not re-provision: it reports the miss
    assert _check(p, plan, ["bubbles"], reprovision=False).status == "missed"


def test_capped_below_what_the_simulator_needs_is_impossible():
    p = chain_problem([0.02, 0.05], alpha=0.95, batch_size=64, limit=3000)
    p = dataclasses.replace(p, available=(5,))  # (2, 4) needs 6
    plan = chain_plan(p, [None, None], microbatches=4, schedule="gpipe")
    check = _check(p, plan, ["bubbles"])
    assert check.status == "impossible" and not check.meets_limit
    assert "no provisioning of this plan meets the limit" in check.reason
    assert _brute_force(p, plan, [1, 3], ("bubbles",), cap=5) is None
    assert sum(s.num_replicas for s in check.final_plan.stages) <= 5


def test_a_stage_too_busy_at_its_cap_is_impossible_and_names_it():
    # one unit-heavy stage: its busy time alone exceeds what the limit allows
    p = chain_problem([0.01, 0.2], alpha=0.9, batch_size=64, limit=2000)
    p = dataclasses.replace(p, available=(11,))  # (1, 10) uses every unit
    plan = chain_plan(p, [1, 10], microbatches=10, schedule="gpipe")
    analytic = evaluate_plan(p, plan, "least")
    check = verify_plan(p, plan, analytic, lambda q: evaluate_plan(p, q, "least"),
                        VerifySettings(effects=("bubbles",)), reprovision=True)
    assert check.status == "impossible"
    assert "stage 1 (l1 on" in check.reason and "availability cap" in check.reason
    assert _brute_force(p, plan, [1, 10], ("bubbles",), cap=11) is None


SEEDS = range(24)


@pytest.mark.parametrize("seed", SEEDS)
def test_reprovisioning_agrees_with_brute_force_on_random_chains(seed):
    rng = np.random.default_rng(seed)
    stages = int(rng.integers(2, 4))
    cap = int(rng.integers(4, 12))
    p = chain_problem(list(rng.uniform(0.01, 0.08, size=stages)),
                      alpha=float(rng.uniform(0.8, 1.0)), batch_size=64,
                      limit=float(rng.uniform(1000, 4000)))
    p = dataclasses.replace(p, available=(cap,))
    plan = chain_plan(p, [None] * stages, microbatches=int(rng.choice([2, 4, 8])),
                      schedule=str(rng.choice(["gpipe", "1f1b"])))
    analytic = evaluate_plan(p, plan, "least")
    if not analytic.feasible:
        pytest.skip("the analytic model finds no provisioning")
    check = _check(p, plan, ["bubbles"])
    ks0 = [s.num_replicas for s in analytic.stages]
    best = _brute_force(p, plan, ks0, ("bubbles",), cap)
    if check.status == "impossible":  # said only when it is so
        assert best is None
    if check.meets_limit:
        assert best is not None
        ks = [s.num_replicas for s in check.final_simulated.stages]
        assert all(k >= k0 for k, k0 in zip(ks, ks0)) and sum(ks) <= cap
        assert sum(ks) <= best[0] + 1  # greedy: at most one unit above the fewest
    if best is None:
        assert check.status in ("impossible", "unresolved")
    RESOLVED.append(check.status != "unresolved")


RESOLVED: list[bool] = []


def test_reprovisioning_resolves_most_random_chains():
    """The search is local (uneven microbatch routing makes the simulated throughput
    non-monotone in units, so a unit more can lose what two more gain); `unresolved` says so
    honestly; on the chains above it answers at least half of them."""
    if len(RESOLVED) < 12:
        pytest.skip("run with the brute-force cases above")
    assert sum(RESOLVED) >= 0.5 * len(RESOLVED), RESOLVED


def test_with_units_grows_a_mixed_stage_within_its_caps():
    from heterps_sim.core.plan import Plan, Stage
    p = random_problem(np.random.default_rng(0), 2, 3)
    p = dataclasses.replace(p, available=(3, None, None))
    names = p.type_names
    plan = Plan(stages=(Stage(layers=p.layer_names, replicas=((names[0], 2), (names[1], 1))),))
    grown = with_units(p, plan, 0, 6)
    assert grown.stages[0].replicas == ((names[0], 3), (names[1], 3))


def test_the_check_prints_both_numbers_and_the_steps():
    p = chain_problem([0.02, 0.05], alpha=0.95, batch_size=64, limit=3000)
    check = _check(p, chain_plan(p, [None, None], microbatches=4), ["bubbles"])
    text = "\n".join(check_lines(check))
    assert "analytic" in text and "simulated" in text and "re-provisioned" in text
    assert f"{check.analytic.throughput:,.0f}" in text
    assert f"{check.simulated.throughput:,.0f}" in text
    assert "FEASIBLE after re-provisioning" in text and "1 -> 2 units" in text
    data = check.to_json_dict()
    assert data["analytic"]["throughput"] == check.analytic.throughput
    assert data["simulated"]["throughput"] == check.simulated.throughput
    assert data["reprovisioned"]["simulated"]["units"] == [2, 4]
    assert [s["kept"] for s in data["steps"]] == [g.kept for g in check.growths]
