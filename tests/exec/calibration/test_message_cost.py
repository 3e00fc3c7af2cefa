"""The engine's CPU per boundary message, from validate's two-rank calibration runs: the
arithmetic on hand values, the plan it runs, and what the simulator makes of the figure."""

import pytest

from heterps_exec.calibration import message_cost
from heterps_exec.calibration.validate import simulator_options
from heterps_sim.des import simulate
from heterps_sim.inputs.load import load_input

SCENARIO = "scenarios/exec-tiny.yaml"


def test_per_message_cpu_takes_out_the_one_rank_runtime_and_the_bytes():
    links = {"send_s": 7e-5, "recv_s": 7e-5, "send_s_per_byte": 1e-10, "recv_s_per_byte": 2e-10}
    got = message_cost.per_message_cpu(1e-3, [3e-3, 2.6e-3], 8, links, 1e5)
    # (3 + 2.6 - 2 x 1) ms over 4 x 8 messages and sides, less (1 + 2) e-10 x 1e5 / 32
    each = 3.6e-3 / 32 - 3e-10 * 1e5 / 32
    assert got["send_s"] == pytest.approx(each) and got["recv_s"] == pytest.approx(each)
    assert (got["send_s_per_byte"], got["recv_s_per_byte"]) == (1e-10, 2e-10)
    # without a links JSON: no per-byte part, nothing taken out for bytes
    bare = message_cost.per_message_cpu(1e-3, [3e-3, 2.6e-3], 8, None, 1e5)
    assert bare["send_s"] == pytest.approx(3.6e-3 / 32) and bare["recv_s_per_byte"] == 0.0


def test_a_noisy_calibration_never_credits_cpu():
    got = message_cost.per_message_cpu(2e-3, [1.5e-3, 1.9e-3], 8, None, 0.0)
    assert got["send_s"] == 0.0 and got["recv_s"] == 0.0
    with pytest.raises(ValueError, match="two pipeline ranks"):
        message_cost.per_message_cpu(1e-3, [2e-3], 8, None, 0.0)


def test_outside_compute_cpu_is_the_ranks_cpu_less_its_compute_spans():
    assert message_cost.outside_compute_cpu({"cpu_s": 7e-3, "compute_cpu_s": 5e-3}) == \
        pytest.approx(2e-3)
    # runs saved before span CPU was recorded read 0 for both: nothing, not a negative
    assert message_cost.outside_compute_cpu({"cpu_s": 0.0, "compute_cpu_s": 1e-3}) == 0.0


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b", "async"])
def test_the_calibration_plan_cuts_the_model_in_half(schedule):
    layers = list(load_input(SCENARIO).problem.layer_names)
    plan = message_cost.pipeline_plan(layers, "cpu-a", schedule)
    assert [len(s.layers) for s in plan.stages] == [len(layers) // 2,
                                                    len(layers) - len(layers) // 2]
    assert [s.layers for s in plan.stages] == [tuple(layers[:len(layers) // 2]),
                                               tuple(layers[len(layers) // 2:])]
    assert all(s.num_replicas == 1 and s.resource == "cpu-a" for s in plan.stages)
    assert plan.num_microbatches == message_cost.MICROBATCHES == 8
    assert plan.schedule == schedule


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_the_simulator_charges_each_message_the_calibrated_cpu(schedule):
    """On the calibration's own plan, a core per rank: every operation of a two-stage
    pipeline sends or receives one message, so each second charged per message and side
    lengthens the flushed step by 2m + 2 of them: the bottleneck rank's m forwards and m
    backwards, and the other rank's first forward (the fill) and last backward (the drain)."""
    problem = load_input(SCENARIO).problem
    plan = message_cost.pipeline_plan(list(problem.layer_names), problem.type_names[0],
                                      schedule)
    m = plan.num_microbatches

    def step(each: float) -> float:
        options = simulator_options(plan, [1.0, 1.0], steps=6, warmup=2, allreduce=None,
                                    message_cpu={"send_s": each, "recv_s": each})
        options = options.model_copy(update={"host_cores": 2})
        return simulate(problem, plan, seed=0, options=options, record_spans=False).result \
            .step_time_s

    base = step(0.0)
    for each in (1e-4, 1e-3):
        assert step(each) - base == pytest.approx((2 * m + 2) * each, rel=1e-9)


def test_a_folder_with_the_calibration_runs_is_told_apart(tmp_path):
    assert not message_cost.saved_in(tmp_path)
    (tmp_path / "runcalibration-m8-0").mkdir()  # the one-rank runs alone
    assert not message_cost.saved_in(tmp_path)
    (tmp_path / "runcalibration-async-pipeline-0").mkdir()
    assert message_cost.saved_in(tmp_path)
