"""`simulate(problem, plan, seed=, options=)`: provision, build the world, run SimPy, report.

Replicas: a stage with `num_replicas` uses exactly that many; the others get what
`cost.evaluate_plan(problem, plan, mode="least")` provisions (the fewest units meeting the
throughput limit under the analytic model). A plan the analytic model cannot run (a layer that
does not fit its type, a cap exceeded, a stage no number of units brings to the limit) is
returned as RunResult(source="des", feasible=False, reason=...) without simulating.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import simpy

from heterps_sim.core import sharing
from heterps_sim.core.asynchrony import synchronous as runs_synchronously
from heterps_sim.core.lanes import (
    STEP,
    F,
    default_microbatches,
    num_lanes,
    replica_actions,
    stage_orders,
)
from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.core.result import RunResult
from heterps_sim.core.trace import Span
from heterps_sim.cost import ps_traffic
from heterps_sim.cost.reference import StageTerms, evaluate_plan, plan_stages, ps_cap
from heterps_sim.des.effects import (
    ALLREDUCE,
    JITTER,
    MESSAGE,
    NOISE,
    PS_REQUEST,
    Preemptions,
    choose_stragglers,
    jitter_factors,
    operation_keys,
)
from heterps_sim.des.options import DesOptions, PsOptions
from heterps_sim.des.processes import replica
from heterps_sim.des.service_order import ServiceOrder, interface_sequences
from heterps_sim.des.stats import build_result, build_spans, not_run, reference
from heterps_sim.des.window import SETTLE_TRIES, choose_window, settled
from heterps_sim.des.work import StageWork, stage_work
from heterps_sim.des.world import Replica, World


@dataclass(frozen=True)
class DesRun:
    result: RunResult
    spans: tuple[Span, ...]
    """Empty when simulate(..., record_spans=False)."""
    events: int
    """SimPy events processed (scheduled and popped from the event queue)."""


def simulate(problem: Problem, plan: Plan, *, seed: int = 0, options: DesOptions | None = None,
             record_spans: bool = True) -> DesRun:
    """Simulate `options.num_steps` training steps of `plan`; deterministic per seed.

    Stages without num_replicas get cost.evaluate_plan(problem, plan, "least")'s units.
    record_spans=False skips building trace spans (faster; the result is the same).
    Raises cost.PlanError when the plan does not cover the problem's layers (bad input).
    """
    options = options or DesOptions()
    terms = plan_stages(problem, plan)
    if options.share == "speed" and not (options.on("bubbles") and
                                         (options.schedule or plan.schedule) != "async"):
        raise ValueError("share='speed' needs a flush schedule: gpipe or 1f1b with the "
                         "bubbles effect on")
    if options.cpu_share is not None and len(options.cpu_share) != len(plan.stages):
        raise ValueError(f"cpu_share has {len(options.cpu_share)} entries for "
                         f"{len(plan.stages)} stages")
    analytic = _fixed_units(problem, plan, evaluate_plan(problem, plan, mode="least"))
    reason = _cannot_run(problem, terms, analytic)
    if reason:
        return DesRun(not_run(problem, plan, analytic, reason, options, seed), (), 0)
    ks = [s.num_replicas for s in analytic.stages]
    schedule = options.schedule or plan.schedule
    m = options.num_microbatches or (plan.num_microbatches if plan.num_microbatches > 1
                                     else default_microbatches(ks, len(ks), problem.batch_size))
    # An async plan of staleness 0 (one stage, m >= its units: core/asynchrony.py) trains
    # synchronously: the engine's step t waits for update t - 1 (runtime/versions.py: its
    # all-reduce) and for step t - 1's pushes on the PS before its pulls, so no step overlaps
    # another. It runs as a flushed stage in the continuous stream's order: 1F1B.
    synchronous = schedule == "async" and runs_synchronously(ks, m)
    flush = options.on("bubbles") and (schedule != "async" or synchronous)
    order = "1f1b" if synchronous and flush else schedule
    works, notes = stage_work(problem, terms, ks, m, options, flush)
    if m > problem.batch_size:
        notes.append(f"{m} microbatches of a {problem.batch_size}-sample batch: under one sample each")
    uses_resources = (options.on("contention") or options.on("cores")
                      or any(w.ps_bytes > 0 for w in works))
    lanes = num_lanes(ks, flush)
    window = choose_window(options, ks, m, flush)
    setup = (problem, works, options, order, flush, lanes, m, seed, uses_resources)
    world, events = _run_world(*setup, window, noise=False)
    for attempt in range(SETTLE_TRIES + 1):  # a window in the start-up transient: later
        measure = settled(np.array([rep.step_ends for rep in world.by_id]), window)
        if measure is not None or attempt == SETTLE_TRIES:
            window = measure or window
            break
        window = window.later()
        world, events = _run_world(*setup, window, noise=False)
    ref_world = None
    if options.effects & NOISE:  # the window without the noise (des/stats.py: how noise is measured)
        ref_world = world
        world, events = _run_world(*setup, window, noise=True)
    info = {"schedule": schedule, "flush": flush, "num_microbatches": m, "lanes": lanes,
            "steps_simulated": window.total, "seed": seed, "events": events,
            "batched": world.batched, "notes": notes}
    result = build_result(problem, plan, analytic, terms, world, options, info, window,
                          None if ref_world is None else reference(ref_world, window))
    spans = build_spans(problem, world, m) if record_spans else ()
    return DesRun(result, spans, events)


def _run_world(problem: Problem, works: list[StageWork], options: DesOptions, schedule: str,
               flush: bool, lanes: int, m: int, seed: int, uses_resources: bool, window,
               noise: bool) -> tuple[World, int]:
    """Build the world, run SimPy to the end; returns the world and the events processed.
    noise=False leaves jitter and preemption out (the reference run of a noisy one)."""
    env = simpy.Environment()
    world = World(env, works, options, problem.latency_s, m, window.total,
                  batched=options.batch and not uses_resources)
    world.flush = flush
    world.noise_from = window.warmup if noise else None
    world.ps_spec = options.ps or PsOptions(**ps_traffic.problem_ps(problem).model_dump())
    _populate(world, works, schedule, flush, lanes, seed)
    for reps in world.replicas:
        for rep in reps:
            env.process(replica(world, rep))
    events = _run(env)
    _check_finished(world)
    return world, events


def _run(env: simpy.Environment) -> int:
    """Run until no event is left; returns how many were processed."""
    counter = getattr(env, "_eid", None)  # SimPy 4 numbers every scheduled event
    if counter is not None:
        env.run()
        return next(counter)  # the queue ran empty: every scheduled event was processed
    count = 0
    while env.peek() != float("inf"):  # public API, slower
        env.step()
        count += 1
    return count


def _fixed_units(problem: Problem, plan: Plan, analytic: RunResult) -> RunResult:
    """The analytic result with the plan's own units where every stage fixes them.

    The analytic provisioning stops at the parameter server's cap (the limit above what its
    shards can move) before it reads the units, so such a result has none; a plan whose every
    stage fixes its units runs anyway, as one short of the limit by its stage times does: its
    units and analytic numbers are those under a limit the cap allows, its verdict the real one.
    """
    fixed = all(s.num_replicas is not None for s in plan.stages)
    if not fixed or all(s.num_replicas >= 1 for s in analytic.stages) or not analytic.reason:
        return analytic
    cap = ps_cap(problem)
    if not problem.throughput_limit > cap:
        return analytic
    under = evaluate_plan(problem.with_limit(0.5 * cap), plan, mode="least")
    if any(s.num_replicas < 1 for s in under.stages):
        return analytic
    return replace(under, feasible=False, reason=analytic.reason,
                   throughput_limit=problem.throughput_limit, cost_usd=math.inf)


def _cannot_run(problem: Problem, terms: list[StageTerms], analytic: RunResult) -> str:
    if any(s.num_replicas < 1 for s in analytic.stages):
        return analytic.reason
    for t in terms:
        if not problem.runnable[t.first:t.last + 1, t.type_index].all():
            return analytic.reason
    used: dict[int, int] = {}
    for t, s in zip(terms, analytic.stages):
        used[t.type_index] = used.get(t.type_index, 0) + s.num_replicas
    for j, n in used.items():
        if problem.available[j] is not None and n > problem.available[j]:
            return analytic.reason
    return ""


def _populate(world: World, works: list[StageWork], schedule: str, flush: bool, lanes: int,
              seed: int) -> None:
    """Create every replica with its actions and pre-drawn durations, and the Resources."""
    opts, n_steps, m = world.options, world.num_steps, world.num_microbatches
    units = sum(w.num_replicas for w in works)
    slow = (choose_stragglers(seed, units, opts.straggler_fraction, opts.straggler_draw,
                              tuple(w.num_replicas for w in works))
            if opts.on("stragglers") else frozenset())
    noisy = world.noise_from is not None
    jitter = opts.jitter_cv if noisy and opts.on("jitter") else 0.0
    factors = _slowdowns(works, slow, opts)
    if opts.share == "speed":
        world.assignments = _speed_assignments(works, factors, m, n_steps)
    rid = 0
    for g, w in enumerate(works):
        base = stage_orders(schedule, flush, g, world.num_stages, m, n_steps, lanes)
        for r in range(w.num_replicas):
            if world.assignments is None:
                actions = replica_actions(base, flush, w.num_replicas, r, m, n_steps, lanes)
            else:
                actions = [a for n in range(n_steps) for a in sharing.step_actions(
                    schedule, g, world.num_stages, r, world.assignments[n][g], n)]
            rep = _make_replica(world, rid, w, r, actions, jitter, factors[rid], seed)
            world.replicas[g].append(rep)
            world.by_id.append(rep)
            rid += 1
    steps = np.arange(n_steps)
    world.allreduce_s = [
        (w.allreduce_s * _measured(jitter_factors(seed, jitter, ALLREDUCE, g, steps), steps,
                                   world.noise_from)).tolist()
        for g, w in enumerate(works)]
    env = world.env
    if world.contention:
        world.order = ServiceOrder(env, interface_sequences(world))
    if any(w.ps_bytes > 0 for w in works):
        world.ps = simpy.Resource(env, capacity=1)


def _slowdowns(works: list[StageWork], stragglers: frozenset, opts: DesOptions) -> list[float]:
    """Duration factor of every replica: drawn stragglers and the known slow_replicas."""
    out, rid = [], 0
    for g, w in enumerate(works):
        for r in range(w.num_replicas):
            f = opts.straggler_slowdown if rid in stragglers else 1.0
            for sg, sr, sf in opts.slow_replicas:
                if (sg, sr) == (g, r):
                    f *= sf
            out.append(f)
            rid += 1
    return out


def _speed_assignments(works: list[StageWork], factors: list[float], m: int,
                       n_steps: int) -> list[list[list[int]]]:
    """[step][stage] -> replica of each microbatch: equal in step 0 (nothing measured yet, as
    in the engine), then in proportion to the speeds the engine measures: a mixed stage's
    finish-together shares (StageWork.share_weights; 1 each for one type) / slowdown."""
    equal, speed, rid = [], [], 0
    for w in works:
        k = w.num_replicas
        weights = w.share_weights or (1.0,) * k
        equal.append(sharing.assignment(sharing.counts([1.0] * k, m)))
        speed.append(sharing.assignment(sharing.counts(
            [s / f for s, f in zip(weights, factors[rid:rid + k], strict=True)], m)))
        rid += k
    return [equal] + [speed] * (n_steps - 1)


def _make_replica(world: World, rid: int, w: StageWork, r: int, actions: list, jitter: float,
                  slowdown: float, seed: int) -> Replica:
    """A replica with its durations; every random factor is keyed by the operation it
    stretches (des/effects.py), so it does not depend on the order of the action list, and
    the noise acts on the measured steps on (world.noise_from)."""
    opts = world.options
    per_code = (w.forward_s, w.backward_s, w.step_s)
    durations = [per_code[c] for c, _ in actions]
    codes = keys = steps = None
    straggler = slowdown != 1.0
    preempt = opts.on("preemption") and world.noise_from is not None
    if jitter > 0 or straggler or world.transfers or w.ps_bytes > 0 or preempt:
        codes = np.array([c for c, _ in actions], dtype=np.int64)
        mus = np.array([mu for _, mu in actions], dtype=np.int64)
        keys = operation_keys(codes, mus)
        steps = np.where(codes == STEP, mus, mus // world.num_microbatches)
        factor = 1.0
        if jitter > 0:
            factor = _measured(jitter_factors(seed, jitter, JITTER, rid, keys), steps,
                               world.noise_from)
        durations = (np.array(durations) * factor * slowdown).tolist()
    rep = Replica(id=rid, stage=w, index=r, actions=actions, durations=durations, slow=straggler)
    if world.transfers:
        rep.send_s = _send_seconds(world, w.index, codes, jitter, seed, rid, keys, steps)
    if w.ps_bytes > 0:
        if jitter > 0:  # [2 i]: the pull before action i, [2 i + 1]: the push after it
            rep.ps_factor = _measured(
                jitter_factors(seed, jitter, PS_REQUEST, rid, keys[:, None], np.array([[0, 1]])),
                steps[:, None], world.noise_from).ravel().tolist()
        rep.next_forward = _next_forward(codes)
    if preempt:
        rep.preempt = Preemptions(seed, rid, opts.preemption_rate_per_hour, opts.restart_delay_s,
                                  keys, steps >= world.noise_from)
    return rep


def _measured(factors: np.ndarray, steps: np.ndarray, noise_from: int) -> np.ndarray:
    """Noise factors on the operations of the measured steps on, 1 before (the pipeline fills
    without noise; des/stats.py)."""
    if noise_from is None:  # (no noise: the factors are 1)
        return factors
    return np.where(steps >= noise_from, factors, 1.0)


def _send_seconds(world: World, g: int, codes: np.ndarray, jitter: float, seed: int, rid: int,
                  keys: np.ndarray, steps: np.ndarray) -> list:
    """Serialisation seconds of the message each action sends (0 where it sends none)."""
    works = world.works
    fwd = works[g].send_forward_bytes / works[g].link_bytes_per_s if g + 1 < len(works) else 0.0
    bwd = works[g - 1].send_backward_bytes / works[g - 1].link_bytes_per_s if g > 0 else 0.0
    seconds = np.array([fwd, bwd, 0.0])[codes]
    if jitter > 0:
        seconds = seconds * _measured(jitter_factors(seed, jitter, MESSAGE, rid, keys), steps,
                                      world.noise_from)
    return seconds.tolist()


def _next_forward(codes: np.ndarray) -> list[int]:
    """Index of the next forward of the same step after each action (-1: none), for PS
    prefetch: a step end stops it, as no pull crosses a step end."""
    out, nxt = [-1] * len(codes), -1
    for i in range(len(codes) - 1, -1, -1):
        if codes[i] == STEP:
            nxt = -1
        out[i] = nxt
        if codes[i] == F:
            nxt = i
    return out


def _check_finished(world: World) -> None:
    steps = world.num_steps
    stuck = [(rep.stage.index, rep.index) for reps in world.replicas for rep in reps
             if len(rep.step_ends) != steps]
    if stuck:
        raise RuntimeError(f"simulation stalled (a bug): replicas {stuck[:5]} did not finish")

