"""plan_as_it_runs, the commands' answer: for `exact` it is the cheapest plan under the flushed
closed form (exact-flushed's proven optimum, itself brute-force tested) on tiny random
problems; a baseline keeps its own plan unless no units for it meet the limit as it flushes;
the paper model is left alone."""

import numpy as np
import pytest

from heterps_sim.schedulers.as_it_runs import plan_as_it_runs
from heterps_sim.schedulers.base import run_scheduler
from heterps_sim.schedulers.exact.flushed_provision import flushed_result
from heterps_sim.schedulers.registry import make_scheduler
from heterps_sim.testing import random_default_problem

SEEDS = range(40)
"""Seeds with every case: exact's cuts cheapest (0), beaten as they flush (13, 18, 33, 37),
missing the limit as they flush (34), no plan at all (2), none that flushes feasibly (36);
a single type that misses as it flushes (8) or meets the limit dearer than exact (5)."""


def _problem(seed: int):
    rng = np.random.default_rng(seed)
    return random_default_problem(rng, int(rng.integers(2, 5)), int(rng.integers(2, 4)))


def _flushed_optimum(problem):
    return run_scheduler(make_scheduler("exact-flushed"), problem, "least", objective="flushed")


def _feasible(outcome) -> bool:
    return outcome.result is not None and outcome.result.feasible


@pytest.mark.parametrize("seed", SEEDS)
def test_exacts_answer_is_the_flushed_optimum(seed):
    p = _problem(seed)
    stage = run_scheduler(make_scheduler("exact"), p, "least", objective="flushed")
    answer = plan_as_it_runs(make_scheduler("exact"), p)
    best = _flushed_optimum(p)
    replaced = "replaced_by" in answer.notes
    if not _feasible(best):  # no plan meets the limit as the pipeline flushes
        assert not replaced and answer.plan == stage.plan
        return
    assert best.notes["proven_optimal"]
    assert _feasible(answer)
    assert answer.result.cost_usd == pytest.approx(best.result.cost_usd, rel=1e-9)
    cheaper = best.result.cost_usd < stage.result.cost_usd * (1 - 1e-9)
    assert replaced == (not _feasible(stage) or cheaper)
    assert answer.plan == (best.plan if replaced else stage.plan)
    # what it prints is the closed form's, for the plan it answers with
    assert flushed_result(p, answer.plan).cost_usd == pytest.approx(answer.result.cost_usd,
                                                                     rel=1e-9)


def test_the_seeds_cover_every_case():
    kinds = set()
    for seed in SEEDS:
        p = _problem(seed)
        stage = run_scheduler(make_scheduler("exact"), p, "least", objective="flushed")
        why = plan_as_it_runs(make_scheduler("exact"), p).notes.get("replaced_by", "kept")
        kinds.add("none" if stage.plan is None else "missing" if "miss" in why else
                  "cheaper" if "cheaper" in why else "kept")
    assert kinds == {"none", "missing", "cheaper", "kept"}


@pytest.mark.parametrize("seed", SEEDS)
def test_a_baseline_keeps_its_plan_unless_it_misses_the_limit(seed):
    p = _problem(seed)
    own = run_scheduler(make_scheduler("homogeneous"), p, "least", objective="flushed")
    answer = plan_as_it_runs(make_scheduler("homogeneous"), p)
    if own.plan is None or _feasible(own):
        # kept even where exact-flushed is cheaper (seed 5): a baseline is not improved
        assert answer.plan == own.plan and "replaced_by" not in answer.notes
        return
    best = _flushed_optimum(p)
    if not _feasible(best):
        assert answer.plan == own.plan and "replaced_by" not in answer.notes
        return
    assert "miss the limit" in answer.notes["replaced_by"]
    assert answer.plan == best.plan and answer.result.feasible


def test_the_paper_model_is_left_alone():
    p = _problem(13).with_model("paper")
    stage = run_scheduler(make_scheduler("exact"), p, "least", objective="flushed")
    answer = plan_as_it_runs(make_scheduler("exact"), p)
    assert answer.plan == stage.plan and "replaced_by" not in answer.notes
