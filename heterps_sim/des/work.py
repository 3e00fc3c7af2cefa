"""Stage work: the analytic stage terms cut into what one replica does per microbatch and per step.

For stage g on type j with k replicas, m microbatches per step of B samples (cost.stage_terms
gives OCT, ODT, alpha, P = parallel_s, S = serial_s):

    per microbatch, on the replica it is routed to:  w = alpha * P / m
        forward  = (1 - backward_fraction) * w          backward = backward_fraction * w
    per step, on every replica:  u = (1 - alpha) * P + S
        (the work that does not split over replicas: optimizer, launch overheads, serial odt)
        flush schedules: one step-end phase after the replica's last backward of the step;
        continuous: k/m of it on each backward (PipeDream-style: weights update after every
        backward), so no stage ever stops the pipeline for a whole u at once.

A replica serving m / k microbatches per step is busy (m/k) * alpha*P/m + u = ET_g(k) per step.
Continuous 1F1B over rounds (core/lanes.py) keeps every replica fed: a circuit of the schedule
through stages g..s-1 holds s - g rounds and takes at most sum_h L * ET_h / m <= (s - g) * L *
max ET / m, so the pipeline runs at min_g B / ET_g(k_g), the analytic throughput (tests: within
1%; it is exact to rounding when every k_g divides m, and within ~0.2% with the default m when
the lcm of the k_g is too large for m to be a multiple of it). Effects take parts out of P (or
S, when odt is serial) and model them explicitly instead:

    transfers  each microbatch sends forward_boundary_share * boundary_bytes / m bytes of
               activations to the next stage and the rest back as gradients; the receiver sees
               a message bytes / min(net_j, net_j') + latency after it was sent. The sender's
               work keeps the analytic boundary term (the analytic model does not overlap
               transfer and compute), so the effect adds the messages' delay in the data
               dependencies (fill and drain, queueing under contention), never takes work away.
               Quantized (WIRE_BYTES[options.quantize]: fp16/bf16 halve the bytes, int8
               quarters them; per-row scales and exact ids knowingly left out), the work's
               bandwidth part shrinks in proportion.
               With options.sends_leave_work (the engine's isend: calibration/validate.py),
               the whole boundary term leaves the work and the messages are the only cost.
    ps         each microbatch pulls (B/m) * sum sparse_bytes before its forward and pushes as
               much after its backward; the shards serve a request for its bytes / num_shards
               x seconds_per_byte (cost/ps_traffic.py). Default model: the work keeps the
               analytic odt, which holds the PS's unloaded time (the same description); a
               forward waits until its pull is being served, so the effect adds the queueing
               at the shared shards. Paper model (its odt has no PS side): a forward waits
               until its pull has been served, so the effect adds service and queueing.
               With DesOptions.ps set, the work's PS time changes by
               stage_s(that PS) - stage_s(the problem's).
    allreduce  each step, 2(k-1)/k * dense param bytes / net_j + 2(k-1) * latency (ring; or a
               tree, options.allreduce_algorithm), after a barrier of the stage's replicas;
               k = 1 costs nothing. With `overlap`, the part that fits under one microbatch's
               backward is hidden (the engine's buckets travel during the last backward).
    cores      with transfers and options.message_cpu: a message's CPU on the one host (gloo's
               send and receive, measured), send(bytes) added to the operation that sends it
               and recv(bytes) to the one that consumes it, as communication (not compute):

                   stage g's forward  += recv(activations from g-1) + send(activations to g+1)
                   stage g's backward += recv(gradients from g+1)   + send(gradients to g-1)
                                         (+ k/m of a continuous ring's CPU: measured,
                                         allreduce_cpu_measured, or ring_cpu_s)

               so it holds a core with the operation. Approximate: gloo moves a message on its
               own thread when it arrives, not inside the consuming operation; and on a type
               emulated by dilation the added seconds hold a core only for the stage's
               cpu_share, like the rest of the operation (knowingly low by 1 - cpu_share).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from heterps_sim.core import ps_odt
from heterps_sim.core.problem import Problem
from heterps_sim.core.sharing import finish_together
from heterps_sim.cost import amdahl, ps_traffic
from heterps_sim.cost.reference import MixedTerms, StageTerms, stage_type_indices
from heterps_sim.des.options import DesOptions

WIRE_BYTES = {"none": 1.0, "fp16": 0.5, "bf16": 0.5, "int8": 0.25}
"""Share of the float32 boundary bytes that crosses the wire per quantization mode."""


@dataclass(frozen=True, slots=True)
class StageWork:
    index: int
    type_index: int
    num_replicas: int
    forward_s: float
    """Forward seconds of one microbatch on one replica (before jitter / stragglers)."""
    backward_s: float
    step_s: float
    """Step-end phase of every replica (flush schedules): the non-splitting work u; 0 when
    continuous (u is then spread over the backwards)."""
    comm_forward: float
    """Share of forward time that is data transfer (odt left in the work)."""
    comm_backward: float
    comm_step: float
    """Share of the step-end phase that is data transfer."""
    link_bytes_per_s: float
    """transfers: bandwidth of the link to the next stage (0 for the last stage)."""
    send_forward_bytes: float
    """transfers: activation bytes per microbatch to the next stage (0 when off or last)."""
    send_backward_bytes: float
    """transfers: gradient bytes per microbatch the next stage sends back to this one."""
    allreduce_s: float
    """allreduce: seconds of the per-step ring all-reduce (0 when off or k = 1)."""
    ps_bytes: float
    """ps: bytes pulled per microbatch (as many pushed back); 0 when off or no embedding."""
    network_bytes_per_s: float
    ps_in_work: bool = True
    """ps: the work holds the PS's unloaded time (core/ps_odt.odt_holds_ps_side: the default
    model's odt of a problem with a ps), so a forward waits only for its pull's turn; False
    (the paper model's odt has no PS side): it waits until its pull is served."""
    replica_seconds: tuple[tuple[float, float, float], ...] = ()
    """Mixed stage: (forward, backward, step-end) seconds of each replica on its own type;
    forward_s, backward_s and step_s are then 1.0 (world.Replica multiplies them in). ()
    for a single-type stage."""
    share_weights: tuple[float, ...] = ()
    """Mixed stage: each replica's share of a step's microbatches under share='speed' (all
    finish together); () for a single-type stage."""
    replica_types: tuple[int, ...] = ()
    """Mixed stage: each replica's type index; () for a single-type stage."""
    allreduce_bytes: float = 0.0
    """allreduce: the dense parameter bytes each replica's ring sums per step (0 when off or
    k = 1); cores charges a continuous ring's CPU by them."""


def _ps_layers(problem: Problem, terms: StageTerms) -> list[int]:
    sparse = getattr(problem, "sparse_bytes", None)
    if sparse is None:
        return []
    return [i for i in range(terms.first, terms.last + 1) if sparse[i] > 0]


def param_bytes(problem: Problem, options: DesOptions) -> tuple[list[float] | None, str]:
    """Dense parameter bytes per layer for the all-reduce, and a note when there are none."""
    if options.param_bytes is not None:
        if len(options.param_bytes) != problem.num_layers:
            raise ValueError(f"param_bytes: needs {problem.num_layers} entries (one per layer), "
                             f"got {len(options.param_bytes)}")
        return list(options.param_bytes), ""
    values = getattr(problem, "param_bytes", None)
    if values is None:
        return None, "allreduce: the problem has no param_bytes; the ring costs latency only"
    return [float(x) for x in values], ""


def allreduce_seconds(algorithm: str, k: int, nbytes: float, bandwidth: float,
                      latency: float) -> float:
    """One all-reduce of nbytes among k units (ring: bandwidth-optimal, 2(k-1) latency hops;
    tree: reduce + broadcast, pipelined, 2 ceil(log2 k) hops)."""
    if k <= 1:
        return 0.0
    if algorithm == "ring":
        return 2.0 * (k - 1) / k * nbytes / bandwidth + 2.0 * (k - 1) * latency
    return 2.0 * nbytes / bandwidth + 2.0 * math.ceil(math.log2(k)) * latency


def measured_allreduce_seconds(rows, k: int, nbytes: float) -> float | None:
    """Seconds of one all-reduce of nbytes among k ranks from measured (ranks, bytes, seconds)
    rows: piecewise linear in bytes, extended by the last segment beyond the largest size and
    flat below the smallest; None when no rank count was measured.

    A rank count not measured is read off the measured ones at the same bytes, linear in the
    ring's k - 1 steps (between the nearest two, or the last segment extended; clipped at 0);
    with one measured count, in proportion to k - 1. Why: measured here (2-core VM, 64 KB),
    2..6 ranks take 2.2, 5.1, 8.6, 12.4 and 16.0 ms; from 2 and 3 ranks alone this reads
    4..6 at 7.9, 10.9 and 13.8 ms (7-14% low), where the latency and bandwidth formula gives
    under 1 ms (a links file profiled for fewer ranks than a plan has)."""
    by_k: dict[int, list[tuple[float, float]]] = {}
    for r, b, t in rows or ():
        by_k.setdefault(int(r), []).append((float(b), float(t)))
    if not by_k:
        return None
    if k in by_k:
        return _over_bytes(sorted(by_k[k]), nbytes)
    at = sorted((r, _over_bytes(sorted(points), nbytes)) for r, points in by_k.items())
    if len(at) == 1:
        (r, t), = at
        return t * (k - 1) / (r - 1) if r > 1 else None
    below = [p for p in at if p[0] < k]
    above = [p for p in at if p[0] > k]
    if below and above:
        (k0, t0), (k1, t1) = below[-1], above[0]
    elif above:  # fewer ranks than any measured: the first segment extended
        (k0, t0), (k1, t1) = at[0], at[1]
    else:  # more: the last segment extended
        (k0, t0), (k1, t1) = at[-2], at[-1]
    return max(t0 + (t1 - t0) * (k - k0) / (k1 - k0), 0.0)


def _over_bytes(points: list[tuple[float, float]], nbytes: float) -> float:
    """One rank count's (bytes, seconds) points, sorted, at nbytes (measured_allreduce_seconds)."""
    xs, ys = [b for b, _ in points], [t for _, t in points]
    if len(points) > 1 and nbytes > xs[-1]:
        slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2]) if xs[-1] > xs[-2] else 0.0
        return ys[-1] + max(slope, 0.0) * (nbytes - xs[-1])
    return float(np.interp(nbytes, xs, ys))


def stage_work(problem: Problem, terms: list[StageTerms], replicas: list[int], m: int,
               options: DesOptions, flush: bool) -> tuple[list[StageWork], list[str]]:
    """Every stage's work per microbatch and per step under `options`, plus notes."""
    pbytes, note = param_bytes(problem, options) if options.on("allreduce") else (None, "")
    notes = [note] if note else []
    if options.on("ps") and getattr(problem, "sparse_bytes", None) is None:
        notes.append("ps: the problem has no sparse_bytes; no layer uses the parameter server")
    net = problem.network_bytes_per_s
    works = []
    for g, (t, k) in enumerate(zip(terms, replicas)):
        last = g == len(terms) - 1
        link_bw = 0.0 if last else float(min(
            net[j] for j in stage_type_indices(t) + stage_type_indices(terms[g + 1])))
        if isinstance(t, MixedTerms):
            parts = [_one_stage(problem, g, part, k, link_bw, m, options, flush, pbytes)
                     for part in t.parts]
            works.append(_mixed_work(parts, t.counts, m, flush))
        else:
            works.append(_one_stage(problem, g, t, k, link_bw, m, options, flush, pbytes))
    if options.message_cpu is not None and options.on("cores") and options.on("transfers"):
        works = _with_message_cpu(works, options.message_cpu, m, flush,
                                  options.allreduce_cpu_measured,
                                  [problem.layer_names[t.last] for t in terms])
    return works, notes


def ring_cpu_s(cpu, k: int, nbytes: float) -> float:
    """One member's CPU for a ring all-reduce of nbytes over k members: 2(k - 1) chunks of
    nbytes / k sent and as many received (reduce-scatter, then all-gather)."""
    if k < 2 or nbytes <= 0:
        return 0.0
    return 2 * (k - 1) * (cpu.send(nbytes / k) + cpu.recv(nbytes / k))


def _with_message_cpu(works: list[StageWork], cpu, m: int, flush: bool,
                      ring_rows=None, cuts: list[str] | None = None) -> list[StageWork]:
    """Each stage's forward and backward with its messages' CPU added (module docstring,
    `cores`); `cpu`: the options' MessageCpu, per cut where it was measured there (`cuts`:
    each stage's last layer, so cuts[g] names the boundary after stage g). A continuous
    schedule's ring all-reduce runs beside the next step's compute, so its CPU competes for
    the cores: each replica's share per step (the measured CPU of one all-reduce, `ring_rows`
    = allreduce_cpu_measured, read as measured_allreduce_seconds reads times; with no rows,
    ring_cpu_s from the message CPU) is spread over its
    m / k backwards like the step's other work. A flushed ring runs at the barrier on cores
    the stage leaves idle, and its measured time already holds its CPU (`allreduce_measured`
    is timed on an idle host)."""
    out = []
    cuts = cuts or [None] * len(works)
    for g, w in enumerate(works):
        before, after = g > 0, g + 1 < len(works)
        # stage g is downstream of cut g - 1 and upstream of cut g
        fx = ((cpu.recv(works[g - 1].send_forward_bytes, cuts[g - 1], upstream=False)
               if before else 0.0)
              + (cpu.send(w.send_forward_bytes, cuts[g], upstream=True) if after else 0.0))
        bx = ((cpu.recv(w.send_backward_bytes, cuts[g], upstream=True) if after else 0.0)
              + (cpu.send(works[g - 1].send_backward_bytes, cuts[g - 1], upstream=False)
                 if before else 0.0))
        if not flush and w.num_replicas > 1 and w.allreduce_bytes > 0:
            k = w.num_replicas
            ring = measured_allreduce_seconds(ring_rows, k, w.allreduce_bytes)
            bx += (ring_cpu_s(cpu, k, w.allreduce_bytes) if ring is None else ring) * k / m
        f, b, _ = w.replica_seconds[0] if w.replica_seconds else (w.forward_s, w.backward_s, 0)
        shares = {"comm_forward": (f * w.comm_forward + fx) / (f + fx) if f + fx > 0 else 0.0,
                  "comm_backward": (b * w.comm_backward + bx) / (b + bx) if b + bx > 0 else 0.0}
        if w.replica_seconds:  # a mixed stage: each replica's own seconds (unit fields stay 1)
            out.append(replace(w, **shares, replica_seconds=tuple(
                (rf + fx, rb + bx, rs) for rf, rb, rs in w.replica_seconds)))
        else:
            out.append(replace(w, **shares, forward_s=f + fx, backward_s=b + bx))
    return out


def _mixed_work(parts: list[StageWork], counts: tuple[int, ...], m: int,
                flush: bool) -> StageWork:
    """A mixed stage: the primary type's record with unit forward/backward/step seconds and
    each replica's own seconds in replica_seconds (world.Replica applies them); the ring runs
    at the slowest network; share_weights split microbatches so all replicas finish together
    (sharing.finish_together on the DES work: serial = step phase, parallel = m x (F + B))."""
    own = [(w.forward_s, w.backward_s, w.step_s) for w in parts]
    serial = [w.step_s if flush else 0.0 for w in parts]
    parallel = [m * (w.forward_s + w.backward_s) for w in parts]
    _, shares = finish_together(serial, parallel, list(counts))
    per_replica = [i for i, n in enumerate(counts) for _ in range(n)]
    return replace(parts[0], forward_s=1.0, backward_s=1.0, step_s=1.0,
                   allreduce_s=max(w.allreduce_s for w in parts),
                   network_bytes_per_s=min(w.network_bytes_per_s for w in parts),
                   replica_seconds=tuple(own[i] for i in per_replica),
                   share_weights=tuple(shares[i] for i in per_replica),
                   replica_types=tuple(parts[i].type_index for i in per_replica))


def _one_stage(problem: Problem, g: int, t: StageTerms, k: int, link_bw: float, m: int,
               options: DesOptions, flush: bool, pbytes) -> StageWork:
    """The work of stage g on t's type with k replicas (link_bw: to the next stage, 0 last)."""
    net = problem.network_bytes_per_s
    j = t.type_index
    last = link_bw == 0.0
    removed, send_f, send_b = 0.0, 0.0, 0.0
    if options.on("transfers") and not last:
        bb = float(problem.boundary_bytes[t.last])
        wire = WIRE_BYTES[options.quantize]
        removed += (bb / link_bw + problem.latency_s if options.sends_leave_work  # handed off
                    else (1.0 - wire) * bb / link_bw)  # quantized: fewer bytes through the NIC
        send_f = wire * bb * options.forward_boundary_share / m
        send_b = wire * bb * (1.0 - options.forward_boundary_share) / m
    ps_bytes = 0.0
    in_work = ps_odt.odt_holds_ps_side(problem)
    if options.on("ps"):
        layers = _ps_layers(problem, t)
        ps_bytes = problem.batch_size / m * float(sum(problem.sparse_bytes[i] for i in layers))
        if options.ps is not None and layers and in_work:  # "what if": this PS instead
            own = replace(problem, ps=options.ps)
            removed += sum(ps_traffic.stage_s(problem, i, i) - ps_traffic.stage_s(own, i, i)
                           for i in layers)
    P, S = t.parallel_s, t.serial_s
    odt_left = t.odt - removed
    if removed != 0:
        odt_left = max(0.0, odt_left)
        P, S = (t.oct + odt_left, 0.0) if problem.odt_parallel else (t.oct, odt_left)
    w = t.alpha * P / m
    # the default model's per-unit fixed seconds per step (launches, optimizer, framework:
    # cost/dominant.py's F) are work every replica does each step; 0 under the paper model
    step_s = amdahl.serial_time(P, S, t.alpha) + t.fixed_s
    if problem.odt_parallel:
        comm_par = comm_step = odt_left / P if P > 0 else 0.0
    else:
        comm_par, comm_step = 0.0, (odt_left / step_s if step_s > 0 else 0.0)
    if problem.odt_parallel and step_s > 0:  # F is compute, not data transfer
        comm_step *= (step_s - t.fixed_s) / step_s
    forward_s, backward_s = w * (1.0 - options.backward_fraction), w * options.backward_fraction
    comm_bwd = comm_par
    if not flush:
        spread = step_s * k / m
        if backward_s + spread > 0:
            comm_bwd = (backward_s * comm_par + spread * comm_step) / (backward_s + spread)
        backward_s, step_s = backward_s + spread, 0.0
    allreduce_s = stage_bytes = 0.0
    if options.on("allreduce") and k > 1:
        stage_bytes = sum(pbytes[t.first:t.last + 1]) if pbytes is not None else 0.0
        measured = measured_allreduce_seconds(options.allreduce_measured, k, stage_bytes)
        allreduce_s = (measured if measured is not None else allreduce_seconds(
            options.allreduce_algorithm, k, stage_bytes, float(net[j]), problem.latency_s))
        if options.overlap:  # buckets travel during the last backward (engine --overlap)
            allreduce_s = max(0.0, allreduce_s - backward_s)
    return StageWork(
        index=g, type_index=j, num_replicas=k, forward_s=forward_s, backward_s=backward_s,
        step_s=step_s, comm_forward=comm_par, comm_backward=comm_bwd, comm_step=comm_step,
        link_bytes_per_s=link_bw,
        send_forward_bytes=send_f, send_backward_bytes=send_b, allreduce_s=allreduce_s,
        ps_bytes=ps_bytes, ps_in_work=in_work, network_bytes_per_s=float(net[j]),
        allreduce_bytes=float(stage_bytes))
