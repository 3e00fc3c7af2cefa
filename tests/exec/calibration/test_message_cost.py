"""The engine's CPU per boundary message, from validate's two-rank calibration runs: the
arithmetic on hand values, the plans it runs (one per cut the plans make), and what the
simulator makes of the figures."""

from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from heterps_exec.calibration import message_cost
from heterps_exec.calibration.validate import simulator_options
from heterps_sim.core.plan import Plan, Stage
from heterps_sim.des import MessageCpu, simulate
from heterps_sim.inputs.load import load_input

SCENARIO = "scenarios/exec-tiny.yaml"


def test_per_message_cpu_takes_out_the_one_rank_runtime_and_the_bytes():
    links = {"send_s": 7e-5, "recv_s": 7e-5, "send_s_per_byte": 1e-10, "recv_s_per_byte": 2e-10}
    up, down = message_cost.per_message_s(1e-3, [3e-3, 2.6e-3], 8, links, 1e5)
    # each rank: (its CPU - the one-rank run's) over its 2 x 8 messages, less its half of
    # (1 + 2) e-10 x 1e5 bytes
    assert up == pytest.approx((2e-3 - 3e-10 * 1e5 / 2) / 16)
    assert down == pytest.approx((1.6e-3 - 3e-10 * 1e5 / 2) / 16)
    # without a links JSON: no per-byte part, nothing taken out for bytes
    assert message_cost.per_message_s(1e-3, [3e-3, 2.6e-3], 8, None, 1e5) == \
        pytest.approx((2e-3 / 16, 1.6e-3 / 16))


def test_a_noisy_calibration_never_credits_cpu():
    assert message_cost.per_message_s(2e-3, [1.5e-3, 2.4e-3], 8, None, 0.0) == \
        pytest.approx((0.0, 0.4e-3 / 16))
    with pytest.raises(ValueError, match="two pipeline ranks"):
        message_cost.per_message_s(1e-3, [2e-3], 8, None, 0.0)


def test_outside_compute_cpu_is_the_ranks_cpu_less_its_compute_spans():
    assert message_cost.outside_compute_cpu({"cpu_s": 7e-3, "compute_cpu_s": 5e-3}) == \
        pytest.approx(2e-3)
    # runs saved before span CPU was recorded read 0 for both: nothing, not a negative
    assert message_cost.outside_compute_cpu({"cpu_s": 0.0, "compute_cpu_s": 1e-3}) == 0.0


LAYERS = list(load_input(SCENARIO).problem.layer_names)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b", "async"])
def test_a_calibration_plan_cuts_the_model_where_asked(schedule):
    plan = message_cost.cut_plan(LAYERS, 10, "cpu-a", schedule)
    assert [s.layers for s in plan.stages] == [tuple(LAYERS[:10]), tuple(LAYERS[10:])]
    assert plan.stages[0].layers[-1] == "concat"
    assert all(s.num_replicas == 1 and s.resource == "cpu-a" for s in plan.stages)
    assert plan.num_microbatches == message_cost.MICROBATCHES == 8
    assert plan.schedule == schedule
    for cut in (0, len(LAYERS)):
        with pytest.raises(ValueError, match="empty"):
            message_cost.cut_plan(LAYERS, cut, "cpu-a", schedule)


def _plan(cuts, schedule, replicas=None):
    bounds = [0, *cuts, len(LAYERS)]
    replicas = replicas or [1] * (len(bounds) - 1)
    return Plan(stages=tuple(Stage(layers=tuple(LAYERS[a:b]), resource="cpu-a", num_replicas=k)
                             for a, b, k in zip(bounds[:-1], bounds[1:], replicas,
                                                strict=True)),
                num_microbatches=4, schedule=schedule)


def test_the_cuts_calibrated_are_those_the_plans_make_per_schedule():
    plans = [_plan([10], "1f1b"), _plan([9, 11], "1f1b"), _plan([10], "async", [2, 1]),
             _plan([], "gpipe"), _plan([3], "gpipe")]
    assert message_cost.plan_cuts(plans, LAYERS) == {"1f1b": (9, 10, 11), "async": (10,),
                                                     "gpipe": (3,)}
    assert message_cost.plan_cuts([_plan([], "1f1b")], LAYERS) == {}


def _result(stages):
    return SimpleNamespace(extra={"stages": [{"cpu_s": c, "compute_cpu_s": 0.0}
                                             for c in stages]})


def test_calibrate_measures_each_cut_and_keys_it_by_the_layer_before():
    """Fake runs whose ranks' CPU outside compute grows with the cut: each cut's figure is
    its own runs' (median over repeats), the runs are the plans' cuts only, named by them."""
    problem = load_input(SCENARIO).problem
    ran = []

    def run_plan(plan, name):
        ran.append((name, plan.schedule, len(plan.stages[0].layers)))
        c = len(plan.stages[0].layers)
        return [_result([1e-3 + c * 1e-4 + r * 1e-5, 8e-4 + r * 1e-5]) for r in (0, 2, 1)]

    links = {"send_s": 9e-5, "recv_s": 1e-4}
    got = message_cost.calibrate([_plan([10], "1f1b"), _plan([9, 11], "1f1b"),
                                  _plan([10], "async")], problem, links, run_plan,
                                 lambda m: [_result([5e-4])] * 3)
    assert ran == [("1f1b-cut9", "1f1b", 9), ("1f1b-cut10", "1f1b", 10),
                   ("1f1b-cut11", "1f1b", 11), ("async-cut10", "async", 10)]
    for schedule, cuts in (("1f1b", (9, 10, 11)), ("async", (10,))):
        fig = got[schedule]
        assert (fig["send_s"], fig["recv_s"]) == (9e-5, 1e-4)  # rings and other cuts: gloo's
        want = {LAYERS[c - 1]: (pytest.approx((1e-3 + c * 1e-4 + 1e-5 - 5e-4) / 16),
                                pytest.approx((8e-4 + 1e-5 - 5e-4) / 16)) for c in cuts}
        assert fig["per_cut_s"] == want
    assert message_cost.calibrate([_plan([], "1f1b")], problem, links, run_plan,
                                  lambda m: []) == {}


def test_a_cut_figure_is_never_negative_and_each_side_pays_its_own():
    with pytest.raises(ValidationError):
        MessageCpu(send_s=1e-4, recv_s=1e-4, per_cut_s={"concat": (1e-5, -1e-5)})
    cpu = MessageCpu(send_s=1e-4, recv_s=2e-4, recv_s_per_byte=1e-9,
                     per_cut_s={"concat": (5e-5, 3e-5)})
    # a forward crosses from the upstream rank (send) to the downstream one (receive); a
    # gradient back: each side's figure, the per-byte term on top
    assert cpu.send(0.0, "concat") == 5e-5 and cpu.send(0.0, "concat", upstream=False) == 3e-5
    assert cpu.recv(1e3, "concat") == pytest.approx(3e-5 + 1e-6)
    assert cpu.recv(1e3, "concat", upstream=True) == pytest.approx(5e-5 + 1e-6)
    assert cpu.send(0.0, "fc_0") == 1e-4 and cpu.recv(1e3) == pytest.approx(2e-4 + 1e-6)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_the_simulator_charges_each_message_the_calibrated_cpu(schedule):
    """On a calibration plan, a core per rank: every operation of a two-stage pipeline sends
    or receives one message, so each second charged per message lengthens the flushed step by
    2m + 2 of them: the bottleneck rank's m forwards and m backwards, and the other rank's
    first forward (the fill) and last backward (the drain). The cut's own figures (per_cut_s)
    do the same; charged to one side only, that side's operations alone pay (the two sides'
    increases add up to it; under gpipe 2m on the bottleneck, 2 on the other); another cut's
    figure charges nothing."""
    problem = load_input(SCENARIO).problem
    plan = message_cost.cut_plan(LAYERS, 7, problem.type_names[0], schedule)
    m = plan.num_microbatches

    def step(each: float = 0.0, per_cut=None) -> float:
        cpu = {"send_s": each, "recv_s": each, "per_cut_s": per_cut or {}}
        options = simulator_options(plan, [1.0, 1.0], steps=6, warmup=2, allreduce=None,
                                    message_cpu=cpu)
        options = options.model_copy(update={"host_cores": 2})
        return simulate(problem, plan, seed=0, options=options, record_spans=False).result \
            .step_time_s

    base = step()
    cut = LAYERS[6]
    for each in (1e-4, 1e-3):
        assert step(each) - base == pytest.approx((2 * m + 2) * each, rel=1e-9)
        assert step(per_cut={cut: (each, each)}) - base == pytest.approx((2 * m + 2) * each,
                                                                         rel=1e-9)
    each = 1e-5  # small: the bottleneck stays where it is
    sides = [step(per_cut={cut: pair}) - base for pair in ((each, 0.0), (0.0, each))]
    assert sum(sides) == pytest.approx((2 * m + 2) * each, rel=1e-9)
    assert min(sides) >= 2 * each * (1 - 1e-9)  # at least the other rank's fill and drain
    if schedule == "gpipe":  # all forwards, then all backwards: one rank's ops pace the step
        assert sorted(sides) == pytest.approx([2 * each, 2 * m * each], rel=1e-9)
    assert step(per_cut={LAYERS[9]: (1e-3, 1e-3)}) == base


def test_a_folder_with_the_calibration_runs_is_told_apart(tmp_path):
    assert not message_cost.saved_in(tmp_path)
    (tmp_path / "runcalibration-m8-0").mkdir()  # the one-rank runs alone
    assert not message_cost.saved_in(tmp_path)
    (tmp_path / "runcalibration-async-cut10-0").mkdir()
    assert message_cost.saved_in(tmp_path)


def test_validate_prints_each_cut_and_side_and_the_all_reduce_note():
    """The text report (validate without --json) after a calibration: one line per schedule
    with each cut's upstream / downstream figure, and the links' missing all-reduces."""
    from heterps_exec.cli.validate import _table
    row = {"plan": 0, "replicas": "1-1", "schedule": "1f1b", "microbatches": 8,
           "measured": 1000.0, "des": 1100.0, "analytic": 900.0, "run_speed": 1.0,
           "des_at_run_speed": 1050.0}
    report = {"plans": [row], "mape_des": 10.0, "mape_analytic": 10.0, "kendall_tau_des": 1.0,
              "kendall_tau_analytic": 1.0, "num_plans": 1, "host_load_before": 0.0,
              "host_cores": 2, "core_sharing": "fair", "step_overhead_s": 1e-3,
              "microbatch_overhead_s": 1e-5, "mape_des_at_run_speed": 5.0,
              "mape_analytic_at_run_speed": 5.0, "kendall_tau_des_at_run_speed": 1.0,
              "kendall_tau_analytic_at_run_speed": 1.0, "component_errors_des": {},
              "allreduce_note": "all-reduces of 4 ranks: not in the links file",
              "message_cpu": {"1f1b": {"send_s": 7e-5, "recv_s": 7e-5,
                                       "per_cut_s": {"emb_7": [1.04e-4, 5.3e-5],
                                                     "concat": [1e-4, 5.3e-5]}}}}
    text = _table(report)
    assert "note: all-reduces of 4 ranks: not in the links file" in text
    line = next(x for x in text.splitlines() if x.startswith("CPU per boundary message"))
    assert "1f1b" in line and "emb_7 104 / 53 us, concat 100 / 53 us" in line
