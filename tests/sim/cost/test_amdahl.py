"""The provisioning formula: the fewest units it gives reach the level and one fewer do not,
and its numba form computes the same floats as its numpy form."""

import numpy as np

from heterps_sim.cost import amdahl, amdahl_numba


def _cases(seed: int, n: int = 2000):
    rng = np.random.default_rng(seed)
    par = rng.lognormal(-3, 1.5, n)
    ser = rng.lognormal(-6, 1.5, n) * (rng.random(n) < 0.7)
    alpha = rng.uniform(0.0, 1.0, n)
    budget = amdahl.serial_time(par, ser, alpha) * rng.uniform(1.0001, 50.0, n)
    return par, ser, alpha, budget


def test_fewest_units_reach_the_level_and_one_fewer_do_not():
    par, ser, alpha, budget = _cases(0)
    slack = amdahl.slack(budget, par, ser, alpha)
    assert (slack > 0).all()
    k = np.maximum(1.0, amdahl.units_for(par, alpha, slack))
    tol = 1e-9 * budget
    assert (amdahl.step_time(par, ser, alpha, k) <= budget + tol).all()
    fewer = k > 1
    assert (amdahl.step_time(par[fewer], ser[fewer], alpha[fewer], k[fewer] - 1)
            > budget[fewer] - tol[fewer]).all()


def test_serial_time_is_the_limit_of_many_units():
    par, ser, alpha, _ = _cases(1)
    np.testing.assert_allclose(amdahl.step_time(par, ser, alpha, 1e12),
                               amdahl.serial_time(par, ser, alpha), rtol=1e-9)
    np.testing.assert_allclose(amdahl.step_time(par, ser, alpha, 1.0), par + ser, rtol=1e-12)


def test_numba_form_is_the_same_arithmetic():
    par, ser, alpha, budget = _cases(2, 300)
    for p, s, a, b in zip(par, ser, alpha, budget):
        slack = amdahl.slack(b, p, s, a)
        assert amdahl_numba.slack(b, p, s, a) == slack
        assert amdahl_numba.units_for(p, a, slack) == amdahl.units_for(p, a, slack)
        assert amdahl_numba.serial_time(p, s, a) == amdahl.serial_time(p, s, a)
        assert amdahl_numba.step_time(p, s, a, 3.0) == amdahl.step_time(p, s, a, 3.0)
