"""Which simulated steps are measured: warm-up (pipeline fill), measured window, cool-down.

The throughput is the sustained rate of the measured steps (des/stats.py), so the window must
start after the pipeline has filled and, in a continuous pipeline, span whole periods of its
routing pattern:

    flush schedules   (gpipe / 1f1b with `bubbles`): every step starts from an empty pipeline, so
                      any window measures the same rate; it takes the continuous one's warm-up
                      and whole periods (below), with no cool-down and no settling check.
    continuous        one 1F1B stream over rounds of L microbatches (core/lanes.py) holds up to
                      s rounds in flight: F = ceil(s L / m) steps fill it. Unless the options
                      set warmup_steps, the warm-up is max(options.measured_from, F), and the
                      measured steps (num_steps - options.measured_from) are rounded up to a
                      whole number of periods: microbatch mu runs on replica mu mod k_g and in
                      round mu // L, so the routing repeats every lcm(m, L, k_1..k_s) / m steps.
                      A period longer than MAX_PERIOD_STEPS is not rounded to (the window is
                      then an approximation of the long-run rate). The warm-up also covers
                      the all-reduces' lag (ring_lag_steps): until a replica first waits for
                      a ring, it runs ahead of the steady state (counted whether or not the
                      effect is on: the window depends on the plan, m and options alone). A cool-down of F steps
                      follows, so the last measured steps do not finish early as the stream
                      drains with nothing behind them. The window then spans at least two
                      periods, so the simulator can check that the pipeline has settled
                      (`settled`: every replica's step ends repeat every period, or every
                      few periods, over it; the window is then cut to whole cycles); a slow
                      unit or an all-reduce can make the start-up transient outlast the
                      fill, and then the window moves a period later (and grows by one) and
                      the run is repeated (at most SETTLE_TRIES times). A window that starts
                      in the transient is monotone in nothing: a slower unit that delays its
                      start more than its end reads as a faster rate.

With every effect off the pipeline is periodic from the fill on, so a window of whole periods
measures the long-run rate exactly (docs/concepts/simulator.md says for which m that is the
analytic model's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from heterps_sim.core.lanes import num_lanes
from heterps_sim.des.options import DesOptions

MAX_PERIOD_STEPS = 64
"""The longest routing period (in steps) the measured window is rounded up to."""
SETTLE_TRIES = 4
"""How many times a window that starts in the start-up transient is moved a period later."""
SETTLED_RTOL = 1e-12
"""Step ends repeat every period to within this share of the clock (float rounding)."""
LONG_WINDOW_FILLS = 8
"""A longer period: the window spans at least this many pipeline fills (the boundary error
then shrinks as 1 / window)."""


@dataclass(frozen=True, slots=True)
class Window:
    warmup: int
    """Steps simulated before the measured ones."""
    measured: int
    cooldown: int
    """Unmeasured steps after them (continuous pipelines)."""
    period: int = 0
    """Steps of the routing period the window is checked against (`settled`); 0: not checked
    (a flush, a warm-up the options set, or a period too long to simulate whole)."""
    per_replica: bool = False
    """The run has settled over the window: measure each replica's own window (its long-run
    rate; the slowest paces), not the stage's last replica (des/stats.py)."""

    def later(self) -> Window:
        """The window one period later and one period longer (room for a longer cycle)."""
        return replace(self, warmup=self.warmup + self.period,
                       measured=self.measured + self.period)

    @property
    def total(self) -> int:
        return self.warmup + self.measured + self.cooldown

    @property
    def end(self) -> int:
        """Steps up to the last measured one (warm-up + measured)."""
        return self.warmup + self.measured


def period_steps(replicas: list[int], m: int, lanes: int) -> int:
    """Steps after which a continuous pipeline's routing and rounds repeat."""
    return math.lcm(m, lanes, *replicas) // m


def ring_lag_steps(replicas: list[int], m: int) -> int:
    """Steps a replica of a continuous pipeline may run before it first waits for an all-reduce
    when it gets fewer than one microbatch a step (k > m): it waits at its next step end after
    one of its own backwards, up to ceil(k / m) + 1 steps later; 0 when every k <= m (the fill
    covers the one step of lag)."""
    return max((math.ceil(k / m) + 1 for k in replicas if k > m), default=0)


def choose_window(options: DesOptions, replicas: list[int], m: int, flush: bool) -> Window:
    """The same warm-up and measured steps whatever effects are on (a flush schedule drops the
    cool-down and the two-period minimum), so runs that differ in one effect measure the same
    steps unless one of them has not settled by then (the simulator then moves its window
    later, `settled`): under noise (des/stats.py) they see the same noisy operations."""
    w0 = options.measured_from
    measured = options.num_steps - w0
    if options.warmup_steps is not None:
        cooldown = 0 if flush else math.ceil(len(replicas) * num_lanes(replicas, False) / m)
        return Window(w0, measured, cooldown)
    lanes = num_lanes(replicas, False)
    fill = math.ceil(len(replicas) * lanes / m)
    period = period_steps(replicas, m, lanes)
    warmup = max(w0, fill + ring_lag_steps(replicas, m))
    if period > MAX_PERIOD_STEPS:
        return Window(warmup, max(measured, LONG_WINDOW_FILLS * fill), 0 if flush else fill)
    if flush or 2 * period > MAX_PERIOD_STEPS:  # (a flush: every step starts empty, settled)
        return Window(warmup, period * math.ceil(measured / period), 0 if flush else fill)
    return Window(warmup, period * max(2, math.ceil(measured / period)), fill, period)


def settled(step_ends: np.ndarray, window: Window) -> Window | None:
    """The window to measure if the run has settled over `window`, else None. Settled: every
    replica's step ends (step_ends[replica, step]) repeat every cycle of C steps over the
    measured window, c_{n+C} - c_n the same for every n from its start on, for C the routing
    period or a multiple of it (a pipeline can cycle through several periods before it
    repeats) with two cycles in the window; the window is then cut to whole cycles, the rest
    becoming cool-down, and measures the long-run rate exactly."""
    P = window.period
    if P == 0:
        return window
    c = np.hstack([np.zeros((len(step_ends), 1)), step_ends[:, :window.end]])  # c[:, n + 1] = c_n
    lo, span = window.warmup, window.measured  # c[:, lo] = c_{W-1}
    tol = SETTLED_RTOL * float(c[:, -1].max())
    for cycle in range(P, span // 2 + 1, P):
        d = c[:, lo + cycle:] - c[:, lo:c.shape[1] - cycle]
        if np.all(np.abs(d - d[:, :1]) <= tol):
            measured = cycle * (span // cycle)
            return replace(window, measured=measured, cooldown=window.cooldown + span - measured,
                           per_replica=True)
    return None
