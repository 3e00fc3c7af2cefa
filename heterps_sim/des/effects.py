"""Variability, drawn from the seed before the run: jitter factors, stragglers, preemptions.

Everything random is drawn per actor from its own stream of `numpy.random.SeedSequence(seed)`,
and jitter factors are drawn before the run for each replica's whole action list, so a result
depends only on the seed and the options, never on the order in which SimPy happens to run
the processes (the batched and unbatched paths see the same numbers).

    jitter      duration x (1 + cv E), E ~ Exp(1): the nominal duration (roofline, measured
                profile) is the best case, and noise (OS, caches, other tenants) only ever adds
                a non-negative delay, of mean and standard deviation cv x the duration; one
                factor per operation (compute, step-end phase, message, PS request, all-reduce).
                (A mean-1 factor would let jitter make a plan faster than without it.)
    stragglers  round(fraction x units) units, chosen uniformly per seed, run every compute
                operation `straggler_slowdown` times slower.
    preemption  each unit fails at the events of a Poisson process (rate per hour). A failure
                at time p takes the unit down until p + restart_delay_s (a replacement is
                provisioned and loads the stage's weights); the replacement then redoes the
                work its predecessor did in the current step (its gradient accumulators died
                with it: the forwards/backwards of its microbatches, whose inputs the neighbours
                still hold), and the interrupted operation restarts from scratch. Neighbours are
                not rerouted: they wait through the data dependencies. The replacement's own
                failures start counting when it is up. Failures are applied when the unit next
                computes (equivalent to an interrupt, since nothing else happens on it), so an
                outage that ends while the unit would idle anyway costs nothing.
"""

from __future__ import annotations

import math

import numpy as np

JITTER, STRAGGLERS, PREEMPTION = 1, 2, 3
"""Spawn keys of the random streams (one sub-stream per actor under each)."""


def stream(seed: int, purpose: int, actor: int = 0) -> np.random.Generator:
    """The random stream of one actor for one purpose."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(purpose, actor)))


def jitter_factors(rng: np.random.Generator, cv: float, n: int) -> np.ndarray:
    """n factors 1 + cv E, E ~ Exp(1): >= 1, mean 1 + cv, standard deviation cv (1 when cv = 0)."""
    if cv == 0:
        return np.ones(n)
    return 1.0 + cv * rng.exponential(1.0, n)


def choose_stragglers(seed: int, num_units: int, fraction: float) -> frozenset[int]:
    """Which units (0..num_units-1) are slow: floor(fraction x units + 1/2) of them."""
    count = min(num_units, int(math.floor(fraction * num_units + 0.5)))
    if count == 0:
        return frozenset()
    picked = stream(seed, STRAGGLERS).choice(num_units, size=count, replace=False)
    return frozenset(int(u) for u in picked)


class Preemptions:
    """One unit's failure times and what they cost (value-based, no SimPy events)."""

    __slots__ = ("rate_per_s", "restart_s", "rng", "next_fail", "count", "lost_s", "spans")

    def __init__(self, seed: int, unit: int, rate_per_hour: float, restart_s: float):
        self.rate_per_s = rate_per_hour / 3600.0
        self.restart_s = restart_s
        self.rng = stream(seed, PREEMPTION, unit)
        self.next_fail = self._gap(0.0)
        self.count = 0
        self.lost_s = 0.0
        self.spans: list[tuple[float, float, float]] = []
        """(failure time, back up, redo done) per failure."""

    def _gap(self, since: float) -> float:
        if self.rate_per_s <= 0:
            return math.inf
        return since + float(self.rng.exponential(1.0 / self.rate_per_s))

    def start(self, start: float, duration: float, step_work_s: float) -> float:
        """When an operation ready at `start` really starts, given the failures before its end;
        `step_work_s` is the work done in the current step (redone after each failure)."""
        while self.next_fail < start + duration:
            p = self.next_fail
            up = p + self.restart_s
            done = up + step_work_s
            self.spans.append((p, up, done))
            self.count += 1
            self.lost_s += (min(p, start + duration) - start if p > start else 0.0) + step_work_s
            self.next_fail = self._gap(up)
            if done > start:
                start = done
        return start


def delay_to(now: float, target: float) -> float:
    """A delay d >= 0 with now + d == target exactly in floating point (SimPy adds delays)."""
    d = target - now
    while now + d < target:
        d = math.nextafter(d, math.inf)
    while d > 0 and now + d > target:
        d = math.nextafter(d, -math.inf)
    return d
