"""The parameter server's side of embedding traffic, and which model's odt holds it.

HeterPS's odt (the `paper` model) is a unit's own data transfer: raw input reads and the
embedding rows over the unit's data path (the roofline, inputs/roofline.py). The `default`
model also counts the PS's side of the same rows: per embedding layer and batch, one pull and
one push of B x sparse_bytes, each split over the shards (cost/ps_traffic.py describes it):

    request_s(n) = n / num_shards x seconds_per_byte + tier_latency_s + latency_s   (0 if n = 0)
    ps_side_s[i] = 2 x request_s(B x sparse_bytes[i])

A problem whose `ps` is set (every scenario; a problem JSON that names one) carries odt_s for
its own model: the unit side plus ps_side_s under `default`, the unit side alone under
`paper`. `model_odt_s` gives the odt_s of the same problem under another model (the PS side
added, or taken away to rounding). A problem with ps None keeps odt_s under both models (files
exported before the PS had a description). numpy only (core: no simpy, no torch).
"""

from __future__ import annotations

import numpy as np

from heterps_sim.core.ps_spec import DEFAULT_PS, PsSpec


def request_s(nbytes: float, ps: PsSpec, latency_s: float) -> float:
    """Seconds of one request of nbytes at an idle PS (0 for nbytes == 0: no request)."""
    if nbytes <= 0:
        return 0.0
    return nbytes / ps.num_shards * ps.seconds_per_byte + ps.tier_latency_s + latency_s


def ps_side_s(sparse_bytes, batch_size: int, ps: PsSpec | None, latency_s: float) -> np.ndarray:
    """(L,) PS seconds per batch of every layer: a pull and a push of B x sparse_bytes."""
    spec = DEFAULT_PS if ps is None else ps
    out = []
    for b in np.asarray(sparse_bytes, dtype=np.float64):
        n = batch_size * float(b)
        out.append(request_s(n, spec, latency_s) + request_s(n, spec, latency_s))
    return np.array(out, dtype=np.float64)


def holds_ps_side(cost_model: str) -> bool:
    """Whether this model's odt_s includes the PS side."""
    return cost_model == "default"


def odt_holds_ps_side(problem) -> bool:
    """Whether this problem's odt_s includes the PS side (a ps is set, the default model)."""
    return (problem.ps is not None and problem.sparse_bytes is not None
            and holds_ps_side(problem.cost_model))


def with_ps_side(odt_s: np.ndarray, side: np.ndarray) -> np.ndarray:
    """The unit-side odt_s with the PS side added (the one arithmetic both paths use)."""
    return odt_s + side[:, None]


def model_odt_s(problem, cost_model: str) -> np.ndarray:
    """odt_s of `problem` under `cost_model` (the same array when nothing changes)."""
    if (problem.ps is None or problem.sparse_bytes is None
            or holds_ps_side(cost_model) == holds_ps_side(problem.cost_model)):
        return problem.odt_s
    side = ps_side_s(problem.sparse_bytes, problem.batch_size, problem.ps, problem.latency_s)
    if holds_ps_side(cost_model):
        return with_ps_side(problem.odt_s, side)
    return problem.odt_s - side[:, None]
