"""The shared state of one simulation: replicas, message inboxes, barriers, Resources, records.

Operation and message records live on each Replica, so their order (and every sum over them)
does not depend on the order in which SimPy interleaves the processes: a batched run and an
unbatched one add the same floats in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import simpy

from heterps_sim.des.effects import Preemptions
from heterps_sim.des.fair_cores import FairCores
from heterps_sim.des.options import DesOptions
from heterps_sim.des.service_order import ServiceOrder
from heterps_sim.des.work import StageWork

OPTIMIZER, ALLREDUCE = 2, 3
"""Operation record codes beyond F / B (core/lanes.py)."""


@dataclass(slots=True, eq=False)
class Replica:
    id: int
    stage: StageWork
    index: int
    actions: list
    durations: list
    """Seconds of each action (jitter and straggler factors applied)."""
    send_s: list | None = None
    """transfers: serialisation seconds of the message each action sends (jitter applied)."""
    ps_factor: list | None = None
    preempt: Preemptions | None = None
    slow: bool = False
    """stragglers: this unit runs slower."""
    next_forward: list | None = None
    step_ends: list = field(default_factory=list)
    """Clock at the end of each step-end phase."""
    pulls: dict = field(default_factory=dict)
    pushes: list = field(default_factory=list)
    """This step's pushes (events: served as ps_request says); a flushed step end waits."""
    pending: list = field(default_factory=list)
    """Continuous pipelines: all-reduces not awaited yet (see step_end)."""
    ops: list = field(default_factory=list)
    """(replica id, code, mu or step, start, end) per operation, in this replica's order."""
    messages: list = field(default_factory=list)
    """(from replica, to replica, code, mu, start, end) per explicit transfer it sent."""

    def __post_init__(self) -> None:
        # A mixed stage's StageWork has unit seconds; each replica runs at its own type's.
        if self.stage.replica_seconds:
            own = self.stage.replica_seconds[self.index]
            self.durations = [d * own[code] for d, (code, _) in zip(self.durations, self.actions)]


class World:
    """Shared state: message inboxes and waiters, barriers, Resources, PS records."""

    def __init__(self, env: simpy.Environment, works: list[StageWork], options: DesOptions,
                 latency_s: float, num_microbatches: int, num_steps: int, batched: bool):
        self.env, self.works, self.options, self.latency_s = env, works, options, latency_s
        self.num_microbatches, self.num_steps = num_microbatches, num_steps
        """Microbatches per step; steps simulated (options.num_steps + unmeasured cool-down)."""
        self.batched = batched
        total_microbatches = num_microbatches * num_steps
        self.num_stages = len(works)
        self.replicas: list[list[Replica]] = [[] for _ in works]
        self.inbox = [([None] * total_microbatches, [None] * total_microbatches) for _ in works]
        self.waiting = [([None] * total_microbatches, [None] * total_microbatches) for _ in works]
        self.barriers: dict = {}
        self.rings: dict[tuple[int, int], tuple[float, float]] = {}
        """(stage, step) -> (start, end) of each all-reduce."""
        self.flush = False
        self.noise_from: int | None = None
        """Noise (jitter, preemption) acts on operations of this step on; None: not at all."""
        """Flush schedules (gpipe / 1f1b with bubbles): replicas wait at the step's barrier."""
        self.allreduce_s: list[list[float]] = []
        self.contention = options.on("contention")
        self.transfers = options.on("transfers")
        self.assignments: list[list[list[int]]] | None = None
        """share='speed': [step][stage] -> replica of each microbatch (None: mu mod k)."""
        self.cores = (None if not options.on("cores") else
                      FairCores(env, options.host_cores) if options.core_sharing == "fair"
                      else simpy.Resource(env, capacity=options.host_cores))
        """cores: the one host's CPU cores, shared by every replica's compute."""
        self.order: ServiceOrder | None = None
        """contention: the order the interfaces serve in (des/service_order.py)."""
        self.ps: simpy.Resource | None = None
        """ps: the shards (in lockstep, see ps_request)."""
        self.ps_spec = options.ps
        """ps: the PsOptions in use (the problem's unless the options set them)."""
        self.by_id: list[Replica] = []
        self.ps_ops: list[tuple] = []
        """(replica id, 0 | -1, pull?, mu, start, end): shard service (0) and whole request,
        queueing included (-1)."""

    def deliver(self, stage: int, code: int, mu: int, t: float) -> None:
        self.inbox[stage][code][mu] = t
        waiting = self.waiting[stage][code]
        waiter = waiting[mu]
        if waiter is not None:
            waiting[mu] = None
            waiter.succeed(t)

    def route(self, stage: int, mu: int) -> Replica:
        """The replica of `stage` that runs microbatch mu."""
        reps = self.replicas[stage]
        if self.assignments is None:
            return reps[mu % len(reps)]
        m = self.num_microbatches
        return reps[self.assignments[mu // m][stage][mu % m]]
