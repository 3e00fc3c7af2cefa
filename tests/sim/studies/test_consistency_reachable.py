"""studies/consistency_classes.py's ceiling: the most throughput a closed form may read while
the exact search's Lagrangian bound holds, and the error the best such closed form keeps."""

import pytest

from heterps_sim.studies.consistency_classes import ClassRow, check_case, class_cases


def row(flushed, simulated, ceiling):
    return ClassRow(kind="k", seed=0, stages=2, units=3, microbatches=2, schedule="gpipe",
                    tags=(), flushed=flushed, simulated=simulated, ceiling=ceiling)


@pytest.mark.parametrize("flushed, simulated, ceiling, reachable", [
    (90.0, 100.0, 95.0, 95.0 / 100.0 - 1.0),  # the simulator runs past the ceiling
    (90.0, 100.0, 120.0, 0.0),                # a closed form could read 100 exactly
    (110.0, 100.0, 110.0, 0.0),               # optimistic: a larger T fixes it
    (90.0, 100.0, None, 0.0),                 # a mixed stage: no floor (the search skips it)
], ids=["past the ceiling", "below it", "optimistic", "mixed stage"])
def test_reachable_error(flushed, simulated, ceiling, reachable):
    assert row(flushed, simulated, ceiling).reachable_error == pytest.approx(reachable)


def test_a_wide_last_stage_runs_past_the_ceiling():
    """integer-m seed 15 (m = 2, the last stage on 4 units, 1f1b): the closed form already
    reads the relaxation, and the simulator runs 13% faster (its backwards start early)."""
    case = class_cases("integer-m", 1, first_seed=15)[0]
    assert case.seed == 15
    got = check_case(case)
    assert got.ceiling == pytest.approx(got.flushed, rel=1e-12)
    assert got.simulated > 1.1 * got.ceiling
    assert got.reachable_error == pytest.approx(got.error, rel=1e-12)
