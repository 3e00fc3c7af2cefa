"""Message CPU on a shared host (cores + transfers + DesOptions.message_cpu): an exact
timeline of two ranks on one core, and nothing changes where the cores effect is off."""

import pytest

from heterps_sim.des import DesOptions, MessageCpu, simulate
from heterps_sim.testing import chain_plan, chain_problem

# Stage 0 takes 3 s per batch (F 0.5 + B 1.0 per microbatch, m = 2), stage 1 6 s (F 1, B 2).
# A microbatch's message carries 4096 x 0.5 / 2 = 1024 bytes: 1024 / 4096 B/s + 0.25 s latency
# = 0.5 s on the wire. Its CPU: send 0.125 + 1024 / 8192 = 0.25 s, receive 0.25 + 1024 / 4096
# = 0.5 s, so F0 = 0.5 + 0.25 (sends), F1 = 1 + 0.5 (receives), B1 = 2 + 0.25, B0 = 1 + 0.5.
CPU = MessageCpu(send_s=0.125, send_s_per_byte=1 / 8192, recv_s=0.25, recv_s_per_byte=1 / 4096)
S0, S1 = "stage 0 / replica 0", "stage 1 / replica 0"
# gpipe on one core (FIFO): S1's F0 arrives at 1.25 while S0's F1 holds the core to 1.5; S0's
# B0 arrives at 7.25 while S1's B1 holds it to 9.0. Without message CPU the same step is 9 s:
# the 2 microbatches x 4 messages add 2 x (0.25 + 0.5 + 0.25 + 0.5) = 3 s, all on the one core.
STEP = [(0.0, S0, "F0", 0.75), (0.75, S0, "F1", 1.5), (1.5, S1, "F0", 3.0),
        (3.0, S1, "F1", 4.5), (4.5, S1, "B0", 6.75), (6.75, S1, "B1", 9.0),
        (9.0, S0, "B0", 10.5), (10.5, S0, "B1", 12.0)]


def _run(effects, message_cpu=CPU, cores=1):
    p = chain_problem([3.0, 6.0], boundary_bytes=4096, network=4096, latency_s=0.25)
    opts = DesOptions(schedule="gpipe", effects=effects, num_microbatches=2, num_steps=2,
                      warmup_steps=0, sends_leave_work=True, host_cores=cores,
                      message_cpu=message_cpu)
    return simulate(p, chain_plan(p, [1, 1]), options=opts)


def _timeline(run):
    return sorted((s.start_s, s.track.split(" (")[0], s.name, s.end_s) for s in run.spans
                  if s.track.startswith("stage"))


def test_two_ranks_on_one_core_pay_for_their_messages():
    run = _run({"bubbles", "transfers", "cores"})
    second = [(a + 12.0, t, n[0] + str(int(n[1:]) + 2), b + 12.0) for a, t, n, b in STEP]
    assert _timeline(run) == sorted(STEP + second)  # the flush: step 2 repeats step 1
    assert run.result.step_time_s == 12.0
    assert _run({"bubbles", "transfers", "cores"}, message_cpu=None).result.step_time_s == 9.0
    # the messages' CPU is communication, not compute (what a run's compute is compared with)
    assert run.result.extra["stage_compute_s"] == pytest.approx([3.0, 6.0])


@pytest.mark.parametrize("effects", [{"bubbles", "transfers"}, {"bubbles"},
                                     {"bubbles", "cores"}])
def test_message_cpu_needs_cores_and_messages(effects):
    """Off the shared host (no cores effect), or with no explicit messages, nothing is
    charged: the planner's pricing of rented units does not change."""
    assert (_run(effects, cores=2).result.throughput
            == _run(effects, message_cpu=None, cores=2).result.throughput)
