"""The provisioning formula of the analytic model (Amdahl's law), written once.

A stage whose batch takes P seconds of work that k units split (alpha of it parallel) and S
seconds that no unit count changes (the serial part) takes, on k units,

    ET(k) = P ((1 - alpha) + alpha / k) + S                               step_time
    ET(inf) = (1 - alpha) P + S                                           serial_time

and reaches a throughput level theta (B / ET(k) >= theta) with the fewest units

    slack = B / theta - (1 - alpha) P - S                                 slack
    k = max(1, ceil(alpha P / slack - CEIL_TOLERANCE))   when slack > 0   units_for

(no number of units reaches theta when slack <= 0). Every function is plain arithmetic on
floats or numpy arrays, so the numpy callers use them as they are and the numba kernels
compile the same source (`numba.njit(amdahl.step_time)`); the operation order is fixed here,
so every caller rounds alike. Callers clamp units_for at 1 and test slack > 0 themselves
(arrays mask, scalars branch).
"""

from __future__ import annotations

import numpy as np

CEIL_TOLERANCE = 1e-9
"""Subtracted before the ceiling, so that a level reached exactly by k units (up to rounding)
asks for k, not k + 1."""


def step_time(par, ser, alpha, units):
    """ET(k): seconds per batch on `units` units."""
    return par * ((1.0 - alpha) + alpha / units) + ser


def serial_time(par, ser, alpha):
    """ET as units -> infinity: the part of a step no number of units removes."""
    return (1.0 - alpha) * par + ser


def slack(step_budget_s, par, ser, alpha):
    """Seconds left for the parallel part within a step of `step_budget_s` (= B / theta);
    some number of units reaches theta only when it is > 0."""
    return step_budget_s - (1.0 - alpha) * par - ser


def units_for(par, alpha, slack_s):
    """ceil(alpha P / slack - CEIL_TOLERANCE), as a float (np.ceil: scalars, arrays and numba
    alike): the units the parallel part needs within `slack_s` > 0, before clamping at 1."""
    return np.ceil(alpha * par / slack_s - CEIL_TOLERANCE)
