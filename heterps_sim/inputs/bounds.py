"""Every number of a loaded problem inside a stated range, checked once at the input edge.

A scenario or problem JSON may hold finite numbers no machine has: a price of 1e-308 USD per
hour, a network of 1e-308 Gbit/s, a latency of 1.7e308 s. Each is "valid" as a float, and each
overflowed the cost model's arithmetic (a bandwidth term of 1e305 s squared, a ceil of
infinity) deep inside a scheduler. Here the problem that `load_input` built, from either kind
of input, is held to the ranges of core/limits.py (PROBLEM_RANGES), each far outside any real
figure and far inside what float64 arithmetic survives; a number outside is one line naming
the file, the quantity (and its type or layer) and the range, exit 2.

What the scenario's own fields name (`cluster.define.0.price_per_hour_usd`) is checked where
they are read (custom_types.py); this is the backstop for every way into a Problem.
"""

from __future__ import annotations

import math

import numpy as np

from heterps_sim.core import limits as L
from heterps_sim.core.files import UserFileError


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if 1e3 <= abs(x) < 1e7 and float(x).is_integer() else f"{x:g}"


def _check(source: str, what: str, values, names, low: float, high: float, unit: str, *,
           zero_ok: bool = False, inf_ok: bool = False) -> None:
    """Raise for the first of `values` (named by `names`) outside [low, high]; None entries
    (a layer that cannot run on a type) pass, so do 0 when `zero_ok` and inf when `inf_ok`."""
    for name, value in zip(names, values, strict=True):
        if value is None:
            continue
        v = float(value)
        if math.isnan(v):  # a null of the problem file, loaded as NaN: cannot run there
            continue
        if (zero_ok and v == 0.0) or (inf_ok and v == math.inf) or low <= v <= high:
            continue
        where = f" of {name}" if name else ""
        allowed = f"[{_fmt(low)}, {_fmt(high)}] {unit}" + (" or 0" if zero_ok else "") + (
            " or unlimited" if inf_ok else "")
        raise UserFileError(f"{source}: {what}{where}: {v:g} is outside {allowed} (the limit "
                            "in heterps_sim/core/limits.py)")


def check_problem(problem, source: str) -> None:
    """Raise UserFileError (one line) for the first number of `problem` outside its range."""
    types = [f"type {t!r}" for t in problem.type_names]
    layers = [f"layer {n!r}" for n in problem.layer_names]
    c = _check
    c(source, "workload.num_samples", [problem.num_samples], [""], 1.0, L.MAX_NUM_SAMPLES,
      "samples")
    c(source, "workload.throughput_limit", [problem.throughput_limit], [""], L.MIN_RATE,
      L.MAX_THROUGHPUT, "samples/s")
    c(source, "price per unit-hour", problem.price_per_hour, types, L.MIN_PRICE_PER_HOUR,
      L.MAX_PRICE_PER_HOUR, "USD", zero_ok=True)
    c(source, "network", problem.network_bytes_per_s, types, L.MIN_BYTES_PER_S,
      L.MAX_BYTES_PER_S, "bytes/s")
    c(source, "latency_s", [problem.latency_s], [""], 0.0, L.MAX_LATENCY_S, "s")
    c(source, "boundary bytes", problem.boundary_bytes, layers, 0.0, L.MAX_BYTES, "bytes")
    for what, table in (("compute seconds per batch (oct_s)", problem.oct_s),
                        ("transfer seconds per batch (odt_s)", problem.odt_s)):
        for i, row in enumerate(np.asarray(table, dtype=object)):
            c(source, what, row, [f"{layers[i]} on {t}" for t in types], 0.0, L.MAX_SECONDS,
              "s")
    for what, arr in (("dense parameter bytes", problem.param_bytes),
                      ("embedding bytes per sample", problem.sparse_bytes)):
        if arr is not None:
            c(source, what, arr, layers, 0.0, L.MAX_BYTES, "bytes")
    if problem.costs is not None:
        k = problem.costs
        for what, arr in (("costs.step_overhead_s", k.step_overhead_s),
                          ("costs.layer_overhead_s", k.layer_overhead_s),
                          ("costs.startup_s", k.startup_s)):
            c(source, what, arr, types, 0.0, L.MAX_SECONDS, "s")
        c(source, "unit memory", k.memory_bytes, types, L.MIN_MEMORY_BYTES, L.MAX_BYTES,
          "bytes", inf_ok=True)
        for what, arr in (("training state bytes", k.state_bytes),
                          ("activation bytes per sample", k.activation_bytes)):
            c(source, what, arr, layers, 0.0, L.MAX_BYTES, "bytes")
        c(source, "costs.billing_granularity_s", [k.billing_granularity_s], [""], 0.0,
          L.MAX_SECONDS, "s")
    if problem.ps is not None:
        ps = problem.ps
        c(source, "ps shard bandwidth", [ps.shard_bytes_per_s], [""], L.MIN_BYTES_PER_S,
          L.MAX_BYTES_PER_S, "bytes/s")
        for tier in ("hot", "warm", "cold"):
            t = getattr(ps, tier)
            c(source, f"ps.{tier} bandwidth", [t.bytes_per_s], [""], L.MIN_BYTES_PER_S,
              L.MAX_BYTES_PER_S, "bytes/s")
            c(source, f"ps.{tier} latency_s", [t.latency_s], [""], 0.0, L.MAX_LATENCY_S, "s")
        c(source, "ps price per hour", [ps.price_per_hour], [""], L.MIN_PRICE_PER_HOUR,
          L.MAX_PRICE_PER_HOUR, "USD", zero_ok=True)
        c(source, "ps table bytes", [ps.table_bytes], [""], 0.0, L.MAX_BYTES, "bytes")
