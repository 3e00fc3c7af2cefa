"""A plan's step time under a flushed schedule, in closed form (docs/design.md, "Flushed
schedules").

The stage model (cost/terms.py, cost/dominant.py) is a steady pipeline: the slowest stage sets
the pace, Thr = min_g B / ET_g(k_g). A flushed schedule (gpipe or 1f1b, the ones the engine
runs) empties the pipeline at every step end, so a step also pays the fill and drain, the
boundary messages along the pipeline's depth, and the step-end phases of the stages, which all
fall at the end of the step instead of hiding between microbatches. For a plan with stages
g = 0..S-1 on k_g units, m microbatches, backward share beta of a microbatch's work:

    w_g     = alpha_g P_g / m                    one microbatch's work on one unit
    busy_g  = ceil(m / k_g) w_g                  the busiest unit's microbatch work per step
    u_g     = (1 - alpha_g) P_g + S_g + F_g      the step-end phase (non-splitting work, fixed
                                                 costs); AR_g(k_g) the all-reduce before it
    d_b     = bytes_b / m / min(net) + latency   a boundary message forward (its share of the
                                                 boundary bytes) and backward, b = 0..S-2

    forwards end  F = sum_g (1 - beta) w_g + max_g (1 - beta)(busy_g - w_g) + sum_b d_b^fwd
    stage g's backwards end
              E_g = F + sum_{h>=g} beta w_h + max_{h>=g} beta (busy_h - w_h) + sum_{b>=g} d_b^bwd
    T       = max_g (E_g + AR_g(k_g) + u_g)
    Thr     = min(B / T, PS capacity)            (the default model's PS cap)

(a flow shop of identical microbatches: the first one crosses every stage, the busiest unit
paces the rest; the backwards flow from the last stage to the first, so stage g's end only
waits for the stages after it; every stage's step-end phase follows its last backward, and
the next step starts when every stage has finished its own.) The sums over stages are what the stage
model cannot see and why it overrates deep pipelines: its exact optimum cuts many stages.

Two shared resources can pace a phase instead of the busiest unit (`contention`, `ps`):

    interfaces  with contention, messages queue on each unit's network interface: under
                gpipe, in the forwards a stage's interface carries ceil(m / k_g) - 1 more
                activation messages after the first (the busier of in and out), in the
                backwards as many gradient messages; under 1f1b the phases interleave, so the
                egress carries activations out and gradients back at once (the ingress the
                others) beside the unit's serial compute: the pace is the largest of the
                compute, the egress and the ingress (written as the backwards' pace)
    PS shards   with the ps effect, the shards serve requests one at a time, in order, and
                no pull crosses a step end: a step reads the rows after the step before's
                pushes are in (as the engine: its prefetch stays within a step and a step
                ends once its pushes are acknowledged). A stage with rows pulls each unit's
                first microbatch at the step's start, so its units start (min(k, m) - 1)
                pulls apart (one more, and a pull between a unit's forwards, when the odt
                leaves the service out: the paper model's); the step's pulls, less one
                microbatch's when the odt holds the PS's unloaded time (the default model's:
                a forward waits for its pull's turn, core/ps_odt.py), pace the forwards; and
                its pushes drain back to back from its first backward's end (its start when
                the odt holds the service: a push runs beside its backward) before it ends

A mixed stage (units of several types) enters per step as the engine routes whole
microbatches to its units (cost/flush_mixed.py: share "equal", microbatch mu on unit mu mod k,
or "speed"); T is then the mean over the routing's period. Single-type stages are unchanged by
`share`. tests/sim/cost/test_flush_terms.py pins the interface and PS terms on hand timelines.

`flushed_throughput(problem, plan, m)` evaluates it for a plan with fixed replicas; each
effect's term is dropped when the caller's simulator has that effect off.

What the exact search's lower bound rests on (schedulers/exact/flushed_lagrange.py): for
every stage g, T >= A + PF' + C_g + pb_g + r_g (A the forward fills, PF' the forward pace,
C_g the drains of g and the stages after it, pb_g its own backward pace, r_g = AR_g + u_g).
`relaxation_step_time` is that right-hand side; a closed form that reads a step below it
(the simulator does in places: a wide last stage starts backwards before the last forward,
tests/sim/des/test_flush_where_closed_form_parts.py) would leave the bound unsound.
"""

from __future__ import annotations

import math

from heterps_sim.core import ps_odt
from heterps_sim.core.lanes import default_microbatches
from heterps_sim.core.plan import Plan
from heterps_sim.core.problem import Problem
from heterps_sim.cost import dominant, flush_mixed, ps_stage, ps_traffic
from heterps_sim.cost.reference import MixedTerms, plan_stages, ps_cap, stage_type_indices

FLUSHED = ("gpipe", "1f1b")
"""Schedules that flush the pipeline at every step end (the ones the engine runs)."""
BACKWARD_FRACTION = 2.0 / 3.0
"""Share of a microbatch's work in its backward (as the simulator's default)."""
FORWARD_BOUNDARY_SHARE = 0.5
"""Share of boundary bytes that travel forward (activations; as the simulator's default)."""


def plan_microbatches(problem: Problem, plan: Plan) -> int:
    """The m a plan runs with: its own when > 1, else the simulator's default for its units."""
    if plan.num_microbatches > 1:
        return plan.num_microbatches
    ks = [s.num_replicas or 1 for s in plan.stages]
    return default_microbatches(ks, len(ks), problem.batch_size)


def flushed_step_time(w, busy, u, ar, d_fwd, d_bwd, beta: float = BACKWARD_FRACTION,
                      nic_f=None, nic_b=None) -> float:
    """T of the module docstring from per-stage lists (d_*: one entry per boundary; nic_*:
    a stage's network interface time per step beyond its first message, forwards and
    backwards, when messages queue there: 0 without contention)."""
    S = len(w)
    nic_f = nic_f or [0.0] * S
    nic_b = nic_b or [0.0] * S
    fwd_end = (sum((1.0 - beta) * x for x in w) + sum(d_fwd)
               + max(max((1.0 - beta) * (b - x), n) for b, x, n in zip(busy, w, nic_f)))
    T, fill, pace = -math.inf, 0.0, 0.0
    for g in range(S - 1, -1, -1):  # backwards flow from the last stage to stage g
        fill += beta * w[g] + (d_bwd[g] if g < S - 1 else 0.0)
        pace = max(pace, beta * (busy[g] - w[g]), nic_b[g])
        T = max(T, fwd_end + fill + pace + ar[g] + u[g])
    return T


def relaxation_step_time(w, busy, u, ar, d_fwd, d_bwd, beta: float = BACKWARD_FRACTION,
                         nic_f=None, nic_b=None) -> float:
    """max_g (A + PF' + C_g + pb_g + r_g) from the lists flushed_step_time takes: the least
    step a closed form may read while the exact search's Lagrangian bound holds (module
    docstring). flushed_step_time is never below it (its pace after g is the largest of the
    stages after g, this one g's own)."""
    S = len(w)
    nic_f = nic_f or [0.0] * S
    nic_b = nic_b or [0.0] * S
    fwd_end = (sum((1.0 - beta) * x for x in w) + sum(d_fwd)
               + max(max((1.0 - beta) * (b - x), n) for b, x, n in zip(busy, w, nic_f)))
    T, fill = -math.inf, 0.0
    for g in range(S - 1, -1, -1):
        fill += beta * w[g] + (d_bwd[g] if g < S - 1 else 0.0)
        T = max(T, fwd_end + fill + max(beta * (busy[g] - w[g]), nic_b[g]) + ar[g] + u[g])
    return T


def flushed_throughput(problem: Problem, plan: Plan, m: int | None = None, *,
                       allreduce: bool = True, transfers: bool = True, contention: bool = False,
                       ps: bool = False,
                       beta: float = BACKWARD_FRACTION,
                       forward_share: float = FORWARD_BOUNDARY_SHARE,
                       share: str = "equal", step_time=flushed_step_time) -> float:
    """B / T (capped by the default model's PS capacity) of `plan`, every stage's units fixed.
    `share`: how a mixed stage's units split the microbatches (flush_mixed; the simulator's
    and the engine's `share`, "equal" by default); single-type stages are the same either way.
    `step_time`: T from the per-stage terms (relaxation_step_time: the most any closed form
    may read without breaking the exact search's bound)."""
    if any(s.num_replicas is None for s in plan.stages):
        raise ValueError("flushed_throughput: every stage needs its num_replicas")
    if plan.schedule not in FLUSHED:
        raise ValueError(f"flushed_throughput: {plan.schedule!r} does not flush (gpipe, 1f1b do)")
    m = m or plan_microbatches(problem, plan)
    terms = plan_stages(problem, plan)
    net = problem.network_bytes_per_s
    w, busy, u, ar, d_fwd, d_bwd, ser = [], [], [], [], [], [], []
    mixed: dict[int, flush_mixed.MixedStage] = {}
    routes: dict[int, list[list[int]]] = {}
    most: list[int] = []  # a unit's most microbatches per step
    for g, (t, stage) in enumerate(zip(terms, plan.stages)):
        part = t.parts[0] if isinstance(t, MixedTerms) else t
        if isinstance(t, MixedTerms):  # per replica, routed as the engine routes (flush_mixed)
            mixed[g] = flush_mixed.mixed_stage(t, m, allreduce)
            routes[g] = flush_mixed.assignments(mixed[g], m, share)
            w_g, busy_g = flush_mixed.step_terms(mixed[g], routes[g][0])
            w.append(w_g)
            busy.append(busy_g)
            u.append(max(mixed[g].step_end_s))
            ar.append(mixed[g].allreduce_s)
            most.append(flush_mixed.most_microbatches(routes[g], sum(t.counts)))
        else:
            k = stage.num_replicas
            w.append(t.alpha * t.parallel_s / m)
            u.append((1.0 - t.alpha) * t.parallel_s + t.serial_s + t.fixed_s)
            busy.append(math.ceil(m / k) * w[-1])
            ar.append(dominant.allreduce_time(t.bw_s, t.lat_s, k)
                      if allreduce and t.default else 0.0)
            most.append(math.ceil(m / k))
        if g + 1 < len(terms):
            nb = 0.0
            if transfers:
                bw = float(min(net[j] for j in stage_type_indices(t)
                               + stage_type_indices(terms[g + 1])))
                nb = float(problem.boundary_bytes[part.last]) / m / bw
            lat = problem.latency_s if transfers else 0.0
            ser.append(nb)
            d_fwd.append(forward_share * nb + lat)
            d_bwd.append((1.0 - forward_share) * nb + lat)
    nic_f, nic_b = [0.0] * len(w), [0.0] * len(w)
    if contention and transfers:  # a unit's interfaces pace it too: its messages queue there
        for g in range(len(terms)):
            n = most[g]  # its messages per step each way, one of them in the fill
            before = ser[g - 1] if g > 0 else 0.0
            after = ser[g] if g < len(ser) else 0.0
            # forwards: activations in from g - 1, out to g + 1; backwards: gradients the
            # other way (each direction's busier interface)
            nic_f[g] = (n - 1) * forward_share * max(before, after)
            nic_b[g] = (n - 1) * (1.0 - forward_share) * max(before, after)
            if plan.schedule == "1f1b":  # forwards and backwards interleave: each interface
                # carries both directions' messages at once (egress: activations out and
                # gradients back; ingress: the others), beside the unit's serial compute:
                # pace max(compute, egress, ingress), written as the backwards' pace
                fwd = forward_share * after + (1.0 - forward_share) * before
                bwd = forward_share * before + (1.0 - forward_share) * after
                both = (n - 1) * max(fwd, bwd)
                nic_f[g] = 0.0
                nic_b[g] = max(0.0, both - (1.0 - beta) * (busy[g] - w[g]))
    if ps and problem.sparse_bytes is not None:
        # the shards serve the requests one at a time, in order, and no pull crosses a step
        # end (a step reads the rows after the step before's pushes are in). Pulls: every
        # unit of a stage holding rows pulls its first microbatch's rows at the step's start,
        # so they queue there (the stage's own forwards start (min(k, m) - 1) pulls apart;
        # when the odt leaves the service out, one more, and a unit's later forwards each
        # wait for the pull it queued after its forward before), and the step's pulls, less one
        # microbatch's when the odt holds the service (a forward waits for its pull's turn),
        # pace the forwards. Pushes: a stage ends once its pushes are served, back to back
        # from its first backward's end (its start when the work holds the service), which
        # its own backwards' pace puts before its last (and, at the last stage, its units'
        # stagger: no stage after it evens them out)
        spec = ps_traffic.problem_ps(problem)
        holds = ps_odt.odt_holds_ps_side(problem)
        pulls_s = 0.0
        for g, t in enumerate(terms):
            part = t.parts[0] if isinstance(t, MixedTerms) else t
            nbytes = problem.batch_size * float(sum(problem.sparse_bytes[part.first:
                                                                         part.last + 1]))
            if nbytes <= 0:
                continue
            k = sum(t.counts) if isinstance(t, MixedTerms) else plan.stages[g].num_replicas
            pull = nbytes / m / spec.num_shards * spec.seconds_per_byte
            pulls_s += m * pull
            pace, drain = ps_stage.stage_terms(pull, k, m, most[g], busy[g] - w[g], w[g], beta,
                                               holds, g == len(terms) - 1)
            nic_f[g] = max(nic_f[g], pace)
            u[g] = max(u[g], drain - ar[g])
        if pulls_s > 0:
            pace = pulls_s * (1.0 - 1.0 / m) if holds else pulls_s
            nic_f = [max(x, pace) for x in nic_f]
    if not mixed:
        T = step_time(w, busy, u, ar, d_fwd, d_bwd, beta, nic_f, nic_b)
    else:  # the mean step over the routing's period (mixed stages change from step to step)
        steps = flush_mixed.period_steps(list(routes.values()))
        total = 0.0
        for n in range(steps):
            for g, stage in mixed.items():
                w[g], busy[g] = flush_mixed.step_terms(stage, routes[g][n % len(routes[g])])
            total += step_time(w, busy, u, ar, d_fwd, d_bwd, beta, nic_f, nic_b)
        T = total / steps
    return min(problem.batch_size / T, ps_cap(problem))
