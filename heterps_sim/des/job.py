"""A whole training job on units that can be reclaimed: the step-level simulator's steps,
checkpoints, preemptions, replacements and the bill, in SimPy.

The step-level simulator (simulator.py) runs a few steps of a plan; a job runs tens of
thousands, over hours, and spot units are reclaimed at rates per hour. So the job advances by
checkpoint segments whose step durations are drawn from the step-level simulator's (jitter and
stragglers included), and the preemptions interrupt it:

    job         launch (startup_s, billed) -> segments of `checkpoint_every` steps, each followed
                by a checkpoint write (checkpoint_s) except the last -> the last step's end
    reclaims    a Poisson process per unit (its type's rate per hour while it is held) and per
                zone (an outage reclaims every unit of the zone at once); a replacement is
                requested at once and is ready restart_s later (provisioning + loading the
                checkpoint); the job is down until every replacement is ready, so a reclaim
                while it is down moves its end to restart_s after that one
    lost work   the steps since the last checkpoint, unless the notice (the warning a cloud
                gives before it reclaims: 120 s on AWS) fits an emergency checkpoint: then only
                the step in progress is lost, and the job resumes once the write and the
                replacement are done
    the bill    every unit is billed from its launch to its reclaim (notice included: the old
                unit runs until the reclaim, the replacement from its request) or the job's end,
                each lease rounded up to the billing granule, at its price (a spot price trace:
                the price in force at each moment); hosts that are never reclaimed (the priced
                PS) are billed for the whole job

Why this is exact for the test's oracle: with one reclaim rate L (the units' rates summed; a
replacement has its predecessor's rate, so L never changes), a segment of W seconds (its steps
and its checkpoint) completes after e^(L R) (e^(L W) - 1) / L seconds on average (R: restart_s),
Daly's formula for a restart that starts over when a failure hits it (here: the job waits
restart_s after the LAST reclaim), tests/sim/des/test_job.py checks the mean of many seeds
against it. Left out: a reclaim during the launch, capacity that is not there when a replacement
is requested, and a slower replacement type.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import simpy

from heterps_sim.cost.dominant import billed_hours
from heterps_sim.des.availability import Availability

MAX_SLOWDOWN = 1000.0
"""A job whose wall time passes this many times its uninterrupted time is stopped: its reclaims
outpace its restarts (Daly's expected time grows as e^(rate x restart_s)), and no answer would
come in any useful time."""


class JobTooLong(ValueError):
    """The job would not finish: reclaims outpace restarts."""


@dataclass(frozen=True, slots=True)
class PriceTrace:
    """A piecewise-constant price (USD per hour) from each of `times_s` (seconds since the job's
    launch, increasing, the first 0) until the next."""

    times_s: tuple[float, ...]
    usd_per_hour: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.times_s or self.times_s[0] != 0.0 or len(self.times_s) != len(self.usd_per_hour):
            raise ValueError("a price trace starts at 0 s with one price per time")
        if any(b <= a for a, b in zip(self.times_s, self.times_s[1:])):
            raise ValueError("a price trace's times must increase")
        if any(not math.isfinite(p) or p < 0.0 for p in self.usd_per_hour):
            raise ValueError("a price trace's prices must be finite and >= 0")

    def cost(self, start_s: float, end_s: float) -> float:
        """USD of one unit held from start_s to end_s."""
        total = 0.0
        edges = list(self.times_s[1:]) + [math.inf]
        for t0, t1, price in zip(self.times_s, edges, self.usd_per_hour):
            lo, hi = max(start_s, t0), min(end_s, t1)
            if hi > lo:
                total += price * (hi - lo) / 3600.0
        return total


@dataclass(frozen=True, slots=True)
class Lease:
    """`count` units of one type rented one way (on demand: no reclaims)."""

    name: str
    count: int
    price_per_hour: float
    """USD per hour per unit (the spot price for spot units)."""
    reclaims_per_hour: float = 0.0
    """Per unit, while held."""
    zone: str = ""
    """Units of one zone fall together in its outages ("": none)."""
    prices: PriceTrace | None = None
    """When set, the price in force at each moment instead of price_per_hour."""
    availability: Availability | None = None
    """When set, reclaims replay this trace instead of the Poisson rate: the lease is short
    while fewer than `count` units are available (des/availability.py)."""
    trace_offset_s: float | None = None
    """Where in the trace's window the job launches (None: drawn per seed, uniformly)."""


@dataclass(frozen=True, slots=True)
class JobSpec:
    steps: int
    step_s: np.ndarray
    """Step durations to draw from (the step-level simulator's, seconds, > 0)."""
    leases: tuple[Lease, ...]
    startup_s: float
    restart_s: float
    checkpoint_every: int
    """Steps per checkpoint (0: none; a reclaim loses every step done)."""
    checkpoint_s: float
    notice_s: float = 0.0
    zone_outages_per_hour: dict[str, float] = field(default_factory=dict)
    granularity_s: float = 0.0
    fixed_per_hour: float = 0.0
    """USD per hour of hosts billed for the whole job and never reclaimed (the priced PS)."""

    def __post_init__(self) -> None:
        if self.steps < 1 or len(self.step_s) == 0 or np.any(~(np.asarray(self.step_s) > 0)):
            raise ValueError("a job needs steps >= 1 and positive step durations")
        for name in ("startup_s", "restart_s", "checkpoint_s", "notice_s", "granularity_s",
                     "fixed_per_hour"):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 0.0:
                raise ValueError(f"{name} must be finite and >= 0, got {v}")
        if self.checkpoint_every < 0:
            raise ValueError("checkpoint_every must be >= 0")


@dataclass(frozen=True, slots=True)
class JobOutcome:
    wall_s: float
    """From the launch to the last step's end."""
    run_s: float
    """wall_s less the launch: what the throughput floor reads (as the plan's own bill)."""
    cost_usd: float
    reclaims: int
    """Reclaim events (a zone outage counts once)."""
    lost_steps: int
    checkpoints: int

    def throughput(self, batch_size: int, steps: int) -> float:
        return batch_size * steps / self.run_s


class _Bill:
    """Each unit's leases: open at launch or at its replacement's request, closed at its
    reclaim or the job's end."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.open: list[list[float | None]] = [[0.0] * lease.count for lease in spec.leases]
        self.usd = 0.0

    def close(self, i: int, unit: int, end_s: float, reopen_s: float | None) -> None:
        """End a unit's lease at end_s; its replacement's opens at reopen_s (None: later,
        by reopen())."""
        lease = self.spec.leases[i]
        start = self.open[i][unit]
        if start is None:  # not held (waiting for capacity)
            return
        held = billed_hours(end_s - start, self.spec.granularity_s) * 3600.0
        self.usd += (lease.prices.cost(start, start + held) if lease.prices is not None
                     else lease.price_per_hour * held / 3600.0)
        self.open[i][unit] = reopen_s

    def reopen(self, i: int, unit: int, start_s: float) -> None:
        self.open[i][unit] = start_s

    def finish(self, end_s: float) -> float:
        for i, units in enumerate(self.open):
            for unit in range(len(units)):
                self.close(i, unit, end_s, None)
        return self.usd + self.spec.fixed_per_hour * billed_hours(
            end_s, self.spec.granularity_s)


def reclaims_per_second(spec: JobSpec) -> float:
    """The job's Poisson reclaim rate: its reclaimable units' rates and its zones' outages (a
    unit of a zone with outages is reclaimable even at a per-unit rate of 0); leases that
    replay a trace are left out (their reclaims are the trace's)."""
    zones = {z: r for z, r in spec.zone_outages_per_hour.items()
             if r > 0.0 and any(lease.zone == z for lease in spec.leases)}
    return (sum(lease.count * lease.reclaims_per_hour for lease in spec.leases
                if lease.availability is None) + sum(zones.values())) / 3600.0


def expected_run_s(spec: JobSpec) -> float:
    """Daly's expected run (launch excluded) at the longest step time, without a notice:
    every segment e^(L R) (e^(L W) - 1) / L (module docstring); the longest step and no
    emergency checkpoint make it an upper bound on the mean of simulate_job's runs."""
    rate = reclaims_per_second(spec)
    step = float(np.max(spec.step_s))
    every = spec.checkpoint_every or spec.steps
    full, rest = divmod(spec.steps, every)
    segments = [every * step + spec.checkpoint_s] * full + ([rest * step] if rest else [])
    if not spec.checkpoint_every:
        segments = [spec.steps * step]
    elif not rest:  # the last full segment writes no checkpoint
        segments[-1] -= spec.checkpoint_s
    if rate <= 0.0:
        return float(sum(segments))
    try:
        return float(sum(math.exp(rate * spec.restart_s) * math.expm1(rate * w) / rate
                         for w in segments))
    except OverflowError:
        return math.inf


def simulate_job(spec: JobSpec, seed: int) -> JobOutcome:
    """One episode of the job (deterministic in `seed`)."""
    rng = np.random.default_rng([seed, 0x10B])
    env = simpy.Environment()
    bill = _Bill(spec)
    # the reclaim sources: each unit held on a reclaimable lease, then each zone's outages
    zones = [(rate, z) for z, rate in sorted(spec.zone_outages_per_hour.items())
             if rate > 0.0 and any(lease.zone == z for lease in spec.leases)]
    outage_zones = {z for _, z in zones}
    units = [(i, u) for i, lease in enumerate(spec.leases) for u in range(lease.count)
             if lease.availability is None
             and (lease.reclaims_per_hour > 0.0 or lease.zone in outage_zones)]
    traced = [i for i, lease in enumerate(spec.leases) if lease.availability is not None]
    for i in traced:
        lease = spec.leases[i]
        if max(lease.availability.units) < lease.count:
            raise JobTooLong(f"{lease.name}: the availability trace never has the plan's "
                             f"{lease.count} units (at most {max(lease.availability.units)})")
    offsets = {i: (float(rng.uniform(0.0, spec.leases[i].availability.period_s))
                   if spec.leases[i].trace_offset_s is None else spec.leases[i].trace_offset_s)
               for i in traced}
    short: set[int] = set()
    """Traced leases with fewer units available than they need."""
    rates = np.array([spec.leases[i].reclaims_per_hour for i, _ in units]
                     + [r for r, _ in zones], dtype=float) / 3600.0
    total = float(rates.sum())
    counts = {"reclaims": 0, "lost": 0, "checkpoints": 0}
    steps = np.asarray(spec.step_s, dtype=float)

    def reclaim(now: float, pick: int) -> None:
        """Close the reclaimed units' leases at the reclaim (the notice after now) and open
        their replacements' at now."""
        if pick < len(units):
            hit = [units[pick]]
        else:  # a zone outage: every unit of the zone
            zone = zones[pick - len(units)][1]
            hit = [(i, u) for i, u in units if spec.leases[i].zone == zone]
        for i, u in hit:
            bill.close(i, u, now + spec.notice_s, now)

    every = spec.checkpoint_every or spec.steps
    writes = max(0, math.ceil(spec.steps / every) - 1) if spec.checkpoint_every else 0
    plain = spec.steps * float(steps.max()) + writes * spec.checkpoint_s
    if total > 0.0 and expected_run_s(spec) > MAX_SLOWDOWN * plain:
        raise JobTooLong(f"the job would take over {MAX_SLOWDOWN:g} times its uninterrupted "
                         f"time ({plain / 3600:,.3g} h) on average: its reclaims outpace its "
                         "restarts (lower the reclaim rates, the restart time or the "
                         "checkpoint interval)")
    give_up = spec.startup_s + MAX_SLOWDOWN * (plain + spec.restart_s)

    def down(ready: float):
        """Wait until every lease has its units again and the replacements are ready."""
        while short or env.now < ready:
            if ready > give_up or env.now > give_up:
                raise JobTooLong(
                    f"the job passed {MAX_SLOWDOWN:g} times its uninterrupted time "
                    f"with {counts['reclaims']:,} reclaims: they outpace its restarts "
                    "(lower the reclaim rates or the restart time)")
            try:
                yield env.timeout(give_up if short else ready - env.now)
            except simpy.Interrupt:  # another reclaim, or capacity back: restart after it
                ready = max(ready, env.now + spec.restart_s)

    def job():
        yield env.timeout(spec.startup_s)
        me = env.active_process
        helpers = ([env.process(reclaims(me))] if total > 0.0 else []) + [
            env.process(replay(i, me)) for i in traced]
        yield env.timeout(0.0)  # the replays see their launch level first
        if short:  # launched short of capacity: wait for it
            yield from down(env.now)
        safe = 0
        while safe < spec.steps:
            n = min(every, spec.steps - safe)
            durations = rng.choice(steps, size=n)
            ends = np.cumsum(durations)
            write = safe + n < spec.steps and spec.checkpoint_every > 0
            start = env.now
            try:
                yield env.timeout(float(ends[-1]) + (spec.checkpoint_s if write else 0.0))
                safe += n
                counts["checkpoints"] += write
                continue
            except simpy.Interrupt:
                pass
            done = int(np.searchsorted(ends, env.now - start, side="right"))
            saved = spec.notice_s >= spec.checkpoint_s and done > 0
            if saved:  # an emergency checkpoint inside the notice keeps the finished steps
                safe += done
                counts["checkpoints"] += 1
            else:
                counts["lost"] += min(done, n)
            yield from down(env.now + max(spec.restart_s, spec.checkpoint_s if saved else 0.0))
        for h in helpers:
            if h.is_alive:
                h.interrupt()
        return env.now

    def replay(i: int, target):
        """Lease i's availability trace, from its offset: short while below its count."""
        lease = spec.leases[i]
        trace = lease.availability
        lost: list[int] = []

        def level(units: int, launch: bool = False) -> None:
            if units < lease.count and i not in short:
                short.add(i)
                counts["reclaims"] += not launch
                lost[:] = list(range(units, lease.count))
                for u in lost:  # (at launch: never held)
                    bill.close(i, u, env.now + (0.0 if launch else spec.notice_s), None)
                if target.is_alive and not launch:
                    target.interrupt("down")
            elif units >= lease.count and i in short:
                short.discard(i)
                for u in lost:
                    bill.reopen(i, u, env.now)
                if target.is_alive:
                    target.interrupt("up")

        begin = env.now
        level(trace.at(offsets[i] + begin), launch=True)
        try:
            for t, units in trace.changes(offsets[i] + begin, give_up):
                yield env.timeout(begin + t - env.now)
                level(units)
        except simpy.Interrupt:
            return

    def reclaims(target):
        while True:
            try:
                yield env.timeout(float(rng.exponential(1.0 / total)))
            except simpy.Interrupt:
                return
            pick = int(rng.choice(len(rates), p=rates / total))
            counts["reclaims"] += 1
            reclaim(env.now, pick)
            if target.is_alive:
                target.interrupt()

    proc = env.process(job())
    env.run(until=proc)
    wall = float(proc.value)
    return JobOutcome(wall_s=wall, run_s=wall - spec.startup_s, cost_usd=bill.finish(wall),
                      reclaims=counts["reclaims"], lost_steps=counts["lost"],
                      checkpoints=counts["checkpoints"])


__all__ = ["JobOutcome", "JobSpec", "JobTooLong", "Lease", "PriceTrace", "expected_run_s",
           "reclaims_per_second", "simulate_job"]
