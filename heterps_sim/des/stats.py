"""Operation records -> RunResult(source="des") and trace spans.

Measurement: stage g completes step n when its last replica has finished that step's step-end
phase (c^g_n); the first W = warmup steps fill the pipeline and are left out; each stage sustains
(N - W) / (c^g_{N-1} - c^g_{W-1}) steps per second (c_{-1} = 0), and the throughput is B times the
slowest of these. (In steady state every stage completes steps at the same rate. In a finite run
a stage upstream of the bottleneck can run ahead by the schedule's in-flight window, so the
times at which *all* stages are done reflect the bottleneck only once that slack has filled,
which takes long when stages are nearly balanced; the slowest stage's rate is the sustained
one.) When the run has settled over the window (des/window.py: every replica's step ends
repeat every cycle), each replica's own window is measured instead, c^r_{N-1} - c^r_{W-1}, and
the slowest replica paces: replicas that never wait for each other (fewer microbatches than
replicas, no all-reduce) each run at their own rate, and the stage's last replica at the
window's start need not be its last at the end. Per stage, over the window
[c_{W-1}, c_{N-1}], c_n = max_g c^g_n:

    utilisation  busy / elapsed, averaged over the replicas (busy = forwards, backwards,
                 step-end phases, all-reduces a flush schedule waits for, and work redone
                 after a preemption)
    bubble       1 - utilisation: idle share (fill/drain, waiting for slower stages or data)
    exec_time_s  busy seconds of one replica per measured step (ET_g(k) when nothing waits)
    comm_share   communication / (communication + compute) seconds: the odt in the work (PS
                 time included), all-reduces and the messages the stage sends (these overlap
                 compute, so the share says how much data moves, not what it costs)

Noise (jitter, preemption: des/effects.py) makes a run aperiodic, and a rate measured between
two times of the same noisy run is not monotone in anything: a delay that lands before the
window's start and is absorbed by slack before its end reads as a faster rate. So a noisy run
is measured against a reference: the same run without the noise (stragglers and every other
effect kept); the noise acts on the operations of the measured steps on (the pipeline fills
as in the reference), and stage g's window is the reference's, c^g_{N-1} - c^g_{W-1}, plus
the largest delay the noise gave one of its replicas at the end of the last measured step
(noisy minus reference step-end time, per replica); when the reference has settled, each
replica's window runs from the reference's c^r_{W-1} to the noisy run's c^r_{N-1}. Every end time is nondecreasing in every
duration and failure (des/effects.py), so switching jitter or preemption on, or raising
jitter_cv, never raises the throughput at the same seed; what the noise costs is how much
later the stage's replicas end the measured steps. (Per replica, not the stage's last one: a
deterministic effect that shifts one replica's timeline by a constant, such as the first
pulls queueing at the PS, then shifts its reference by as much and costs nothing, as without
noise; comparing the stage's last replicas, noise on another replica could hide the shift
at the end while the reference's start kept it, a shorter window.) docs/concepts/simulator.md says which invariants hold only for the
long-run rate under noise, and why.

extra["stage_compute_s"]: per stage, compute seconds of one replica per measured step
(forwards, backwards, updates, redone work; no communication), which a measured run's compute
is compared with. extra["bubble_fraction"] is the bubble of the most utilised stage:
(s - 1) / (m + s - 1) for s equal stages under gpipe or 1f1b, 0 for a steady continuous
pipeline. Cost: hours = num_samples / throughput / 3600 at the plan's cost per hour; it is
reported (finite) also when the throughput misses the limit, since the plan did run
(feasible=False says it misses).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import chain

import numpy as np

from heterps_sim.core.lanes import B, F
from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.core.result import RunResult, StageStats
from heterps_sim.core.trace import Span
from heterps_sim.cost.reference import fixed_price_per_hour, ps_extra
from heterps_sim.des.options import DesOptions
from heterps_sim.des.world import ALLREDUCE, OPTIMIZER, World

_NAMES = {F: "F", B: "B", OPTIMIZER: "optimizer", ALLREDUCE: "allreduce"}
_CATEGORIES = {F: "compute", B: "compute", OPTIMIZER: "optimizer", ALLREDUCE: "allreduce"}


def _overlap(start: np.ndarray, end: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return np.clip(np.minimum(end, hi) - np.maximum(start, lo), 0.0, None)


def _records(lists, width: int) -> np.ndarray:
    """Per-replica record lists, concatenated in replica order, as one array."""
    rows = list(chain.from_iterable(lists))
    flat = np.fromiter(chain.from_iterable(rows), dtype=np.float64, count=width * len(rows))
    return flat.reshape(len(rows), width)


def _ring_records(world: World) -> list[tuple]:
    """One ALLREDUCE record per member of every all-reduce, in (stage, step) order."""
    return [(m.id, ALLREDUCE, step, start, end)
            for (g, step), (start, end) in sorted(world.rings.items()) for m in world.replicas[g]]


def _stage_ends(world: World, n: int) -> np.ndarray:
    """[stage, step] -> when the stage's last replica finished the step (steps 0..n-1)."""
    return np.array([np.array([rep.step_ends[:n] for rep in reps]).max(axis=0)
                     for reps in world.replicas])


@dataclass(frozen=True)
class Reference:
    """A noisy run's reference (the same run without the noise), as far as measuring needs."""
    stage_s: np.ndarray
    """Per stage, seconds from the end of the last warm-up step to the last measured one's."""
    replica_starts: np.ndarray
    """Per replica, when it finished the last warm-up step."""
    replica_ends: np.ndarray
    """Per replica, when it finished the last measured step."""


def reference(world: World, window) -> Reference:
    n, w = window.end, window.warmup
    per_stage = _stage_ends(world, n)
    starts = per_stage[:, w - 1] if w > 0 else np.zeros(len(per_stage))
    return Reference(per_stage[:, -1] - starts, _replica_ends(world, w), _replica_ends(world, n))


def _replica_ends(world: World, n: int) -> np.ndarray:
    """Per replica (in id order), when it finished step n - 1 (0 for n = 0)."""
    return np.array([rep.step_ends[n - 1] if n > 0 else 0.0 for rep in world.by_id])


def build_result(problem: Problem, plan: Plan, analytic: RunResult, terms, world: World,
                 options: DesOptions, info: dict, window,
                 ref: Reference | None = None) -> RunResult:
    """ref: a noisy run's reference (the same run without the noise); None: measure this
    run's own window."""
    n, w = window.end, window.warmup
    per_stage = _stage_ends(world, n)
    stage_of = np.array([rep.stage.index for reps in world.replicas for rep in reps])
    ends = _replica_ends(world, n)
    if window.per_replica:  # settled: each replica's own long-run rate, the slowest paces
        starts = ref.replica_starts if ref is not None else _replica_ends(world, w)
        seconds = np.full(len(per_stage), -np.inf)
        np.maximum.at(seconds, stage_of, ends - starts)
    elif ref is None:
        starts = per_stage[:, w - 1] if w > 0 else np.zeros(len(per_stage))
        seconds = per_stage[:, -1] - starts
    else:  # the reference's window, each stage later by its replicas' largest delay
        delay = np.full(len(per_stage), -np.inf)
        np.maximum.at(delay, stage_of, ends - ref.replica_ends)
        seconds = ref.stage_s + delay
    slowest = float(np.max(seconds / (n - w)))
    thr = problem.batch_size / slowest if slowest > 0 else math.inf
    done = per_stage.max(axis=0)
    lo, hi = (float(done[w - 1]) if w > 0 else 0.0), float(done[-1])
    span = hi - lo
    ops = _records([*(rep.ops for rep in world.by_id), _ring_records(world)], 5)
    ov = _overlap(ops[:, 3], ops[:, 4], lo, hi)
    s = len(terms)
    key = stage_of[ops[:, 0].astype(np.int64)] * 4 + ops[:, 1].astype(np.int64)
    by = np.bincount(key, weights=ov, minlength=4 * s).reshape(s, 4)  # [stage, code] seconds
    fwd, bwd, opt, ar = by[:, F], by[:, B], by[:, OPTIMIZER], by[:, ALLREDUCE]
    redo = np.zeros(s)
    for reps in world.replicas:
        for rep in reps:
            for _, up, end in rep.preempt.spans if rep.preempt is not None else ():
                redo[rep.stage.index] += max(0.0, min(end, hi) - max(up, lo))
    c_fwd, c_bwd, c_step = (np.array([getattr(wk, a) for wk in world.works])
                            for a in ("comm_forward", "comm_backward", "comm_step"))
    blocking = ar if world.flush else 0.0  # continuous: the ring runs behind the compute
    busy = fwd + bwd + opt + blocking + redo
    comm = fwd * c_fwd + bwd * c_bwd + opt * c_step + ar
    compute = fwd + bwd + opt + redo - (comm - ar)
    msgs = _records((rep.messages for rep in world.by_id), 6)
    if len(msgs):
        np.add.at(comm, stage_of[msgs[:, 0].astype(int)], _overlap(msgs[:, 4], msgs[:, 5], lo, hi))
    ps = _records([world.ps_ops], 6)
    ps = ps[ps[:, 1] < 0] if len(ps) else ps
    ps_s = _overlap(ps[:, 4], ps[:, 5], lo, hi) if len(ps) else np.zeros(0)
    ks = np.array([wk.num_replicas for wk in world.works])
    util = busy / (ks * span) if span > 0 else np.zeros(len(terms))
    stats = _stage_stats(problem, plan, terms, world, busy / ks / (n - w), util, comm, compute)
    per_hour = float(sum(_price(problem, t, k) for t, k in zip(terms, ks)))
    feasible = thr >= problem.throughput_limit * (1 - 1e-12)
    hours = problem.num_samples / thr / 3600.0
    g_max = int(np.argmax(util))
    preempt = [rep.preempt for reps in world.replicas for rep in reps if rep.preempt is not None]
    extra = {**info, "effects": sorted(options.effects), "num_steps": n, "warmup_steps": w,
             "bubble_fraction": float(1.0 - util[g_max]),
             "ps_time_s": float(ps_s.sum() / (n - w)),
             "stage_compute_s": [float(x) for x in compute / ks / (n - w)],
             "preemptions": sum(p.count for p in preempt),
             "stragglers": sum(rep.slow for reps in world.replicas for rep in reps),
             "analytic_throughput": analytic.throughput, **ps_extra(problem)}
    return RunResult(
        source="des", feasible=bool(feasible),
        reason="" if feasible else (
            f"simulated throughput {thr:.6g} samples/s is below the limit "
            f"{problem.throughput_limit:.6g} (busiest: stage {g_max}, "
            f"utilisation {util[g_max]:.2f})"),
        throughput=float(thr), step_time_s=slowest,
        cost_usd=hours * (per_hour + fixed_price_per_hour(problem)),  # + the PS hosts
        hours=hours, cost_per_hour=per_hour, provisioning=analytic.provisioning,
        throughput_limit=problem.throughput_limit, bottleneck_stage=g_max, stages=stats,
        units_per_type=dict(analytic.units_per_type), extra=extra)


def _stage_stats(problem, plan, terms, world, exec_s, util, comm, compute) -> tuple:
    out = []
    for s, t, wk in zip(plan.stages, terms, world.works):
        g = wk.index
        total = comm[g] + compute[g]
        out.append(StageStats(
            layers=s.layers, resource=s.resource, num_replicas=wk.num_replicas,
            oct_s=float(t.oct), odt_s=float(t.odt), alpha=float(t.alpha),
            exec_time_s=float(exec_s[g]),
            throughput=float(problem.batch_size / exec_s[g]) if exec_s[g] > 0 else math.inf,
            utilisation=float(util[g]),
            cost_per_hour=_price(problem, t, wk.num_replicas), replicas=s.replicas,
            bubble=float(1.0 - util[g]), comm_share=float(comm[g] / total) if total > 0 else 0.0))
    return tuple(out)


def _price(problem: Problem, t, k: int) -> float:
    """USD per hour of a stage's units (every type of a mixed stage)."""
    return float(sum(problem.price_per_hour[j] * n for j, n in t.groups(int(k))))


def not_run(problem: Problem, plan: Plan, analytic: RunResult, reason: str, options: DesOptions,
            seed: int) -> RunResult:
    """The record of a plan that was not simulated (the analytic model cannot run it)."""
    return RunResult(
        source="des", feasible=False, reason=reason, throughput=0.0, step_time_s=math.inf,
        cost_usd=math.inf, hours=math.inf, cost_per_hour=analytic.cost_per_hour,
        provisioning=analytic.provisioning, throughput_limit=problem.throughput_limit,
        stages=analytic.stages, units_per_type=dict(analytic.units_per_type),
        extra={"effects": sorted(options.effects), "seed": seed, "events": 0, "simulated": False})


def _type_name(problem: Problem, rep) -> str:
    """The replica's own type (a mixed stage's replicas differ)."""
    types = rep.stage.replica_types
    return problem.type_names[types[rep.index] if types else rep.stage.type_index]


def build_spans(problem: Problem, world: World, m: int) -> tuple[Span, ...]:
    """Trace spans: one track per stage replica, link (replica pair) and PS shard / client."""
    reps = [rep for reps in world.replicas for rep in reps]
    name = [f"stage {r.stage.index} / replica {r.index} ({_type_name(problem, r)})" for r in reps]
    spans = []
    for rid, code, mu, start, end in chain(*(rep.ops for rep in reps), _ring_records(world)):
        step = mu if code >= OPTIMIZER else mu // m
        label = f"{_NAMES[code]}{mu}" if code <= B else _NAMES[code]
        args = {"microbatch": mu, "step": step} if code <= B else {"step": step}
        spans.append(Span(group="stages", track=name[rid], name=label, category=_CATEGORIES[code],
                          start_s=start, end_s=end, args=args))
    for rep in reps:
        for p, up, end in rep.preempt.spans if rep.preempt is not None else ():
            spans.append(Span(group="stages", track=name[rep.id], name="preempted",
                              category="preempted", start_s=p, end_s=up))
            if end > up:
                spans.append(Span(group="stages", track=name[rep.id], name="redo",
                                  category="compute", start_s=up, end_s=end))
    for src, dst, code, mu, start, end in chain.from_iterable(rep.messages for rep in reps):
        a, b = reps[src], reps[dst]
        track = f"link {a.stage.index}->{b.stage.index} / replica {a.index}->{b.index}"
        spans.append(Span(group="links", name=f"send {_NAMES[code]}{mu}", category="transfer",
                          track=track,
                          start_s=start, end_s=end, args={"microbatch": mu, "step": mu // m}))
    shards = world.ps_spec.num_shards
    for rid, shard, pull, mu, start, end in world.ps_ops:
        tracks = ([f"ps shard {s}" for s in range(shards)] if shard >= 0
                  else [f"ps client / {name[rid]}"])
        for track in tracks:
            spans.append(Span(group="ps", track=track, name="pull" if pull else "push",
                              category="ps", start_s=start, end_s=end,
                              args={"microbatch": mu, "replica": name[rid]}))
    return tuple(spans)
