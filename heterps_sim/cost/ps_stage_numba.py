"""cost/ps_stage.py compiled by numba for the exact search's kernels: the same source, so the
same arithmetic; kept apart so that the numpy callers do not load numba."""

import types

from numba import njit

from heterps_sim.cost import ps_stage
from heterps_sim.util.numba_cache import prepare

prepare()  # a writable cache folder, one line when compiling

_fn = ps_stage.stage_terms
stage_terms = njit(cache=True)(types.FunctionType(_fn.__code__, dict(vars(ps_stage)),
                                                  _fn.__name__, _fn.__defaults__))
