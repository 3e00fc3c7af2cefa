"""The headline's "same money" single-type throughput under the default model: brute force
over every affordable unit count (more units can be slower once all-reduce and fixed costs
count; fewer than the memory needs, or more than the minimum batch allows, do not run)."""

from __future__ import annotations

import math

import pytest

from heterps_sim.cost.reference import ps_cap, stage_terms
from heterps_sim.inputs.load import load_input
from heterps_sim.studies.headline import single_type_throughput_at


def brute_force(problem, per_hour: float) -> float:
    best = 0.0
    for j in range(len(problem.type_names)):
        if not problem.runnable[:, j].all():
            continue
        terms = stage_terms(problem, 0, problem.num_layers - 1, j, -1)
        most = math.floor(per_hour / problem.price_per_hour[j] * (1 + 1e-9))
        if problem.available[j] is not None:
            most = min(most, problem.available[j])
        for k in range(max(1, terms.k_lo), min(most, terms.k_hi) + 1):
            best = max(best, min(problem.batch_size / terms.exec_time(k), ps_cap(problem)))
    return best


@pytest.mark.parametrize("scenario", ["dlrm-64types", "synthetic-64x64", "nce-cpu-gpu"])
@pytest.mark.parametrize("per_hour", [0.5, 3.0, 40.0, 400.0])
def test_same_money_throughput_is_the_best_affordable_unit_count(scenario, per_hour):
    problem = load_input(f"scenarios/{scenario}.yaml", "default").problem
    got, bought = single_type_throughput_at(problem, per_hour)
    assert got == pytest.approx(brute_force(problem, per_hour), rel=1e-12)
    assert (got > 0) == bool(bought)


def test_paper_model_still_buys_every_unit_the_money_pays_for():
    problem = load_input("scenarios/dlrm-64types.yaml", "paper").problem
    got, bought = single_type_throughput_at(problem, 40.0)
    name, k = bought.rsplit(" x", 1)
    j = problem.type_names.index(name)
    assert int(k) == math.floor(40.0 / problem.price_per_hour[j] * (1 + 1e-9))
