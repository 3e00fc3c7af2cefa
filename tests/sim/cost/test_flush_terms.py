"""cost/flush.py's single-type terms that changed on 2026-11-27, pinned on hand-computable cases
(the exact solver, schedulers/exact/flushed*.py, mirrors these terms and is brought in line
from here).

1. `ps`, the pulls' pace of the forwards. Once an embedding stage has several forwards per
   unit (ceil(m / k) > 1), with one pull of p_g = (B / m) sparse_bytes_g / num_shards x
   seconds_per_byte seconds per microbatch on stage g:

       before   pace = pulls_s (1 - 1/m),  pulls_s = sum over embedding stages of m p_g
       after    ONE embedding stage g in the plan:
                    pace = (m - min(k_g, m)) p_g  -  p_g
                (each unit's first pull of the step was prefetched during the step before;
                the last p_g is subtracted only when the default model's odt holds the PS's
                unloaded time, core/ps_odt.odt_holds_ps_side: a forward then waits for its
                pull's turn, not for its end)
                SEVERAL embedding stages: pace = pulls_s (1 - 1/m), as before (deeper
                stages' pushes interleave with shallower stages' pulls; measured: the
                one-stage rule alone read dlrm-64types' flushed plan 24% fast)

2. `contention` under 1f1b. A unit's interface time per step beyond its first message, with
   s_before / s_after the boundary seconds per microbatch before / after stage g, fs the
   forward share of the boundary bytes and n = ceil(m / k):

       gpipe (unchanged)  nic_f = (n - 1) fs max(s_before, s_after)
                          nic_b = (n - 1) (1 - fs) max(s_before, s_after)
       1f1b, before       the same
       1f1b, after        nic_f = 0
                          nic_b = max(0, (n - 1) max(fs s_after + (1 - fs) s_before,
                                                     fs s_before + (1 - fs) s_after)
                                         - (1 - beta) (busy_g - w_g))
       (1F1B interleaves forwards and backwards: a unit's egress carries its activations out
       and gradients back at once, its ingress the others, beside its serial compute; the
       step's pace is max(compute, egress, ingress), written as the backwards' pace)
"""

from dataclasses import replace

import numpy as np
import pytest

from heterps_sim.core import ps_odt
from heterps_sim.core.ps_spec import PsSpec, TierSpec
from heterps_sim.core.unit_costs import default_costs
from heterps_sim.cost.flush import BACKWARD_FRACTION, flushed_step_time, flushed_throughput
from heterps_sim.cost.reference import plan_stages
from heterps_sim.des import DesOptions, simulate
from heterps_sim.testing import chain_plan, chain_problem

B = 64


def ps_problem(oct_s: float, alpha: float, m: int, model: str = "default"):
    """One layer on one unit type, a PS whose one shard serves one microbatch's pull (or push)
    in exactly 0.1 s with no tier or network latency; no fixed costs, no startup."""
    p = chain_problem([oct_s], alpha=alpha, batch_size=B)
    free = TierSpec(hit_rate=1.0, bytes_per_s=1e30, latency_s=0.0)
    none = TierSpec(hit_rate=0.0, bytes_per_s=1e30, latency_s=0.0)
    sparse = np.array([100.0])
    ps = PsSpec(num_shards=1, shard_bytes_per_s=B * 100.0 / m / 0.1, hot=free, warm=none,
                cold=none)
    costs = default_costs(("gpu",), 1, 1, overrides=dict(
        step_overhead_s=np.zeros(1), layer_overhead_s=np.zeros(1), startup_s=np.zeros(1)))
    odt = (ps_odt.with_ps_side(p.odt_s, ps_odt.ps_side_s(sparse, B, ps, 0.0))
           if model == "default" else p.odt_s)
    return replace(p, cost_model=model, costs=costs, ps=ps, sparse_bytes=sparse, odt_s=odt)


def simulated_step(problem, plan, effects) -> float:
    run = simulate(problem, plan, options=DesOptions.with_effects(effects, num_steps=6),
                   record_spans=False)
    return B / run.result.throughput


def test_ps_pace_default_model_by_hand():
    """One unit, m = 4, gpipe. P = 0.04 (compute) + 0.8 (the odt's PS side: 4 pulls and 4
    pushes of 0.1 s), alpha = 0.5: a microbatch's forward f = 0.035, backward 0.07, the
    step-end phase u = 0.42. No pull crosses a step end, and a forward waits for its pull's
    turn (the work holds its service). The timeline:
        pull 0 at the step's start, 0-0.1: F0 at 0; pull 1 (queued after F0) 0.1-0.2: F1 at
        0.1; pull 2 0.2-0.3: F2 at 0.2; pull 3 0.3-0.4: F3 at 0.3-0.335; B0..B3 to 0.615, their
        pushes served 0.405-0.805 (within u); u to 1.035.
    closed form: pace m p - p = 0.3, T = 0.035 + 0.3 + 0.28 + 0.42 = 1.035 (with pulls
    prefetched across the step end, as the simulator once did: 0.935)."""
    p = ps_problem(0.04, 0.5, 4)
    plan = chain_plan(p, [1], microbatches=4)
    closed = B / flushed_throughput(p, plan, 4, allreduce=False, transfers=False, ps=True)
    assert closed == pytest.approx(1.035, rel=1e-12)
    assert simulated_step(p, plan, ("bubbles", "ps")) == pytest.approx(1.035, rel=1e-12)


def test_ps_pace_when_the_work_does_not_hold_the_ps_by_hand():
    """The paper model's odt has no PS side, so a forward waits for its pull's END. One unit,
    m = 4, P = 2.0, alpha = 0.5: f = 0.25 / 3, b = 0.5 / 3, u = 1.0.
        pull 0 0-0.1: F0 at 0.1; pull 1 (queued after F0, at 0.1833) to 0.2833: F1 then;
        pull 2 to 0.4667: F2; pull 3 to 0.65: F3 to 0.7333; B0..B3 to 1.4 (the last push
        1.4-1.5, within u); u to 2.4.
    closed form: the unit's forward pace 3 f + p + 3 p = 0.65 (its stagger and the pulls
    between its forwards) over the step's pulls 0.4: T = f + 0.65 + 4 b + u = 2.4."""
    p = ps_problem(2.0, 0.5, 4, model="paper")
    plan = chain_plan(p, [1], microbatches=4)
    closed = B / flushed_throughput(p, plan, 4, allreduce=False, transfers=False, ps=True)
    assert closed == pytest.approx(2.4, rel=1e-12)
    assert simulated_step(p, plan, ("bubbles", "ps")) == pytest.approx(2.4, rel=1e-12)


def test_ps_pace_several_embedding_stages_is_unchanged():
    """Two stages, both with embedding rows: the step's pulls less one microbatch's."""
    p = ps_problem(0.04, 0.5, 4)
    two = chain_problem([0.4, 0.4], alpha=0.5, batch_size=B)  # (the step stays above the cap)
    sparse = np.array([50.0, 50.0])
    p2 = replace(two, cost_model="default", costs=default_costs(("gpu",), 1, 2, overrides=dict(
        step_overhead_s=np.zeros(1), layer_overhead_s=np.zeros(2), startup_s=np.zeros(1))),
        ps=p.ps, sparse_bytes=sparse,
        odt_s=ps_odt.with_ps_side(two.odt_s, ps_odt.ps_side_s(sparse, B, p.ps, 0.0)))
    plan = chain_plan(p2, [1, 1], microbatches=4)
    got = B / flushed_throughput(p2, plan, 4, allreduce=False, transfers=False, ps=True)
    terms = plan_stages(p2, plan)
    w = [t.alpha * t.parallel_s / 4 for t in terms]
    u = [(1 - t.alpha) * t.parallel_s for t in terms]
    pulls_s = 2 * 4 * 0.05  # each stage: 4 pulls of half the rows: 0.05 s each
    pace = pulls_s * (1 - 1 / 4)
    # each stage ends once its 4 pushes are in, back to back from its first backward's end
    drain = [max(0.05, 4 * 0.05 - BACKWARD_FRACTION * 3 * x) for x in w]
    want = flushed_step_time(w, [4 * x for x in w], [max(a, b) for a, b in zip(u, drain)],
                             [0.0, 0.0], [0.0], [0.0], BACKWARD_FRACTION, [pace, pace],
                             [0.0, 0.0])
    assert got == pytest.approx(want, rel=1e-12)
    assert want > 2 * pulls_s  # (above the PS cap's pulls and pushes: the pace decides)


def test_ps_pace_two_units():
    """Two units of one stage, m = 6: each has 3 forwards; the step's 6 pulls pace them:
    pace 6 p - p = 0.5 (the second unit's start, one pull after the first's, is below it).
    The simulator agrees within 1% (its pushes interleave)."""
    p = ps_problem(0.04, 0.3, 6)
    plan = chain_plan(p, [2], microbatches=6)
    closed = B / flushed_throughput(p, plan, 6, allreduce=False, transfers=False, ps=True)
    P = 0.04 + 1.2  # (alpha 0.3: the step-end phase 0.7 P lets the pushes drain, and the
    w = 0.3 * P / 6  # step stays above the PS cap's 12 requests x 0.1 s)
    assert closed == pytest.approx(w / 3 + 0.5 + 2 / 3 * 3 * w + 0.7 * P, rel=1e-12)
    assert simulated_step(p, plan, ("bubbles", "ps")) == pytest.approx(closed, rel=0.01)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_contention_terms_by_hand(schedule):
    """Two stages of one unit, m = 4, almost no compute, 4 MB of boundary per batch over
    1 MB/s: a microbatch's message carries 1 s of bytes (0.5 s of activations forward, 0.5 s
    of gradients back), latency 10 ms; the sender's work keeps its boundary term (4.01 s per
    batch, paper model: one latency), so stage 0's w = 4.01 / 4. The closed form against the
    step time rebuilt from the pinned terms (and the simulator: gpipe exact, 1f1b within
    0.5%; with the gpipe-shaped terms 1f1b read 9% slow)."""
    q = chain_problem([1e-9, 1e-9], alpha=1.0, boundary_bytes=4e6, latency_s=0.01,
                      network=1e6, batch_size=B)
    plan = chain_plan(q, [1, 1], microbatches=4, schedule=schedule)
    got = B / flushed_throughput(q, plan, 4, allreduce=False, transfers=True, contention=True)
    beta = BACKWARD_FRACTION
    w = [(1e-9 + 4.0 + 0.01) / 4, 1e-9 / 4]
    busy = [4 * x for x in w]
    d = [0.5 + 0.01]
    if schedule == "gpipe":  # each phase's busier interface: 3 more messages of 0.5 s
        nic_f, nic_b = [1.5, 1.5], [1.5, 1.5]
    else:  # both directions at once on each interface: 3 x max(0.5, 0.5), beside compute
        nic_f = [0.0, 0.0]
        nic_b = [max(0.0, 1.5 - (1 - beta) * (b - x)) for b, x in zip(busy, w)]
    want = flushed_step_time(w, busy, [0.0, 0.0], [0.0, 0.0], d, d, beta, nic_f, nic_b)
    assert got == pytest.approx(want, rel=1e-12)
    sim = simulated_step(q, plan, ("bubbles", "transfers", "contention"))
    assert sim == pytest.approx(got, rel=1e-9 if schedule == "gpipe" else 0.005)
