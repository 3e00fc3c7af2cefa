"""The learned spot policy (planner/learned/): its cases, what a decision costs in simulated
jobs, the policy's decisions and gradient, training and its checkpoint."""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from heterps_sim.core.files import UserFileError
from heterps_sim.planner import Planner
from heterps_sim.planner.episodes import rentable, rental_episodes
from heterps_sim.planner.learned.answer import best_scored
from heterps_sim.planner.learned.decide import (
    FAILED_REWARD,
    HEADROOMS,
    MISS_PENALTY,
    Case,
    Decision,
    Scored,
    grown,
    sub_market,
)
from heterps_sim.planner.learned.family import HELD_OUT_SEEDS, ROOM, case
from heterps_sim.planner.learned.policy import SpotPolicy, act
from heterps_sim.planner.learned.train import SHIPPED, Args, load_policy, main, save, train

SEED = 7  # a training case: 3 layers, 3 types, two of them offered on spot, a binding floor


@pytest.fixture(scope="module")
def small():
    problem, market = case(SEED)
    return problem, market, Case(problem, market, seeds=4)


def test_cases_are_seeded_and_their_floor_binds_with_room():
    a, b = case(SEED), case(SEED)
    assert a[0].throughput_limit == b[0].throughput_limit
    assert a[0].num_samples == b[0].num_samples
    assert {n: t.reclaims_per_hour for n, t in a[1].spot.items()} == \
        {n: t.reclaims_per_hour for n, t in b[1].spot.items()}
    problem, _ = a
    answer = Planner().plan(problem)
    assert answer.feasible
    # room for the largest headroom: some plan meets ROOM x the floor on mean times
    assert ROOM >= 1 + max(HEADROOMS)
    assert Planner().plan(replace(problem, throughput_limit=ROOM * problem.throughput_limit)
                          ).feasible
    # held-out cases are other problems
    assert case(HELD_OUT_SEEDS + SEED)[0].throughput_limit != problem.throughput_limit


def test_the_on_demand_decision_costs_the_planners_answer_on_demand(small):
    """An oracle built apart: the planner's answer on mean times, rented all on demand, the
    same seeds, through rental_episodes directly."""
    problem, market, c = small
    answer = Planner().plan(problem)
    direct = rental_episodes(problem, rentable(answer.plan, answer.result), market.on_demand(),
                             seeds=4, reference=False)
    scored = c.score(Decision(frozenset(), 0.0, 1.0))
    assert scored.cost == pytest.approx(direct.cost.mean, rel=1e-12)
    assert c.reference == pytest.approx(direct.cost.mean, rel=1e-12)
    np.testing.assert_array_equal(scored.outcome.run_s, direct.run_s)


def test_spot_decisions_rent_only_the_chosen_types_on_spot(small):
    problem, market, c = small
    assert len(market.spot) >= 2
    one = sorted(market.spot)[:1]
    sub = sub_market(market, one)
    assert set(sub.spot) == set(one)
    assert sub.checkpoint_write_s == market.checkpoint_write_s
    d = Decision(frozenset(one), 0.0, 1.0)
    scored = c.score(d)
    plan = c.base(d.spot, 0.0).plan
    assert scored.outcome.spot_units == {n: k for n, k in plan.units_by_type().items()
                                         if n in one}


def test_the_reward_is_the_log_cost_ratio_less_the_miss_penalty(small):
    problem, market, c = small
    for d in [Decision(frozenset(market.spot), h, 1.0) for h in HEADROOMS[:3]]:
        s = c.score(d)
        if s.outcome is None:
            assert s.reward == FAILED_REWARD
            continue
        expected = -math.log(s.cost / c.reference)
        missing = market.probability - s.outcome.meet.mean
        if missing > 1e-12:
            expected -= MISS_PENALTY + 5.0 * missing
        assert s.reward == pytest.approx(expected, rel=1e-12)
        assert s.holds == (missing <= 1e-12)


def test_units_are_added_per_stage_within_the_caps(small):
    problem, _, c = small
    plan = c.base(frozenset(), 0.0).plan
    assert grown(plan, (), problem) == plan
    more = grown(plan, (2,) * len(plan.stages), problem)
    assert [s.num_replicas for s in more.stages] == [s.num_replicas + 2 for s in plan.stages]
    # cap every type at one unit more than the plan's: each stage of that type grows by one
    # at most, stages in order
    used = plan.units_by_type()
    capped = replace(problem, available=tuple(used[n] + 1 if n in used else None
                                              for n in problem.type_names))
    grown_capped = grown(plan, (2,) * len(plan.stages), capped)
    assert grown_capped.units_by_type() == {n: k + 1 for n, k in used.items()}


def test_a_headroom_quantile_takes_the_least_headroom_whose_cumulative_share_reaches_it():
    from heterps_sim.planner.learned.policy import _pick
    d = torch.distributions.Categorical(probs=torch.tensor([0.1, 0.3, 0.2, 0.4]))
    assert int(_pick(d, True, None)) == 3  # the most likely
    # cumulative 0.1, 0.4, 0.6, 1.0
    assert [int(_pick(d, True, None, q)) for q in (0.05, 0.1, 0.4, 0.5, 0.6, 0.61, 1.0)] == \
        [0, 0, 1, 2, 2, 3, 3]


def test_the_policy_alone_plans_at_its_quantile_headroom_and_the_search_scores_the_mode(small):
    from heterps_sim.planner.learned.answer import ALONE_QUANTILE, learned_answer
    problem, market, c = small
    policy = load_policy(SHIPPED)
    with torch.no_grad():
        want = act(policy, c, greedy=True, headroom_quantile=ALONE_QUANTILE).decision
        mode = act(policy, c, greedy=True).decision
    ans = learned_answer(problem, market, policy, seeds=c.seeds, samples=0)
    assert ans.alone.decision == want
    assert ans.tried == len({want, mode})  # no samples: the two greedy rules alone
    best = best_scored([c.score(want), c.score(mode)])
    assert ans.searched.decision == best.decision
    assert ans.searched.reward == pytest.approx(best.reward, rel=1e-12)


def test_greedy_decisions_are_deterministic_and_spot_stays_within_the_market(small):
    problem, market, c = small
    torch.manual_seed(0)
    policy = SpotPolicy()
    with torch.no_grad():
        a, b = act(policy, c, greedy=True), act(policy, c, greedy=True)
        assert a.decision == b.decision
        gen = torch.Generator().manual_seed(1)
        sampled = [act(policy, c, generator=gen).decision for _ in range(12)]
    assert all(d.spot <= set(market.spot) for d in sampled)
    assert len({d for d in sampled}) > 1  # a fresh policy explores
    # the log-probability of a given decision is what sampling it reported
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        first = act(policy, c, generator=gen)
        again = act(policy, c, given=first.decision)
    assert again.decision == first.decision
    assert float(again.log_prob) == pytest.approx(float(first.log_prob), abs=1e-6)


def test_a_policy_gradient_step_makes_the_rewarded_decision_likelier(small):
    _, market, c = small
    torch.manual_seed(0)
    policy = SpotPolicy()
    good = Decision(frozenset(market.spot), HEADROOMS[1], 1.0)
    bad = Decision(frozenset(), HEADROOMS[0], 2.0)
    opt = torch.optim.SGD(policy.parameters(), lr=0.1)
    before = float(act(policy, c, given=good).log_prob.detach())
    loss = -(act(policy, c, given=good).log_prob - act(policy, c, given=bad).log_prob)
    opt.zero_grad()
    loss.backward()
    opt.step()
    assert float(act(policy, c, given=good).log_prob.detach()) > before


def test_training_is_deterministic_and_its_checkpoint_round_trips(tmp_path):
    args = Args(updates=2, samples=2, jobs=2, seconds=1e4, out=str(tmp_path / "p.pt"))
    rows = []
    p1, stats = train(args, rows.append)
    p2, _ = train(args)
    assert stats["updates"] == 2 and len(rows) == stats["cases"] >= 1
    # two cases an update: rolled out by two processes as by one
    two = args.model_copy(update={"workers": 2, "updates": 1})
    a, _ = train(two, processes=2)
    b, _ = train(two, processes=1)
    for (k, v), (_, w) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(v, w), k
    torch.manual_seed(two.seed)  # the weights train() starts from
    start = SpotPolicy(hidden=two.hidden)
    assert any(not torch.equal(v, w) for v, w in zip(a.state_dict().values(),
                                                      start.state_dict().values()))
    assert stats["jobs"] > 0 and stats["simulated_samples"] > 0
    for (k, v), (_, w) in zip(p1.state_dict().items(), p2.state_dict().items()):
        assert torch.equal(v, w), k
    save(args.out, p1, stats)
    loaded = load_policy(args.out)
    for (k, v), (_, w) in zip(p1.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(v, w), k


def test_bad_checkpoints_and_flags_are_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.pt"
    bad.write_text("not a checkpoint")
    with pytest.raises(UserFileError, match="not a spot-policy checkpoint"):
        load_policy(bad)
    torch.save({"format": "other"}, tmp_path / "other.pt")
    with pytest.raises(UserFileError, match="format"):
        load_policy(tmp_path / "other.pt")
    assert main(["--samples", "1", "--out", str(tmp_path / "x.pt")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "samples" in err
    assert main(["--out", str(tmp_path / "missing" / "x.pt")]) == 2
    assert "folder does not exist" in capsys.readouterr().err


def test_the_search_keeps_the_cheapest_decision_that_holds():
    class Outcome:
        def __init__(self, cost, holds):
            self.cost = type("I", (), {"mean": cost})()
            self.meets_probability = holds
    d = [Decision(frozenset(), h, 1.0) for h in HEADROOMS[:4]]
    scored = [Scored(d[0], None, Outcome(5.0, False), -0.5),
              Scored(d[1], None, Outcome(9.0, True), -1.0),
              Scored(d[2], None, Outcome(7.0, True), -0.8),
              Scored(d[3], None, None, FAILED_REWARD)]
    assert best_scored(scored).decision == d[2]
    assert best_scored([scored[0], scored[3]]).decision == d[0]  # none holds: best reward


def test_the_shipped_policy_loads_and_says_how_it_was_trained():
    from heterps_sim.planner.learned.train import trained_stats
    policy = load_policy(SHIPPED)
    assert isinstance(policy, SpotPolicy)
    stats = trained_stats(SHIPPED)
    assert stats["updates"] > 0 or stats["imitation"]["cases"] > 0
    assert stats["jobs"] > 0 and stats["wall_s"] > 0


def test_a_search_label_is_the_best_of_its_grid_and_imitation_learns_it():
    from heterps_sim.planner.learned.imitation import imitate, search_label, spot_sets
    label = search_label(SEED, jobs=3)
    problem, market = case(SEED)
    c = Case(problem, market, seeds=3)
    grid = [c.score(Decision(s, h, 1.0)) for s in spot_sets(market.spot) for h in HEADROOMS]
    held = [g for g in grid if g.holds]
    chosen = c.score(label.decisions[0])
    # the refinements (checkpoints, units) never lose what the grid's best had
    if held:
        assert chosen.holds and chosen.cost <= min(g.cost for g in held) + 1e-12
    else:
        assert chosen.reward >= max(g.reward for g in grid) - 1e-12
    assert label.rewards[0] == pytest.approx(chosen.reward)
    torch.manual_seed(0)
    policy = SpotPolicy()
    imitate(policy, [label], epochs=60, lr=0.02)
    with torch.no_grad():
        assert act(policy, c, greedy=True).decision == label.decisions[0]


def test_a_labels_file_is_extended_to_the_labels_made_at_once(tmp_path, monkeypatch):
    """_labels keeps the first cases with a plan in seed order, however it got there."""
    from types import SimpleNamespace

    import heterps_sim.planner.learned.imitation as imitation
    from heterps_sim.planner.learned.train import IMITATION_OFFSET, _labels

    def fake(seed, jobs):  # every third case has no plan
        return None if seed % 3 == 0 else SimpleNamespace(case_seed=seed, jobs=jobs)
    monkeypatch.setattr(imitation, "search_label", fake)
    path = str(tmp_path / "labels.pkl")
    at_once, _, made = _labels(Args(imitation_cases=9, jobs=2, labels=""), None)
    assert made == at_once
    _labels(Args(imitation_cases=4, jobs=2, labels=path), None)
    grown_labels, drawn, made = _labels(Args(imitation_cases=9, jobs=2, labels=path), None)
    assert len(made) == 5  # four were read
    assert [r.case_seed for r in grown_labels] == [r.case_seed for r in at_once]
    assert all(r.case_seed % 3 for r in at_once) and len(at_once) == 9
    assert drawn == at_once[-1].case_seed + 1 - IMITATION_OFFSET
    # another seed or job count does not reuse the file
    other, _, _ = _labels(Args(imitation_cases=2, jobs=3, labels=path), None)
    assert [r.jobs for r in other] == [3, 3]


def test_the_sweep_in_hindsight_is_the_cheapest_of_its_plans_holding_on_the_fresh_jobs(
        monkeypatch):
    """hindsight_pick keeps the cheapest plan of the sweep that holds the floor on the fresh
    jobs: every plan of the sweep scored apart (rental_episodes on the fresh seeds) agrees, so
    the sweep's own pick, chosen on other jobs, can be no cheaper where it holds."""
    from heterps_sim.planner import robust
    from heterps_sim.planner.learned import evaluate
    problem, market = case(SEED)
    monkeypatch.setattr(evaluate, "case", lambda seed: (problem, market))
    swept = []
    sweep_once = robust.market_sweep
    monkeypatch.setattr(robust, "market_sweep",
                        lambda *a, **k: swept.append(sweep_once(*a, **k)) or swept[-1])
    hind = evaluate.hindsight_pick(0, seeds=4, fresh=6)
    sweep, _ = swept[0]
    held = [out.cost.mean for out in (
        rental_episodes(problem, cand.plan, market, seeds=6, reference=False,
                        first_seed=evaluate.FRESH_SEED)
        for cand in sweep.candidates if cand.plan is not None) if out.meets_probability]
    assert len(held) >= 2  # a choice to make: the case has several plans that hold
    assert hind.holds and hind.cost == pytest.approx(min(held), rel=1e-12)
