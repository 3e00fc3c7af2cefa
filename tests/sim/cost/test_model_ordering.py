"""The orderings that must hold between the analytic models and the simulator, for the same
plan with the same units (random default-model problems with a parameter server, random plans,
flushed schedules, m):

    flushed closed form  <=  default model  <=  simulator, effects off  <=  paper model
                                                simulator, effects on   <=  simulator, effects off

- the default model only adds to the paper's stage time (fixed costs, all-reduce, the PS side of
  embedding traffic, per-microbatch latency, the PS cap);
- with its effects off the simulator runs the default stage work without the all-reduce and the
  PS cap (the effects add those), so it is at least as fast as the default model and no faster
  than the paper's;
- an effect only ever adds time;
- the flushed closed form (cost/flush.py) is at least every stage's ET.
Not ordered (and so not asserted): the simulator with its effects on against either analytic
model; that is the self-consistency benchmark's measurement (bench_self_consistency.py)."""

import sys
from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from heterps_sim.core.ps_spec import DEFAULT_PS
from heterps_sim.cost.flush import flushed_throughput
from heterps_sim.cost.reference import evaluate_plan
from heterps_sim.des.invariants import exact_window, throughput
from heterps_sim.inputs.ps_section import with_ps
from heterps_sim.planner.check import DETERMINISTIC_EFFECTS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "des"))
from test_default_effects_off import default_case, runs  # noqa: E402

TOL = 1e-9


def ordered_case(seed: int):
    case = default_case(seed)
    problem = with_ps(case.problem, DEFAULT_PS)  # odt_s gains the PS side (default model)
    schedule = case.schedule if case.schedule != "async" else "1f1b"
    return replace(case, problem=problem, schedule=schedule,
                   plan=replace(case.plan, schedule=schedule))


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_models_and_simulator_are_ordered(seed):
    case = ordered_case(seed)
    assume(runs(case))
    p, plan = case.problem, case.plan
    paper = evaluate_plan(p.with_model("paper"), plan).throughput
    default = evaluate_plan(p, plan).throughput
    off = throughput(case, frozenset())
    on = throughput(case, frozenset(DETERMINISTIC_EFFECTS))
    flushed = flushed_throughput(p, plan, case.num_microbatches)
    window = TOL if exact_window(case) else 2e-3  # a long routing period: 8 fills measured
    assert flushed <= default * (1 + TOL), (case, flushed, default)
    assert default <= off * (1 + window), (case, default, off)
    assert off <= paper * (1 + window), (case, off, paper)
    assert on <= off * (1 + TOL), (case, on, off)
