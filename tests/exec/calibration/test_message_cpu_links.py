"""The links JSON's measured message CPU reaches the simulator's options (heterps-exec
validate's and run's prediction), and a bad one is refused naming the field."""

import json
from pathlib import Path

import pytest

from heterps_exec.calibration.inputs import read_links
from heterps_exec.calibration.validate import simulator_options
from heterps_sim.core.files import UserFileError
from heterps_sim.core.plan import Plan, Stage

LINKS = Path(__file__).resolve().parents[3] / "traces/profiles/vm-links.json"


def _plan() -> Plan:
    return Plan(stages=(Stage(layers=("a",), resource="t", num_replicas=1),
                        Stage(layers=("b",), resource="t", num_replicas=1)), num_microbatches=8)


def test_the_shipped_links_charge_message_cpu():
    links = read_links(LINKS)
    cpu = links["message_cpu"]
    options = simulator_options(_plan(), [1.0, 1.0], steps=4, warmup=1, allreduce=None,
                                message_cpu=cpu)
    assert options.on("cores") and options.on("transfers")
    assert options.message_cpu.send(9920) == cpu["send_s"] + 9920 * cpu["send_s_per_byte"]
    assert options.message_cpu.recv(0) == cpu["recv_s"] > 0
    assert simulator_options(_plan(), [1.0, 1.0], steps=4, warmup=1,
                             allreduce=None).message_cpu is None


def test_a_negative_message_cpu_is_refused(tmp_path):
    bad = tmp_path / "links.json"
    bad.write_text(json.dumps({"latency_s": 2e-4, "bytes_per_s": 1e9,
                               "message_cpu": {"send_s": -1.0, "recv_s": 1e-4}}))
    with pytest.raises(UserFileError, match="message_cpu"):
        read_links(bad)


def test_a_plan_whose_all_reduce_the_links_did_not_measure_is_said_so():
    from heterps_exec.calibration.validate import allreduce_note

    def plan(*ks):
        return Plan(stages=tuple(Stage(layers=(f"l{i}",), resource="t", num_replicas=k)
                                 for i, k in enumerate(ks)), num_microbatches=4)

    rows = [{"ranks": k, "bytes": 4.0, "seconds": 1e-3} for k in (2, 3)]
    assert allreduce_note({"allreduce": rows}, [plan(2, 1), plan(3)]) is None
    assert allreduce_note({"allreduce": rows}, [plan(1, 1)]) is None  # no all-reduce at all
    note = allreduce_note({"allreduce": rows}, [plan(2, 5), plan(4)])
    assert note.startswith("all-reduces of 4, 5 ranks: not in the links file") \
        and "measured 2, 3" in note and "linear in k - 1" in note
    assert "composed from its latency and bandwidth" in allreduce_note({}, [plan(2)])
    # the shipped links measured 2-6 ranks: validate's plans (up to 6 ranks) need no note
    assert allreduce_note(read_links(LINKS), [plan(6), plan(2, 3)]) is None
