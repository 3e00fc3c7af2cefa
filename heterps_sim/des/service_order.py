"""Network interfaces served in program order (contention), not by arrival.

A first-come-first-served interface is not monotone: when one message is delayed (a slower
unit, more latency) another can take the interface first, and if that one was on the critical
path the whole run gets shorter (a scheduling anomaly). So here every interface serves a fixed
sequence, the order in which its unit posts the operations, as a training engine posts its
sends and receives: an egress interface sends its unit's messages in the unit's action order,
an ingress interface receives them in the order its unit consumes them. A message starts when
it is sent and both its interfaces have finished what comes before it in their sequences (the
interface may idle for a late message rather than let a later one overtake it: a unit that
waits for input i has no use for input i + 1 yet).

All-reduces: under a flush, a stage's ring takes every member's two interfaces at the member's
step end, between the messages of that step and those of the next (none is in flight then).
In a continuous pipeline the ring overlaps the next step's work; it runs on its own channel
(an engine's collectives have their own stream and communicator) in step order, so rings of
one stage do not overlap, and does not hold the interfaces against boundary messages (holding
them, a ring that waits for its slowest member could hold back a message the member needs to
get there).

Every start and end time is then a max of sums of durations over a fixed graph, so a
nondecreasing function of every duration, latency and ready time: a perturbation can delay a
message, never let it overtake. The sequences follow the action lists, which are fixed by the
plan, schedule and m, so switching another effect on (except `bubbles`, which changes the
action lists) does not change them. Names: ("m", sender id, code, mu) a message, ("r", stage,
step) an all-reduce; resources: 2 x replica id (+ 1 for ingress) an interface, ("ring", stage)
a continuous pipeline's collective channel.
"""

from __future__ import annotations

import simpy

from heterps_sim.core.lanes import B, F


def interface_sequences(world) -> dict:
    """Every interface's (and collective channel's) requests in service order."""
    queues: dict = {}
    last = world.num_stages - 1
    for rep in world.by_id:
        g = rep.stage.index
        ring = world.flush and rep.stage.allreduce_s > 0
        out, into = queues.setdefault(2 * rep.id, []), queues.setdefault(2 * rep.id + 1, [])
        for code, mu in rep.actions:
            if code == F:
                if g < last:
                    out.append(("m", rep.id, F, mu))
                if g > 0:
                    into.append(("m", world.route(g - 1, mu).id, F, mu))
            elif code == B:
                if g > 0:
                    out.append(("m", rep.id, B, mu))
                if g < last:
                    into.append(("m", world.route(g + 1, mu).id, B, mu))
            elif ring:  # a step end (mu is the step)
                out.append(("r", g, mu))
                into.append(("r", g, mu))
    if not world.flush:
        for g, w in enumerate(world.works):
            if w.allreduce_s > 0 and w.num_replicas > 1:
                queues[("ring", g)] = [("r", g, n) for n in range(world.num_steps)]
    return queues


class ServiceOrder:
    """Who goes before whom on every resource, and the events that say a request is done."""

    __slots__ = ("env", "before", "done")

    def __init__(self, env: simpy.Environment, queues: dict):
        """queues: resource -> its requests' names in service order."""
        self.env = env
        self.before: dict[tuple, list[tuple]] = {}
        """name -> the requests just before it on each of its resources."""
        for queue in queues.values():
            for a, b in zip(queue, queue[1:]):
                preds = self.before.setdefault(b, [])
                if a not in preds:
                    preds.append(a)
        self.done: dict[tuple, simpy.Event] = {}

    def _event(self, name: tuple) -> simpy.Event:
        ev = self.done.get(name)
        if ev is None:
            ev = self.done[name] = self.env.event()
        return ev

    def turn(self, name: tuple) -> simpy.Event | None:
        """The event of this request's turn (every request before it on its resources done);
        None when it is first everywhere."""
        preds = self.before.get(name)
        if not preds:
            return None
        events = [self._event(p) for p in preds]
        return events[0] if len(events) == 1 else self.env.all_of(events)

    def finish(self, name: tuple) -> None:
        self._event(name).succeed(self.env.now)


__all__ = ["ServiceOrder", "interface_sequences"]
