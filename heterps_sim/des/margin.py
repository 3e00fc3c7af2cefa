"""How much headroom a plan needs so that the simulator with jitter still meets the limit.

The planner's check simulates a plan with the deterministic effects (bubbles, all-reduce,
transfers, contention, the parameter server); `jitter` (des/effects.py: every operation's
duration x (1 + cv E), E ~ Exp(1), cv = DesOptions().jitter_cv = 0.1 by default) only ever adds
time, and more than cv: a flushed step ends when its LAST unit does, so the step takes the
largest of many noisy paths. Measured on the shipped scenarios' answers (7 seeds, 8 steps):
9% (one unit) to 24% (nine units of one stage) of throughput
(docs/results/2026-11-27-independent-evidence.md).

    h = jitter_margin(problem, plan)     the plan meets the limit at the median seed with the
                                         default jitter when its deterministic simulated (or
                                         flushed closed-form) throughput is >= limit x (1 + h)

The model (per step of the flushed schedule, every unit meets at the step-end barrier):

    stage g, k_g units, n_g = ceil(m / k_g) microbatches on its busiest unit, each a forward
    of f and a backward of b seconds, the ring AR_g (shared by the stage's units: one draw),
    the step-end phase u per unit:
        with a ring (k_g > 1, AR_g > 0), the ring is a barrier:
            end_g = max_units(sum of its 2 n_g jittered operations) + AR_g' + max_units(u')
        else:
            end_g = max_units(sum of its operations + u, jittered) + AR_g'
    step    = fill x (1 + cv) + max_g end_g,   fill = T - max_g L_g
    (T the deterministic flushed step, cost/flush.py; L_g the stage's end without noise, the
    same expression with every factor 1; the fill's operations are stretched by their mean,
    1 + cv)
    h       = E[step] / T - 1

E[.] is taken over a fixed set of draws (`DRAWS`, numpy seed 0), so h is a deterministic
function of the plan. A mixed stage's units use their own types' seconds. What it leaves out:
the noise of messages and PS requests (their delay hides in the fill here), and stragglers and
preemption (other effects); the test (tests/sim/des/test_margin.py) compares h with the
median over seeds of the simulator's deterministic / jittered throughput.
"""

from __future__ import annotations

import math

import numpy as np

from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.cost.flush import flushed_throughput, plan_microbatches
from heterps_sim.cost.reference import plan_stages
from heterps_sim.des.options import EFFECTS, VARIABILITY, DesOptions
from heterps_sim.des.work import StageWork, stage_work

DRAWS = 2048
"""Draws of the jitter per unit and operation the expectation is taken over."""
DETERMINISTIC = tuple(e for e in EFFECTS if e not in VARIABILITY)


def _unit_seconds(w: StageWork, r: int) -> tuple[float, float, float]:
    """(forward, backward, step-end) seconds of replica r of the stage."""
    return w.replica_seconds[r] if w.replica_seconds else (w.forward_s, w.backward_s, w.step_s)


def _stage_end(w: StageWork, m: int, cv: float, rng: np.random.Generator) -> tuple[float, np.ndarray]:
    """(deterministic load L_g, draws of the jittered stage end) of one stage."""
    k = w.num_replicas
    n = math.ceil(m / k)
    units = [_unit_seconds(w, r) for r in range(k)]
    ar = w.allreduce_s
    ring = ar * (1.0 + cv * rng.exponential(size=DRAWS))
    compute = np.empty((k, DRAWS))
    ends = np.empty((k, DRAWS))
    for r, (f, b, u) in enumerate(units):
        ops = np.array([f] * n + [b] * n)
        compute[r] = ops @ (1.0 + cv * rng.exponential(size=(len(ops), DRAWS)))
        ends[r] = u * (1.0 + cv * rng.exponential(size=DRAWS))
    if ar > 0 and k > 1:  # the ring waits for every unit, the step-end phases follow it
        load = max(n * (f + b) for f, b, _ in units) + ar + max(u for _, _, u in units)
        end = compute.max(axis=0) + ring + ends.max(axis=0)
    else:
        load = max(n * (f + b) + u for f, b, u in units) + ar
        end = (compute + ends).max(axis=0) + ring
    return load, end


def jitter_margin(problem: Problem, plan: Plan, *, cv: float | None = None,
                  options: DesOptions | None = None) -> float:
    """The headroom h (a fraction, >= cv) a flushed plan with every stage's units fixed needs
    so that the simulator with jitter of `cv` (default: DesOptions().jitter_cv) on top of the
    deterministic effects still meets the limit at the median seed: see the module docstring.
    `options`: the simulator's other options (its m, schedule, share); default: the check's."""
    options = options or DesOptions.with_effects(DETERMINISTIC)
    cv = DesOptions().jitter_cv if cv is None else cv
    if cv <= 0:
        return 0.0
    if any(s.num_replicas is None for s in plan.stages):
        raise ValueError("jitter_margin: every stage needs its num_replicas")
    m = options.num_microbatches or plan_microbatches(problem, plan)
    ks = [s.num_replicas for s in plan.stages]
    works, _ = stage_work(problem, plan_stages(problem, plan), ks, m, options, True)
    rng = np.random.default_rng(0)
    stages = [_stage_end(w, m, cv, rng) for w in works]
    top = max(load for load, _ in stages)
    step = problem.batch_size / flushed_throughput(
        problem, plan, m, allreduce=options.on("allreduce"), transfers=options.on("transfers"),
        contention=options.on("contention"), ps=options.on("ps"), share=options.share)
    fill = max(step - top, 0.0)
    noisy = fill * (1.0 + cv) + np.max([end for _, end in stages], axis=0)
    return max(float(noisy.mean()) / (fill + top) - 1.0, cv)


__all__ = ["jitter_margin"]
