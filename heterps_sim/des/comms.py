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
    """This forward's pull (unless prefetched) and, with prefetch, the next forward's; returns
    the event of this pull's service start (what the forward waits for)."""
    served = rep.pulls.pop(mu, None)
    if served is None:
        served = world.env.event()
        world.env.process(ps_request(world, rep, i, mu, True, served))
    if world.ps_spec.prefetch:
        nxt = rep.next_forward[i]
        if nxt >= 0:
            nmu = rep.actions[nxt][1]
            if nmu not in rep.pulls:
                rep.pulls[nmu] = ev = world.env.event()
                world.env.process(ps_request(world, rep, nxt, nmu, True, ev))
    return served


def ps_request(world: World, rep: Replica, i: int, mu: int, pull: bool,
               served: simpy.Event | None = None):
    """Pull (or push) one microbatch's embedding rows: queue at the shards, then hold them for
    the request's service time (cost/ps_traffic.py; x jitter). `served` fires when the
    service starts when the replica's own work already holds the unloaded PS time (the
    default model's odt), so a forward waits only for its turn at the shards; else (the
    paper model's odt) when the service ends.

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
        if served is not None and rep.stage.ps_in_work:
            served.succeed(start)
        yield env.timeout(rep.stage.ps_bytes / ps.num_shards * ps.seconds_per_byte * factor)
    if served is not None and not served.triggered:  # paper: the service is not in the work
        served.succeed(env.now)
    world.ps_ops.append((rep.id, 0, pull, mu, start, env.now))
    world.ps_ops.append((rep.id, -1, pull, mu, issued, env.now))
