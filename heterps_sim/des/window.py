"""Which simulated steps are measured: warm-up (pipeline fill), measured window, cool-down.

The throughput is the sustained rate of the measured steps (des/stats.py), so the window must
start after the pipeline has filled and, in a continuous pipeline, span whole periods of its
routing pattern:

    flush schedules   (gpipe / 1f1b with `bubbles`): every step starts from an empty pipeline, so
                      any window measures the same rate; it takes the continuous one's (below,
                      with no cool-down), so that switching `bubbles` on measures the same steps.
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
                      drains with nothing behind them.

With every effect off the pipeline is periodic from the fill on, so a window of whole periods
measures the long-run rate exactly (docs/concepts/simulator.md says for which m that is the
analytic model's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from heterps_sim.core.lanes import num_lanes
from heterps_sim.des.options import DesOptions

MAX_PERIOD_STEPS = 64
"""The longest routing period (in steps) the measured window is rounded up to."""
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
    """The same warm-up and measured steps whatever effects are on (a flush schedule only drops
    the cool-down), so runs that differ in one effect measure the same steps: under noise
    (des/stats.py) they then see the same noisy operations."""
    w0 = options.measured_from
    measured = options.num_steps - w0
    if options.warmup_steps is not None:
        cooldown = 0 if flush else math.ceil(len(replicas) * num_lanes(replicas, False) / m)
        return Window(w0, measured, cooldown)
    lanes = num_lanes(replicas, False)
    fill = math.ceil(len(replicas) * lanes / m)
    period = period_steps(replicas, m, lanes)
    if period <= MAX_PERIOD_STEPS:
        measured = period * math.ceil(measured / period)
    else:
        measured = max(measured, LONG_WINDOW_FILLS * fill)
    return Window(max(w0, fill + ring_lag_steps(replicas, m)), measured, 0 if flush else fill)
