"""Data movement: boundary messages, all-reduce rings under contention, parameter-server requests.

    send           hands a finished operation's output to the next / previous stage: at once
                   (transfers folded into the work), after bytes / bandwidth + latency (transfers),
                   or through `transfer` (contention).
    transfer       holds the sender's egress and the receiver's ingress interface, sends,
                   frees them, then the latency passes and the message is delivered.
    ring_with_interfaces  an all-reduce under contention: every member's two interfaces.
    ps_request     queues on the PS shards (a Resource) and holds them for its service time;
                   the forward that pulled waits for the service to start.

Interfaces (contention) serve in program order, not by arrival (des/service_order.py: a message waits until
what comes before it in its interfaces' sequences is done), so a delay never lets a message
overtake another.
"""

from __future__ import annotations

import simpy

from heterps_sim.des.world import Replica, World


def send(world: World, rep: Replica, i: int, to_stage: int, code: int, mu: int, t: float) -> None:
    """Hand the output of action i (finished at t) to stage `to_stage`."""
    if not world.transfers:
        world.deliver(to_stage, code, mu, t)
        return
    to = world.route(to_stage, mu)
    ser = rep.send_s[i]
    if world.contention:
        world.env.process(transfer(world, rep.id, to.id, to_stage, code, mu, ser))
        return
    delay = ser + world.latency_s
    rep.messages.append((rep.id, to.id, code, mu, t, t + delay))
    if world.batched:
        world.deliver(to_stage, code, mu, t + delay)
    else:
        world.env.timeout(delay).callbacks.append(
            lambda ev: world.deliver(to_stage, code, mu, ev.env.now))


def transfer(world: World, src: int, dst: int, to_stage: int, code: int, mu: int, ser: float):
    """A message over two network interfaces (contention): its turn, send, latency, deliver."""
    env = world.env
    name = ("m", src, code, mu)
    turn = world.order.turn(name)
    if turn is not None:
        yield turn
    start = env.now
    yield env.timeout(ser)
    world.order.finish(name)
    if world.latency_s > 0:
        yield env.timeout(world.latency_s)
    world.by_id[src].messages.append((src, dst, code, mu, start, env.now))
    world.deliver(to_stage, code, mu, env.now)


def ring_with_interfaces(world: World, key: tuple[int, int], d: float, done: simpy.Event):
    """The ring under contention: its turn (a flush: on every member's two interfaces; else on
    the stage's collective channel), then run."""
    env = world.env
    name = ("r", *key)
    turn = world.order.turn(name)
    if turn is not None:
        yield turn
    start = env.now
    yield env.timeout(d)
    world.order.finish(name)
    world.rings[key] = (start, env.now)
    done.succeed(env.now)


def start_pulls(world: World, rep: Replica, i: int, mu: int) -> simpy.Event:
    """This forward's pull, unless prefetched; returns the event the forward waits for (its
    service start or end, ps_request)."""
    served = rep.pulls.pop(mu, None)
    if served is None:
        served = world.env.event()
        world.env.process(ps_request(world, rep, i, mu, True, served))
    return served


def prefetch_next(world: World, rep: Replica, i: int, inbox: list | None) -> None:
    """After forward i computed, queue the pull of this replica's next forward of the same step
    when its ids are here (as the engine does, runtime/stage.py): always at stage 0, past it
    once its boundary message arrived (`inbox`: the stage's forward inbox). A step's rows are
    read only after the step before ended, its pushes in, so no pull crosses a step end."""
    nxt = rep.next_forward[i]
    if nxt >= 0:
        nmu = rep.actions[nxt][1]
        if nmu not in rep.pulls and (inbox is None or inbox[nmu] is not None):
            rep.pulls[nmu] = ev = world.env.event()
            world.env.process(ps_request(world, rep, nxt, nmu, True, ev))


def push(world: World, rep: Replica, i: int, mu: int) -> None:
    """Backward i's gradient rows to the shards (issued as the backward starts when the work
    holds the PS's unloaded time, as it ends otherwise); a flushed step ends only once they are in
    (the engine waits for its pushes' acknowledgements before the step's end, ps/client.py),
    so the event, fired at the service's end, is kept."""
    done = world.env.event()
    rep.pushes.append(done)
    world.env.process(ps_request(world, rep, i, mu, False, done))


def ps_request(world: World, rep: Replica, i: int, mu: int, pull: bool,
               served: simpy.Event | None = None):
    """Pull (or push) one microbatch's embedding rows: queue at the shards, then hold them for
    the request's service time (cost/ps_traffic.py; x jitter). A pull's `served` fires when
    the service starts when the replica's own work already holds the unloaded PS time (the
    default model's odt), so a forward waits only for its turn at the shards; else (the
    paper model's odt) when the service ends. A push's fires when its service ends.

    The request is split evenly over the shards, which all receive every request at the same
    moment and serve FIFO with equal parts: they stay in lockstep, so one Resource (`ps`)
    stands for all of them exactly, with one event per request instead of one per shard.
    """
    env, ps = world.env, world.ps_spec
    issued = env.now
    factor = rep.ps_factor[2 * i + (not pull)] if rep.ps_factor is not None else 1.0
    with world.ps.request() as req:
        yield req
        start = env.now
        if served is not None and pull and rep.stage.ps_in_work:
            served.succeed(start)
        yield env.timeout(rep.stage.ps_bytes / ps.num_shards * ps.seconds_per_byte * factor)
    if served is not None and not served.triggered:  # (paper pulls, every push: its end)
        served.succeed(env.now)
    world.ps_ops.append((rep.id, 0, pull, mu, start, env.now))
    world.ps_ops.append((rep.id, -1, pull, mu, issued, env.now))
