"""Plans chosen on the part of a trace the planner knows, replayed on the part held out
(inputs/market.Market.known, planner/spot.spot_priced(within_trace=True), planner/robust's
market_sweep and held_out)."""

from dataclasses import replace

import numpy as np
import pytest

from heterps_sim.inputs.load import load_input
from heterps_sim.inputs.market import parse_market
from heterps_sim.planner import Planner
from heterps_sim.planner.robust import growth_moves, held_out, market_sweep, unit_repair
from heterps_sim.planner.spot import spot_priced

# Levels (seconds, units): the first hour always holds 3 units; the second falls to 1 unit
# for 40 minutes.
TRACE = "0,3\n3600,3\n4000,1\n6400,3\n7200,3\n"


def _market(tmp_path, name, replay, fit=(0, 3600), **kw):
    (tmp_path / "t.csv").write_text(TRACE)
    terms = {"price_per_hour": 0.05, "trace": "t.csv", "trace_window_s": list(replay)}
    if fit is not None:
        terms["fit_window_s"] = list(fit)
    return parse_market({"spot": {name: terms}, "checkpoint": {"write_s": 1.0}, **kw}, "<m>",
                        base=tmp_path)


@pytest.fixture(scope="module")
def tiny():
    """exec-tiny with a job of about 300 s (long enough for the trace to matter, short enough
    to finish between its falls) and its floor at 80% of its answer's throughput."""
    problem = load_input("scenarios/exec-tiny.yaml").problem
    planner = Planner(search="exact")
    answer = planner.plan(problem)
    problem = replace(problem, num_samples=300 * answer.result.throughput,
                      throughput_limit=0.8 * answer.result.throughput)
    (name,) = {n for s in answer.plan.stages for n, _ in s.groups}
    return problem, planner, name


def test_the_market_the_planner_knows_replays_the_fit_window(tmp_path):
    market = _market(tmp_path, "t4", (3600, 7200))
    assert market.holds_out
    assert market.spot["t4"].availability.units == (3, 1, 3)  # the replay: the second hour
    known = market.known()
    assert not known.holds_out
    assert known.spot["t4"].availability.units == (3,)  # the first hour
    assert known.spot["t4"].fit_on is None
    assert known.spot["t4"].price_per_hour == market.spot["t4"].price_per_hour
    assert market.lowest_units("t4") == 3  # what the planner knows it always held
    # without a fit window nothing is held out: the market is its own known market
    alone = _market(tmp_path, "t4", (3600, 7200), fit=None)
    assert not alone.holds_out and alone.known() is alone
    assert alone.lowest_units("t4") == 1
    assert alone.lowest_units("a100") is None


def test_within_the_trace_caps_the_traced_type_at_its_known_low(tmp_path, tiny):
    problem, planner, name = tiny
    market = _market(tmp_path, name, (3600, 7200), fit=(3600, 7200))
    names = list(problem.type_names)
    k = names.index(name)
    capped = spot_priced(problem, market, within_trace=True)
    assert capped.available[k] == 1  # the fit window fell to 1 unit
    assert spot_priced(problem, market).available[k] == problem.available[k]
    assert all(a == b for i, (a, b) in enumerate(zip(capped.available, problem.available))
               if i != k)
    assert capped.price_per_hour[k] == pytest.approx(0.05)
    # a plan grown within the caps never rents more than the cap; without them it may
    plan = planner.plan(capped).plan
    assert plan.units_by_type().get(name, 0) <= 1
    assert growth_moves(plan, capped) == []  # one stage of the capped type: nothing fits
    assert len(growth_moves(plan, problem)) == 1


def test_unit_repair_grows_within_the_caps_it_planned_on(tmp_path, tiny):
    """The trace held 1 unit for its first 10 s of 10 hours only: a second unit pays in the
    jobs, but the plan was made within the trace's low, and so is its growth."""
    from heterps_sim.planner.robust import headroom_sweep
    problem, planner, name = tiny
    (tmp_path / "t.csv").write_text("0,1\n10,3\n36000,3\n")
    market = parse_market({"spot": {name: {"price_per_hour": 0.05, "trace": "t.csv"}},
                           "checkpoint": {"write_s": 1.0}}, "<m>", base=tmp_path)
    capped = spot_priced(problem, market, within_trace=True)
    tight = replace(problem, throughput_limit=0.99 * planner.plan(capped).result.throughput)
    capped = replace(capped, throughput_limit=tight.throughput_limit)
    (start,) = headroom_sweep(tight, market.known(), planner, headrooms=(0.0,), seeds=6,
                              plan_on=capped).candidates
    assert not start.holds  # the premise: noise makes it miss, so units would be added
    grown = unit_repair(tight, start, market.known(), seeds=6, plan_on=capped)
    assert grown.plan.units_by_type().get(name, 0) <= 1
    free = unit_repair(tight, start, market.known(), seeds=6)  # without the caps: it grows
    assert free.plan.units_by_type().get(name, 0) > 1


def test_the_choice_never_sees_the_held_out_part(tmp_path, tiny):
    """Two markets that differ only in the part they replay choose the same plans by the same
    jobs; the held-out replay is where they differ."""
    problem, planner, name = tiny
    harsh = _market(tmp_path, name, (3600, 7200))
    mild = _market(tmp_path, name, (0, 3600), fit=None)  # replays what the other knows
    a, held = market_sweep(problem, harsh, planner, headrooms=(0.0,), seeds=4)
    b, none = market_sweep(problem, mild, planner, headrooms=(0.0,), seeds=4)
    assert none is None  # the mild market holds nothing out
    assert [c.label for c in a.candidates] == [c.label for c in b.candidates]
    for x, y in zip(a.candidates, b.candidates):
        assert np.array_equal(x.outcome.cost_usd, y.outcome.cost_usd)
    assert a.best is not None and a.best.label == b.best.label
    assert held.chosen is held.rows[0] and held.chosen.candidate is a.best
    # the plans renting the traced type are replayed on the harsh hour: the fall to 1 unit
    # leaves a job of 2 or 3 units waiting, so the replay costs more than the fit window said
    # and runs slower than the same plan on demand
    traced = [r for r in held.rows if r.candidate.plan.units_by_type().get(name, 0) > 1]
    assert traced
    for r in traced:
        assert r.replay is not None, r.failure
        assert r.replay.run_s.mean() > r.replay.reference.run_s.mean()
        assert r.throughput_lost > 0
        assert r.predicted_off != 0
        assert np.array_equal(r.replay.step_s, r.candidate.outcome.step_s)
    # the cheapest plan holding the floor all on demand is priced on demand
    assert held.on_demand is not None and not held.on_demand.outcome.market.spot
    from heterps_sim.plots.episodes import held_out_lines, sweep_lines
    text = "\n".join(sweep_lines(problem, harsh, a) + held_out_lines(held))
    assert "scored by the same jobs on the part of each trace the planner knows" in text
    assert f"  {a.best.label} (chosen)" in text
    for r in traced:  # each replayed row prints its prediction's error against the replay
        assert f"{100 * r.predicted_off:+6.1f}%" in text


def test_held_out_rows_are_distinct_plans(tmp_path, tiny):
    problem, planner, name = tiny
    market = _market(tmp_path, name, (3600, 7200))
    sweep, _ = market_sweep(problem, market, planner, headrooms=(0.0, 0.5), seeds=3)
    rows = held_out(problem, market, sweep, seeds=3).rows
    keys = [repr(r.candidate.plan.to_json_dict()) for r in rows]
    assert len(keys) == len(set(keys))


def test_a_plan_that_cannot_finish_on_the_held_out_part_is_reported_not_raised(tmp_path, tiny):
    """Chosen on a calm hour (no checkpoints needed), a job of 25 minutes on 3 units replays an
    hour that holds 3 units for 20 minutes at a time: it never finishes there."""
    from heterps_sim.planner.robust import Candidate, Sweep, with_unit_added
    problem, planner, name = tiny
    problem = replace(problem, num_samples=1500 * problem.throughput_limit / 0.8)
    market = _market(tmp_path, name, (3600, 7200))
    plan = planner.plan(problem).plan
    from heterps_sim.planner.episodes import rentable
    plan = with_unit_added(with_unit_added(rentable(plan, planner.plan(problem).result), 0), 0)
    from heterps_sim.planner.episodes import rental_episodes
    calm = rental_episodes(problem, plan, market.known(), seeds=2, reference=False)
    sweep = Sweep((Candidate("three units", 0.0, plan, 1.0, calm),))
    (row,) = held_out(problem, market, sweep, seeds=2).rows
    assert row.replay is None and "reclaims" in row.failure


def test_the_within_trace_family_runs_only_where_the_trace_binds(tmp_path, tiny):
    problem, planner, name = tiny
    calm = _market(tmp_path, name, (3600, 7200))  # knows 3 units always held
    labels = [c.label for c in market_sweep(problem, calm, planner, headrooms=(0.0, 1.0),
                                            seeds=3)[0].candidates]
    assert not any(x.startswith("within trace") for x in labels)
    (tmp_path / "low.csv").write_text("0,1\n10,3\n36000,3\n")  # knows a level of 1
    low = parse_market({"spot": {name: {"price_per_hour": 0.05, "trace": "low.csv",
                                        "fit_window_s": [0, 36000]}},
                        "checkpoint": {"write_s": 1.0}}, "<m>", base=tmp_path)
    sweep, _ = market_sweep(problem, low, planner, headrooms=(0.0, 1.0), seeds=3)
    spot = [c for c in sweep.candidates if c.label.startswith("spot prices")]
    within = [c for c in sweep.candidates if c.label.startswith("within trace")]
    assert any(c.plan.units_by_type().get(name, 0) > 1
               for c in spot if c.plan is not None)  # the premise: the trace binds
    assert within and all(
        c.plan is None or c.plan.units_by_type().get(name, 0) <= 1
        for c in within)


def test_shortfall_is_the_mean_distance_below_the_floor():
    from types import SimpleNamespace

    from heterps_sim.planner.robust import shortfall
    problem = SimpleNamespace(batch_size=100, throughput_limit=10.0)
    # 4 jobs of 10 steps x 100 samples: 1,000 samples over 50, 100, 200 and 250 s
    outcome = SimpleNamespace(steps=10, run_s=np.array([50.0, 100.0, 200.0, 250.0]))
    # throughputs 20, 10, 5, 4: shortfalls 0, 0, 5, 6
    assert shortfall(problem, outcome) == pytest.approx(11 / 4)


def test_unit_repair_skips_a_unit_the_plan_cannot_run_with(tmp_path, tiny, monkeypatch):
    """A unit more can put a stage past its minimum batch per unit, and that plan does not run
    in the simulator (rental_episodes raises): the growth tries the other moves and goes on
    instead of failing the whole sweep."""
    import heterps_sim.planner.robust as robust
    problem, planner, name = tiny
    market = _market(tmp_path, name, (0, 3600), fit=None)
    tight = replace(problem, throughput_limit=0.99 * planner.plan(problem).result.throughput)
    (start,) = robust.headroom_sweep(tight, market, planner, headrooms=(0.0,),
                                     seeds=6).candidates
    assert not start.holds  # the premise: noise makes it miss, so units would be added
    real = robust.rental_episodes
    tried = []

    def refuse_beyond_two(problem, plan, market, **kw):
        tried.append(sum(plan.units_by_type().values()))
        if tried[-1] > 2:
            raise ValueError("the plan does not run in the simulator at seed 0: too many units")
        return real(problem, plan, market, **kw)
    monkeypatch.setattr(robust, "rental_episodes", refuse_beyond_two)
    grown = robust.unit_repair(tight, start, market, seeds=6)
    assert max(tried) > 2  # a refused plan was tried, and skipped
    assert sum(grown.plan.units_by_type().values()) <= 2
