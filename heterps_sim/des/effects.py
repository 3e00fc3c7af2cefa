"""Variability drawn from the seed: jitter factors, stragglers, preemptions.

Every random number is a function of the seed and of *what it is for*, never of the order in
which things are drawn or run: a jitter factor is keyed by the operation it stretches (unit,
operation code, microbatch or step, direction), a failure by (unit, operation, attempt). So the same
operation gets the same noise whatever else is switched on (a flush, transfers, another m per
step of the same plan changes which operations exist, not the noise of one that does), and
batched and unbatched runs see the same numbers. The keyed draws are a counter-based generator:
splitmix64's finalizer chained over the key's integers (`keyed_exponential`).

    jitter      duration x (1 + cv E), E ~ Exp(1): the nominal duration (roofline, measured
                profile) is the best case, and noise (OS, caches, other tenants) only ever adds
                a non-negative delay, of mean and standard deviation cv x the duration; one
                factor per operation (compute, step-end phase, message, PS request, all-reduce).
                (A mean-1 factor would let jitter make a plan faster than without it.)
    stragglers  round(fraction x units) units, chosen uniformly per seed, run every compute
                operation `straggler_slowdown` times slower.
    preemption  each unit fails at the events of a Poisson process of rate lambda per hour of
                its *operating* time (the time it computes). A failure takes the unit down for
                restart_delay_s (a replacement is provisioned and loads the stage's weights);
                the replacement then redoes the work its predecessor did since the unit's last
                step end (its gradient accumulators and stored activations died with it; the
                neighbours still hold the inputs), and the interrupted operation restarts from
                scratch. Neighbours are not rerouted: they wait through the data dependencies.

How a failure is drawn. Poisson failures are memoryless, so the process can be cut at the start
of every operation and at every restart: operation o's first run survives V(unit, o, 0) ~
Exp(lambda) operating seconds, and a replacement's attempt a >= 1 at it survives V(unit, o, a)
(keyed like the jitter; o = operation code and microbatch, or the step for a step-end phase).
The first run fails when V_0 < d (d: the operation's seconds), at V_0 into it; an attempt after
a restart must redo the s seconds the unit did since its last step end and then run the
operation, so it fails when V_a < s + d. An operation ready at t therefore starts at

    t + [V_0 < d] (V_0 + restart_delay_s + s + sum over a = 1, 2, ... while V_a < s + d
                   of (V_a + restart_delay_s))

(the first failure loses V_0, waits for the restart and redoes s; a later one loses V_a, which
includes its share of the redo, and waits again).

Why no effect can dodge a failure (monotonicity). That delay is a nondecreasing function of d
and s alone for the operation's own draws: a longer operation or more work since the step end
can only make more attempts fail and each failure cost more. Everything else in the simulator
computes start = max(input times), end = start + duration, and s is a sum of durations, so with
the draws keyed by the operation every end time is a nondecreasing function of every duration,
latency and ready time: more work, a slower unit, more latency, less bandwidth, or jitter on
top can never make a failure cheaper or rarer. (Network interfaces under contention serve in a
fixed program order, des/service_order.py, so this holds there too; the PS shards and the host's
cores serve first-come-first-served, where a delayed request can let another go first, so there
it is not guaranteed for every single operation.) (Failures at wall-clock times, the obvious model,
lack this: a timeline delayed by anything can move an operation off a failure; so do failures
on a unit's cumulative operating clock, where more work moves a failure into an earlier
operation whose outage then hides in idle time.) What it leaves out: a unit that idles does not
fail (the rate is per hour of operating time; per hour of life it is lambda x utilisation, and
a busy pipeline's units operate nearly all the time).
"""

from __future__ import annotations

import math

import numpy as np

JITTER, STRAGGLERS, PREEMPTION, MESSAGE, PS_REQUEST, ALLREDUCE = 1, 2, 3, 4, 5, 6
"""What a draw is for: the first integer of every key (stragglers: a spawn key)."""
NOISE = frozenset({"jitter", "preemption"})
"""Effects that make a run aperiodic (noise per operation); stragglers are a fixed slow unit
per seed, as periodic as a slow_replica."""

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def stream(seed: int, purpose: int, actor: int = 0) -> np.random.Generator:
    """The random stream of one actor for one purpose (stragglers: one draw of a set)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(purpose, actor)))


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer on uint64 arrays (wraps modulo 2**64)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_M1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_M2)
    return z ^ (z >> np.uint64(31))


def keyed_exponential(seed: int, *key) -> np.ndarray:
    """Exp(1) draws, one per element of the broadcast integer key arrays: a pure function of
    (seed, key), the same wherever and in whatever order it is asked for."""
    parts = np.broadcast_arrays(*(np.asarray(k, dtype=np.int64) for k in key))
    h = np.full(parts[0].shape, (seed + _GOLDEN) & _MASK, dtype=np.uint64)
    h = _mix(h)
    for p in parts:
        h = _mix(h ^ (p.astype(np.uint64) + np.uint64(_GOLDEN)))
    u = ((h >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0 ** -53  # in (0, 1)
    return -np.log(u)


def _mix_int(z: int) -> int:
    z = ((z ^ (z >> 30)) * _M1) & _MASK
    z = ((z ^ (z >> 27)) * _M2) & _MASK
    return z ^ (z >> 31)


def keyed_exponential_one(seed: int, *key: int) -> float:
    """keyed_exponential for one key, in plain Python (the same number, no array overhead)."""
    h = _mix_int((seed + _GOLDEN) & _MASK)
    for k in key:
        h = _mix_int(h ^ ((k + _GOLDEN) & _MASK))
    return -math.log(((h >> 11) + 0.5) * 2.0 ** -53)


def jitter_factors(seed: int, cv: float, purpose: int, *key) -> np.ndarray:
    """Factors 1 + cv E, E ~ Exp(1) keyed by (purpose, *key): >= 1, mean 1 + cv, standard
    deviation cv (1 when cv = 0)."""
    if cv == 0:
        return np.ones(np.broadcast_shapes(*(np.shape(k) for k in key)))
    return 1.0 + cv * keyed_exponential(seed, purpose, *key)


def choose_stragglers(seed: int, num_units: int, fraction: float, draw: str = "share",
                      stage_units: tuple[int, ...] = ()) -> frozenset[int]:
    """Which units (0..num_units-1, numbered stage after stage) are slow: floor(fraction x
    units + 1/2) of them (`share`), or each with probability `fraction` (`each`;
    DesOptions.straggler_draw). `each` draws stage g's units from a stream of their own
    (`stage_units`: the units per stage; default one stage), so a unit added to a stage leaves
    every other unit's draw as it was (plans one unit apart compare on the same draws)."""
    if draw == "each":
        slow, first = [], 0
        for g, k in enumerate(stage_units or (num_units,)):
            hits = np.flatnonzero(stream(seed, STRAGGLERS, g).random(k) < fraction)
            slow.extend(first + int(u) for u in hits)
            first += k
        return frozenset(slow)
    count = min(num_units, int(math.floor(fraction * num_units + 0.5)))
    if count == 0:
        return frozenset()
    picked = stream(seed, STRAGGLERS).choice(num_units, size=count, replace=False)
    return frozenset(int(u) for u in picked)


class Preemptions:
    """One unit's failures and what they cost (value-based, no SimPy events): see the module
    docstring. `start` before each operation (action index i), `end_step` at each step end."""

    __slots__ = ("seed", "unit", "mean_up_s", "restart_s", "keys", "first", "done_s", "count",
                 "lost_s", "spans")

    def __init__(self, seed: int, unit: int, rate_per_hour: float, restart_s: float,
                 keys: np.ndarray, active: np.ndarray):
        """keys: one integer per action that says which operation it is (operation_keys);
        active: whether the action can fail (the measured steps on, des/stats.py)."""
        self.seed, self.unit, self.keys = seed, unit, keys
        self.mean_up_s = 3600.0 / rate_per_hour if rate_per_hour > 0 else math.inf
        self.restart_s = restart_s
        first = self.mean_up_s * keyed_exponential(seed, PREEMPTION, unit, keys, 0)
        self.first = np.where(active, first, math.inf).tolist()
        """Operating seconds each action's first run survives."""
        self.done_s = 0.0
        """Operating seconds since the unit's last step end (what a failure makes it redo)."""
        self.count = 0
        self.lost_s = 0.0
        self.spans: list[tuple[float, float, float]] = []
        """(failure time, back up, redo done) per failure."""

    def start(self, start: float, duration: float, i: int) -> float:
        """When action i, of `duration` and ready at `start`, really starts; counts it done."""
        done, survives = self.done_s, self.first[i]
        self.done_s = done + duration
        if survives >= duration:
            return start
        attempt, need = 0, duration
        while survives < need:
            fail = start + survives - (need - duration)  # (inside the redo when need > survives)
            up = fail + self.restart_s
            self.spans.append((fail, up, up + done))
            self.count += 1
            self.lost_s += up + done - start
            start = up + done
            attempt, need = attempt + 1, done + duration
            survives = self.mean_up_s * keyed_exponential_one(
                self.seed, PREEMPTION, self.unit, int(self.keys[i]), attempt)
        return start

    def end_step(self) -> None:
        """A step end: the work so far is safe."""
        self.done_s = 0.0


def operation_keys(codes: np.ndarray, mus: np.ndarray) -> np.ndarray:
    """One integer per operation: its code and microbatch (or step, for a step-end phase)."""
    return codes.astype(np.int64) * (1 << 40) + mus.astype(np.int64)


def delay_to(now: float, target: float) -> float:
    """A delay d >= 0 with now + d == target exactly in floating point (SimPy adds delays)."""
    d = target - now
    while now + d < target:
        d = math.nextafter(d, math.inf)
    while d > 0 and now + d > target:
        d = math.nextafter(d, -math.inf)
    return d
