"""The parameter-server traffic of embedding layers: ONE description for planner and simulator.

What moves (per sample, per embedding layer i; `problem.sparse_bytes`, 0 when None):

    pulled_bytes[i] = sparse_bytes[i]   rows fetched before the layer's forward
    pushed_bytes[i] = sparse_bytes[i]   row gradients sent back after its backward
                                        (no batch de-duplication: the worst case)

Where it goes: the problem's parameter server (`problem.ps`, core/ps_spec.py; None means
DEFAULT_PS). A request of n bytes splits evenly over the num_shards shards (ids hash
uniformly); each shard serves its part n / num_shards at `ps.seconds_per_byte` (its network
1 / shard_bytes_per_s plus the expected tier mix sum_t hit_t / bytes_per_s_t), then the
expected tier latency and the network latency pass:

    request_s(n)  = n / num_shards * ps.seconds_per_byte + ps.tier_latency_s + latency_s
    capacity      = num_shards / ps.seconds_per_byte      bytes/s all units together can move

The unit's own side (the same bytes over the unit's data path) is not here: the roofline
profile counts it in odt_s as before (inputs/roofline.py: transfer_s).

The API (plain floats; numpy only for the per-layer arrays):

    layer_bytes(problem) -> (pulled, pushed)      per-sample bytes per layer (arrays)
    request_s(nbytes, ps, latency_s)              one request, unloaded (no queue)
    batch_s(sparse_bytes, batch_size, ps, latency_s)
                                                  PS side of one layer for one batch: one pull
                                                  and one push of batch_size x sparse_bytes
                                                  (0 when sparse_bytes is 0); the analytic
                                                  model's embedding term adds this to odt_s
    stage_s(problem, first, last)                 sum of batch_s over layers first..last
    capacity_bytes_per_s(ps)                      the shards' shared service rate
    max_throughput(problem, replicas_bytes=None)  samples/s at which the whole plan's PS bytes
                                                  per sample fill the capacity (inf with none)

How each side uses it:
  planner    default model: odt_s[i][j] = unit side (roofline) + batch_s(sparse_bytes[i], B,
             ps, latency): the expected, unloaded time of the layer's pulls and pushes
             (core/ps_odt.py adds it when the problem is built or changes model), and the PS's
             shared bandwidth caps throughput at max_throughput(problem). The paper model's
             odt_s is the unit side only (HeterPS's odt).
  simulator  effect `ps` (des/work.py, des/comms.py) takes stage_s(...) out of the stage's
             work and issues the same traffic as requests that queue FIFO at the shards (one
             SimPy Resource: equal parts keep the shards in lockstep), each served in
             request_s's time (x jitter, when on). Unloaded and without jitter the requests of
             a step take what the analytic term counts (des/work.py says exactly how the
             Amdahl shares are kept), so the effect only adds what the analytic model cannot
             see: queueing behind other replicas' requests, the per-microbatch latency of m
             pulls and pushes instead of one each, and variability.
"""

from __future__ import annotations

import math

import numpy as np

from heterps_sim.core import ps_odt
from heterps_sim.core.ps_spec import DEFAULT_PS, PsSpec


def problem_ps(problem) -> PsSpec:
    """The problem's parameter server (DEFAULT_PS when it names none)."""
    ps = getattr(problem, "ps", None)
    return DEFAULT_PS if ps is None else ps


def layer_bytes(problem) -> tuple[np.ndarray, np.ndarray]:
    """(pulled, pushed) bytes per sample of every layer (zeros when sparse_bytes is None)."""
    sparse = getattr(problem, "sparse_bytes", None)
    pulled = (np.zeros(problem.num_layers) if sparse is None
              else np.asarray(sparse, dtype=np.float64))
    return pulled, pulled.copy()


def request_s(nbytes: float, ps: PsSpec, latency_s: float) -> float:
    """Seconds of one request of nbytes at an idle PS: the shards' service in parallel, the
    expected tier latency and the network latency (0 for nbytes == 0: no request)."""
    return ps_odt.request_s(nbytes, ps, latency_s)


def batch_s(sparse_bytes: float, batch_size: int, ps: PsSpec, latency_s: float) -> float:
    """PS side of one embedding layer for one batch: a pull and a push of B x sparse_bytes."""
    return float(ps_odt.ps_side_s([sparse_bytes], batch_size, ps, latency_s)[0])


def stage_s(problem, first: int, last: int) -> float:
    """PS side of layers first..last for one batch (the sum of batch_s)."""
    pulled, _ = layer_bytes(problem)
    ps = problem_ps(problem)
    return float(sum(batch_s(pulled[i], problem.batch_size, ps, problem.latency_s)
                     for i in range(first, last + 1)))


def capacity_bytes_per_s(ps: PsSpec) -> float:
    """Bytes per second the shards move together when all are busy."""
    return ps.num_shards / ps.seconds_per_byte


def max_throughput(problem, bytes_per_sample: float | None = None) -> float:
    """Samples/s at which the PS is saturated: capacity / (pulled + pushed bytes per sample of
    every layer, or `bytes_per_sample` when given); inf when nothing uses the PS."""
    if bytes_per_sample is None:
        pulled, pushed = layer_bytes(problem)
        bytes_per_sample = float(pulled.sum() + pushed.sum())
    if bytes_per_sample <= 0:
        return math.inf
    return capacity_bytes_per_s(problem_ps(problem)) / bytes_per_sample
