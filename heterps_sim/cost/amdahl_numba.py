"""The provisioning formula of cost/amdahl.py compiled by numba, for the kernels that run it
inside their loops (the same source, so the same arithmetic; kept apart so that the numpy
callers do not load numba)."""

from numba import njit

from heterps_sim.cost import amdahl
from heterps_sim.util.numba_cache import prepare

prepare()  # a writable cache folder, one line when compiling (every kernel module imports this)
step_time = njit(cache=True, inline="always")(amdahl.step_time)
serial_time = njit(cache=True, inline="always")(amdahl.serial_time)
slack = njit(cache=True, inline="always")(amdahl.slack)
units_for = njit(cache=True, inline="always")(amdahl.units_for)
