"""A continuous ring all-reduce's CPU on a shared host: it runs beside the next step's compute
(the engine's async client applies the update at a later forward), so with cores, transfers
and message_cpu its members' CPU is charged to their backwards; a flushed ring is not (its
measured time already holds its CPU, at a barrier the stage's cores wait on)."""

import pytest

from heterps_sim.cost.reference import plan_stages
from heterps_sim.des import DesOptions, MessageCpu
from heterps_sim.des.work import ring_cpu_s, stage_work
from heterps_sim.testing import chain_plan, chain_problem

CPU = MessageCpu(send_s=0.125, send_s_per_byte=1 / 8192, recv_s=0.25, recv_s_per_byte=1 / 4096)


def test_ring_cpu_by_hand():
    # k = 2, 8192 bytes: 2 chunks of 4096 each way; send 0.125 + 0.5, receive 0.25 + 1.0
    assert ring_cpu_s(CPU, 2, 8192) == pytest.approx(2 * (0.625 + 1.25))
    # k = 4: 6 chunks of 2048 each way; send 0.125 + 0.25, receive 0.25 + 0.5
    assert ring_cpu_s(CPU, 4, 8192) == pytest.approx(6 * (0.375 + 0.75))
    assert ring_cpu_s(CPU, 1, 8192) == 0.0 and ring_cpu_s(CPU, 2, 0.0) == 0.0


def _backwards(flush: bool, message_cpu, k: int = 2, m: int = 4, ring_rows=None):
    p = chain_problem([3.0, 6.0], boundary_bytes=4096, network=4096, latency_s=0.25)
    plan = chain_plan(p, [k, 1], microbatches=m)
    opts = DesOptions(effects={"bubbles", "transfers", "allreduce", "cores"},
                      num_microbatches=m, sends_leave_work=True, host_cores=2,
                      message_cpu=message_cpu, param_bytes=(8192.0, 0.0),
                      allreduce_cpu_measured=ring_rows)
    works, _ = stage_work(p, plan_stages(p, plan), [k, 1], m, opts, flush)
    return [w.backward_s for w in works], [w.forward_s for w in works], works


@pytest.mark.parametrize("k", [2, 3])
def test_a_continuous_ring_charges_each_backward_its_share(k):
    m = 6
    charged, fwd, works = _backwards(False, CPU, k, m)
    plain, fwd_plain, _ = _backwards(False, None, k, m)
    assert works[0].allreduce_bytes == 8192.0 and works[1].allreduce_bytes == 0.0
    # messages alone: what test_message_cpu pins; the ring adds k/m of one member's CPU
    messages = _backwards(False, CPU, 1, m)[0][0] - _backwards(False, None, 1, m)[0][0]
    assert charged[0] - plain[0] == pytest.approx(messages + ring_cpu_s(CPU, k, 8192) * k / m)
    assert charged[1] - plain[1] == pytest.approx(_backwards(False, CPU, 1, m)[0][1]
                                                  - _backwards(False, None, 1, m)[0][1])
    assert fwd[0] - fwd_plain[0] == pytest.approx(_backwards(False, CPU, 1, m)[1][0]
                                                  - _backwards(False, None, 1, m)[1][0])


def test_a_flushed_ring_is_not_charged():
    charged, _, _ = _backwards(True, CPU, 2)
    plain, _, _ = _backwards(True, None, 2)
    one, _, _ = _backwards(True, CPU, 1)
    one_plain, _, _ = _backwards(True, None, 1)
    assert charged[0] - plain[0] == pytest.approx(one[0] - one_plain[0])


# measured CPU of one all-reduce per member: 2 ranks at 4096 and 16384 bytes
ROWS = ((2, 4096.0, 0.5), (2, 16384.0, 1.25))


@pytest.mark.parametrize(("k", "rows", "ring"), [
    (2, ROWS, 0.75),             # 8192 bytes: a third of the way from 4096 to 16384
    (3, ROWS, 1.5),              # 3 ranks not measured: 2 ranks' x (3 - 1) / (2 - 1)
    (3, None, None)])            # nothing measured: composed from the message CPU
def test_a_continuous_ring_charges_its_measured_cpu_where_measured(k, rows, ring):
    m = 6
    charged = _backwards(False, CPU, k, m, rows)[0][0]
    plain = _backwards(False, None, k, m)[0][0]
    messages = _backwards(False, CPU, 1, m)[0][0] - _backwards(False, None, 1, m)[0][0]
    expected = ring_cpu_s(CPU, k, 8192) if ring is None else ring
    assert charged - plain == pytest.approx(messages + expected * k / m)
    # flushed: the measured CPU is not charged either (the ring's measured time holds it)
    flushed = _backwards(True, CPU, k, m, rows)[0][0]
    assert flushed == pytest.approx(_backwards(True, CPU, k, m)[0][0])
