"""The simulated actors: small SimPy generator functions over one shared `World`.

    replica        walks its action list (core/lanes.py): waits for the microbatch's input
                   (activation from the stage before, gradient from the stage after), computes,
                   hands the output to the next / previous stage; at each step end: all-reduce
                   barrier (allreduce effect) and the non-splitting work.
    on_core        (cores) a computation's CPU part waits for one of the host's cores
    step_end       the stage's all-reduce barrier (the last replica to arrive starts the ring;
                   see step_end for who waits for it when), then the non-splitting work.
    (des/comms.py: messages, rings under contention, parameter-server requests)

Time is kept two ways with the same arithmetic. Unbatched (the reference): every operation is a
SimPy timeout and a message exists only from its arrival time on. Batched (`DesOptions.batch`,
when no Resource is modelled): a replica keeps its own clock and runs ahead through every
operation whose input time is already known; outputs are delivered at once with their arrival
time. Both compute start = max(ready, input arrival), end = start + duration, arrival = end +
delay with the same floats, so both give the same timeline (tests/sim/des/test_des_batching.py).
"""

from __future__ import annotations

import simpy

from heterps_sim.core.lanes import B, F
from heterps_sim.des.comms import prefetch_next, push, ring_with_interfaces, send, start_pulls
from heterps_sim.des.effects import delay_to
from heterps_sim.des.world import OPTIMIZER, Replica, World


def replica(world: World, rep: Replica):
    """One replica of one stage, walking its action list (hot loop: locals bound up front)."""
    env, batched, record, rid = world.env, world.batched, rep.ops.append, rep.id
    timeout, event, durations, preempt = env.timeout, env.event, rep.durations, rep.preempt
    g = rep.stage.index
    first, last = g == 0, g == world.num_stages - 1
    inbox_f, inbox_b = world.inbox[g]
    waiting_f, waiting_b = world.waiting[g]
    direct = not world.transfers  # outputs land in the neighbour's inbox at once (inlined)
    nxt = g + 1 if not last else g  # (unused when there is no next / previous stage)
    prv = g - 1 if not first else g
    next_inbox, next_waiting = world.inbox[nxt][F], world.waiting[nxt][F]
    prev_inbox, prev_waiting = world.inbox[prv][B], world.waiting[prv][B]
    ps = rep.stage.ps_bytes > 0
    prefetch = ps and world.ps_spec.prefetch
    clock, worked = 0.0, False
    for i, (code, mu) in enumerate(rep.actions):
        if code == F:
            if ps and first:
                pull = start_pulls(world, rep, i, mu)
            a = clock if first else inbox_f[mu]
            if a is None:
                waiting_f[mu] = ev = event()
                a = yield ev
            if ps:  # (past stage 0 the ids arrive with the boundary message: pull then)
                yield pull if first else start_pulls(world, rep, i, mu)
        elif code == B:
            a = clock if last else inbox_b[mu]
            if a is None:
                waiting_b[mu] = ev = event()
                a = yield ev
            if ps and rep.stage.ps_in_work:  # (the work holds the push's service: it runs
                push(world, rep, i, mu)       # beside the backward, as a pull's beside a forward)
        else:
            clock = yield from step_end(world, rep, i, mu, clock, worked)
            worked = False
            continue
        # Unbatched, the clock equals env.now here: a message exists from its arrival on, so
        # max(a, clock) is the time this replica resumed (a PS pull may have held it longer).
        start = env.now if ps else (a if a > clock else clock)
        d = durations[i]
        if preempt is not None:
            start = preempt.start(start, d, i)
            if not batched and start > env.now:
                yield timeout(delay_to(env.now, start))
        if world.cores is not None:  # (never batched)
            start = yield from on_core(world, rep, d)
            clock = env.now
        else:
            if not batched:
                yield timeout(d)
            clock = start + d
        worked = True
        record((rid, code, mu, start, clock))
        if code == F:
            if prefetch:
                prefetch_next(world, rep, i, None if first else inbox_f)
            if last:
                pass
            elif direct:
                next_inbox[mu] = clock
                waiter = next_waiting[mu]
                if waiter is not None:
                    next_waiting[mu] = None
                    waiter.succeed(clock)
            else:
                send(world, rep, i, g + 1, F, mu, clock)
        else:
            if first:
                pass
            elif direct:
                prev_inbox[mu] = clock
                waiter = prev_waiting[mu]
                if waiter is not None:
                    prev_waiting[mu] = None
                    waiter.succeed(clock)
            else:
                send(world, rep, i, g - 1, B, mu, clock)
            if ps and not rep.stage.ps_in_work:
                push(world, rep, i, mu)


def step_end(world: World, rep: Replica, i: int, step: int, clock: float, worked: bool):
    """All-reduce (when on) then the non-splitting work of one step; returns the new clock.

    Flush schedules wait for this step's all-reduce here. A continuous pipeline cannot: the
    replicas' step ends fall at different places in the 1F1B stream, and a replica held at one
    may owe forwards of later steps that another replica needs to reach it (a deadlock). There
    the all-reduce of step n overlaps what follows, and a replica waits for it at its next step
    end that follows one of its own backwards (`worked`): usually the end of step n + 1 (one
    step of gradient staleness, as asynchronous pipelines allow), later when the replica has no
    microbatch in the steps between. By then it has run every forward up to the rounds that
    step n's backwards depend on, so the wait cannot close a cycle. The last step waits for all.
    """
    env = world.env
    if rep.stage.allreduce_s > 0:
        done = _arrive(world, rep, step, clock)
        if world.flush:
            waits = [done]
        else:
            waits = []
            if worked or step == world.num_steps - 1:
                waits, rep.pending = rep.pending, []
            rep.pending.append(done)
            if step == world.num_steps - 1:
                waits, rep.pending = waits + rep.pending, []
        for ev in waits:
            end = ev.value if ev.triggered else (yield ev)
            if end > clock:
                clock = end
    d = rep.durations[i]
    if d > 0 or rep.preempt is not None:
        start = env.now if not world.batched else clock
        if rep.preempt is not None:
            start = rep.preempt.start(start, d, i)
            if not world.batched and start > env.now:
                yield env.timeout(delay_to(env.now, start))
        if world.cores is not None and d > 0:
            start = yield from on_core(world, rep, d)
            clock = env.now
        else:
            if not world.batched and d > 0:
                yield env.timeout(d)
            clock = start + d
        if d > 0:
            rep.ops.append((rep.id, OPTIMIZER, step, start, clock))
    if rep.pushes:  # the step's gradient rows are in before it ends (flushed: the next step
        # reads them; continuous: kept, as the engine's pushes stay in flight across steps)
        if world.flush:
            for ev in rep.pushes:
                end = ev.value if ev.triggered else (yield ev)
                clock = max(clock, end)
        rep.pushes = []
    if world.flush and len(world.by_id) > 1:  # a flush: step n + 1 starts on an empty pipeline
        done = _flush_barrier(world, step, clock)
        end = done.value if done.triggered else (yield done)
        clock = max(clock, end)
    rep.step_ends.append(clock)
    if rep.preempt is not None:
        rep.preempt.end_step()
    return clock


def _flush_barrier(world: World, step: int, clock: float) -> simpy.Event:
    """Flush schedules: every replica of every stage ends step n together, when the last one
    has (replicas that got no microbatch of the step, m < k, cannot run a later step ahead)."""
    bar = world.barriers.get(("flush", step))
    if bar is None:
        bar = world.barriers[("flush", step)] = [0, clock, world.env.event()]
    bar[0] += 1
    bar[1] = max(bar[1], clock)
    if bar[0] == len(world.by_id):
        del world.barriers[("flush", step)]
        end, done = bar[1], bar[2]
        if world.batched:
            done.succeed(end)
        else:
            world.env.timeout(delay_to(world.env.now, end)).callbacks.append(
                lambda _ev: done.succeed(end))
    return bar[2]


def on_core(world: World, rep: Replica, d: float):
    """cores: run d seconds of work whose CPU part (cpu_share x d) holds one of the host's
    cores, queueing FIFO for it (or sharing them all, core_sharing="fair"); the rest (an
    emulated type's dilation) sleeps without one.
    Returns when the work started (got its core; fair: its work's length before it ended)."""
    shares = world.options.cpu_share
    cpu = d * (1.0 if shares is None else shares[rep.stage.index])
    if world.options.core_sharing == "fair":  # starts now, at the shared speed
        yield world.cores.run(cpu)
        # Recorded as its work's length ending when it completes. Slowed by the sharing, it
        # waited for the cores as a FIFO operation waits before it starts; a replica's
        # compute seconds (stats' stage_compute_s, validate's run speed) are its work, not
        # that wait (counted as compute, validate read the machine as slower than it ran).
        start = world.env.now - cpu
    else:
        with world.cores.request() as req:
            yield req
            start = world.env.now
            yield world.env.timeout(cpu)
    if d > cpu:
        yield world.env.timeout(d - cpu)
    return start


def _arrive(world: World, rep: Replica, step: int, clock: float) -> simpy.Event:
    """Register at the stage's step barrier; the last to arrive starts the ring. Returns the
    event that carries the all-reduce's end time."""
    g = rep.stage.index
    key = (g, step)
    bar = world.barriers.get(key)
    if bar is None:
        bar = world.barriers[key] = [0, clock, world.env.event()]
    bar[0] += 1
    if clock > bar[1]:
        bar[1] = clock
    if bar[0] == rep.stage.num_replicas:
        del world.barriers[key]
        d, start, done = world.allreduce_s[g][step], bar[1], bar[2]
        if world.contention:
            world.env.process(ring_with_interfaces(world, key, d, done))
        else:
            end = start + d
            world.rings[key] = (start, end)
            if world.batched:
                done.succeed(end)
            else:  # unbatched, the last arrival is now: the ring ends at now + d
                world.env.timeout(d).callbacks.append(lambda _ev: done.succeed(end))
    return bar[2]
