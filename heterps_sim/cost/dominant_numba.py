"""The default model's formulas of cost/dominant.py compiled by numba, for the kernels that run
them inside their loops: the same source (so the same arithmetic), each function compiled
with its callees resolved to their compiled forms; kept apart so that the numpy callers do
not load numba."""

import types

from numba import njit

from heterps_sim.cost import dominant
from heterps_sim.util.numba_cache import prepare

prepare()  # a writable cache folder, one line when compiling
_env = dict(vars(dominant))


def _compile(name: str):
    fn = getattr(dominant, name)
    copy = types.FunctionType(fn.__code__, _env, fn.__name__, fn.__defaults__)
    _env[name] = njit(cache=True)(copy)
    return _env[name]


# callees before callers
allreduce_time = _compile("allreduce_time")
step_time = _compile("step_time")
_roots = _compile("_roots")
least_units = _compile("least_units")
fastest_units = _compile("fastest_units")
most_units_within = _compile("most_units_within")
memory_units = _compile("memory_units")
billed_hours = _compile("billed_hours")
stage_extras = _compile("stage_extras")
