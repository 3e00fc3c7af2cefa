"""Where the flushed closed form (cost/flush.py) and the simulator part, on hand timelines.

The simulator follows the engine's order (core/lanes.py, core/pipeline.py); each case below
shows its exact timeline, checked by hand against that order, and pins what the closed form
reads instead, so a change to either side shows up here.

1. 1F1B keeps at most S - g microbatches in flight at stage g: a round trip to the last stage
   and back paces the step when messages are long. The flow shop of the closed form has no
   such term (optimistic). Gpipe sends every forward at once and agrees exactly.
2. A last stage of several units starts the backward of its first microbatch once its own
   forwards are done, before the other units' (so before every forward of the step has
   ended); the flow shop starts every backward after the last forward (pessimistic). The
   simulator's step lies below the relaxation T >= A + PF' + C_g + pb_g + r_g that the
   Lagrangian bound of the exact search rests on (schedulers/exact/flushed_lagrange.py), so
   the closed form cannot follow it there without that bound changing too.
"""

import pytest

from heterps_sim.cost.flush import flushed_step_time, flushed_throughput, relaxation_step_time
from heterps_sim.des import DesOptions, simulate
from heterps_sim.testing import chain_plan, chain_problem

B = 64


def run(problem, plan, effects):
    opts = DesOptions(effects=effects, num_steps=2, warmup_steps=0)
    return simulate(problem, plan, options=opts)


def stage_ops(run_, step_end):
    """(start, track, name, end) of the compute spans of the first step, sorted."""
    return sorted((s.start_s, s.track.split(" (")[0], s.name, s.end_s) for s in run_.spans
                  if s.track.startswith("stage") and s.end_s <= step_end + 1e-12
                  and s.name[0] in "FB")


def test_one_f_one_b_round_trips_pace_the_step():
    """Two stages of one unit, m = 4, a 1 s latency each way (transfers on), stage 0's work
    3 s per batch (2 s + the boundary's latency, paper model), stage 1's 3 s: every forward
    0.25 s, every backward 0.5 s. Stage 0 runs F0 F1 B0 F2 B1 F3 B2 B3 (one warm-up forward):
    F2 waits for B0, which waits for microbatch 0's trip there and back,
    RT = 0.25 + 1 + 0.25 + 0.5 + 1 + 0.5 = 3.5 s; B2 ends at B0's end + RT = 7.0, B3 at
    B1's end (4.25) + RT = 7.75. The flow shop reads 5.75 (gpipe's step, exact there)."""
    q = chain_problem([2.0, 3.0], latency_s=1.0, batch_size=B)
    s0, s1 = "stage 0 / replica 0", "stage 1 / replica 0"
    want = [(0.0, s0, "F0", 0.25), (0.25, s0, "F1", 0.5), (1.25, s1, "F0", 1.5),
            (1.5, s1, "B0", 2.0), (2.0, s1, "F1", 2.25), (2.25, s1, "B1", 2.75),
            (3.0, s0, "B0", 3.5), (3.5, s0, "F2", 3.75), (3.75, s0, "B1", 4.25),
            (4.25, s0, "F3", 4.5), (4.75, s1, "F2", 5.0), (5.0, s1, "B2", 5.5),
            (5.5, s1, "F3", 5.75), (5.75, s1, "B3", 6.25), (6.5, s0, "B2", 7.0),
            (7.25, s0, "B3", 7.75)]
    plan = chain_plan(q, [1, 1], microbatches=4, schedule="1f1b")
    got = run(q, plan, ("bubbles", "transfers"))
    assert stage_ops(got, 7.75) == want
    assert got.result.step_time_s == 7.75
    closed = B / flushed_throughput(q, plan, 4, allreduce=False, transfers=True)
    assert closed == pytest.approx(5.75, rel=1e-12)  # the flow shop: optimistic by 2 s
    gpipe = chain_plan(q, [1, 1], microbatches=4, schedule="gpipe")
    assert run(q, gpipe, ("bubbles", "transfers")).result.step_time_s == 5.75
    assert B / flushed_throughput(q, gpipe, 4, allreduce=False,
                                  transfers=True) == pytest.approx(5.75, rel=1e-12)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_backwards_start_before_the_last_forward_on_a_wide_last_stage(schedule):
    """Stage 0 on one unit, stage 1 on two, m = 2, 3 s per batch each: f = 0.5, b = 1.0.
    Microbatch 0 runs on stage 1's unit 0, which starts its backward at 1.0, while unit 1
    still waits for microbatch 1's forward (1.0-1.5). Stage 0's backwards: 2.0-3.0,
    3.0-4.0: T = 4.0 (both schedules: each unit of stage 1 has one microbatch).
    The flow shop: forwards end at f + f + pace (m - 1) f = 1.5, then b + b + pace b:
    T = 4.5, and so does the relaxation at stage 0, A + PF' + C_0 + pb_0 + r_0 =
    1.0 + 0.5 + 2.0 + 1.0 + 0 (pessimistic by 0.5 s, and no closed form at or above the
    relaxation can read 4.0)."""
    p = chain_problem([3.0, 3.0], batch_size=B)
    s0, s1a, s1b = "stage 0 / replica 0", "stage 1 / replica 0", "stage 1 / replica 1"
    want = [(0.0, s0, "F0", 0.5), (0.5, s0, "F1", 1.0), (0.5, s1a, "F0", 1.0),
            (1.0, s1a, "B0", 2.0), (1.0, s1b, "F1", 1.5), (1.5, s1b, "B1", 2.5),
            (2.0, s0, "B0", 3.0), (3.0, s0, "B1", 4.0)]
    plan = chain_plan(p, [1, 2], microbatches=2, schedule=schedule)
    got = run(p, plan, "bubbles")
    assert stage_ops(got, 4.0) == want
    assert got.result.step_time_s == 4.0
    closed = B / flushed_throughput(p, plan, 2, allreduce=False, transfers=False)
    f, b = 0.5, 1.0
    relaxation = (f + f) + f + (b + b) + b
    assert closed == pytest.approx(relaxation, rel=1e-12) and relaxation == 4.5
    least = B / flushed_throughput(p, plan, 2, allreduce=False, transfers=False,
                                   step_time=relaxation_step_time)
    assert least == pytest.approx(relaxation, rel=1e-12)  # the closed form cannot go lower


def test_relaxation_counts_only_a_stages_own_backward_pace():
    """Stage 1 paces the backwards (3 microbatches on one unit), stage 0 has the longer
    step-end phase: the closed form adds stage 1's pace to stage 0's end, the relaxation
    only stage 0's own (none): w = [1, 2], busy = [1, 6], u = [5, 0], beta = 2/3.
    Forwards end at 1/3 + 2/3 + 4/3 = 7/3; stage 0 ends at 7/3 + 4/3 + 2/3 + 8/3 + 5 = 12
    in the closed form, 7/3 + 2 + 5 = 28/3 in the relaxation; stage 1's own end is
    7/3 + 4/3 + 8/3 = 19/3 in both."""
    beta = 2.0 / 3.0
    args = ([1.0, 2.0], [1.0, 6.0], [5.0, 0.0], [0.0, 0.0], [0.0], [0.0], beta)
    assert flushed_step_time(*args) == pytest.approx(12.0, rel=1e-12)
    assert relaxation_step_time(*args) == pytest.approx(28.0 / 3.0, rel=1e-12)
